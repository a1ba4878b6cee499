package sim

import (
	"bufio"
	"bytes"
	"crypto/subtle"
	"encoding/json"
	"math/rand/v2"
	"net"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/inferrail/inferrail/model/openai"
	"github.com/inferrail/inferrail/model/prefix"
	"github.com/inferrail/inferrail/model/prompt"
	"github.com/inferrail/inferrail/model/token"
	"github.com/inferrail/inferrail/sim/vllmmetrics"
)

// watchEvery is how often the requests waiting on the engine are checked
// for clients that have gone. vLLM aborts a request when its client
// disconnects; 20 ms keeps the engine slot's release well under 100 ms.
const watchEvery = 20 * time.Millisecond

// runtimeRand draws from the runtime's random source, which is safe for
// concurrent use.
type runtimeRand struct{}

func (runtimeRand) Uint64() uint64 { return rand.Uint64() }

func (inst *instance) handle(ctx *fasthttp.RequestCtx) {
	path := ctx.Path()
	if f := inst.s.fault.Load(); f != nil && f.applies(string(path)) {
		if inst.applyFault(ctx, f) {
			return
		}
	}
	if !inst.authorized(ctx, path) {
		return
	}
	switch string(path) {
	case "/v1/chat/completions":
		if inst.allow(ctx, "POST") {
			inst.generate(ctx, true)
		}
	case "/v1/completions":
		if inst.allow(ctx, "POST") {
			inst.generate(ctx, false)
		}
	case "/v1/messages":
		if inst.allow(ctx, "POST") {
			inst.messages(ctx)
		}
	case "/v1/messages/count_tokens":
		if inst.allow(ctx, "POST") {
			inst.countTokens(ctx)
		}
	case "/v1/responses":
		if inst.allow(ctx, "POST") {
			inst.responses(ctx)
		}
	case "/v1/embeddings":
		if inst.allow(ctx, "POST") {
			inst.embeddings(ctx)
		}
	case "/v1/models":
		if inst.allow(ctx, "GET") {
			inst.models(ctx)
		}
	case "/health":
		if inst.allow(ctx, "GET") {
			ctx.SetStatusCode(fasthttp.StatusOK)
		}
	case "/metrics":
		if inst.allow(ctx, "GET") {
			ctx.SetContentType(vllmmetrics.ContentType)
			ctx.SetBody(inst.stats.m.AppendText(nil))
		}
	case "/version":
		if inst.allow(ctx, "GET") {
			writeJSON(ctx, fasthttp.StatusOK, openai.AppendVersion(nil, inst.opts.Version))
		}
	case "/reset_prefix_cache":
		if inst.allow(ctx, "POST") {
			// vLLM answers 200 whether or not the reset succeeded.
			inst.drv.resetPrefixCache()
			ctx.SetStatusCode(fasthttp.StatusOK)
		}
	case openai.PathTokenize:
		if inst.allow(ctx, "POST") {
			inst.tokenize(ctx)
		}
	case openai.PathDetokenize:
		if inst.allow(ctx, "POST") {
			inst.detokenize(ctx)
		}
	case openai.PathChatRender, openai.PathCompletionRender:
		if inst.allow(ctx, "POST") {
			inst.render(ctx, string(path) == openai.PathChatRender)
		}
	default:
		if id, ok := bytes.CutPrefix(path, []byte("/v1/responses/")); ok && len(id) > 0 {
			switch slash := bytes.IndexByte(id, '/'); {
			case slash < 0:
				if inst.allow(ctx, "GET") {
					inst.retrieveResponse(ctx, string(id))
				}
				return
			case slash > 0 && string(id[slash:]) == "/cancel":
				if inst.allow(ctx, "POST") {
					inst.cancelResponse(ctx, string(id[:slash]))
				}
				return
			}
		}
		writeError(ctx, httpError(fasthttp.StatusNotFound))
	}
}

// httpError is Starlette's HTTPException as vLLM's handler renders it: the
// status phrase as both message and type.
func httpError(status int) *openai.Error {
	phrase := fasthttp.StatusMessage(status)
	return &openai.Error{Status: status, Type: phrase, Message: phrase}
}

// allow answers 405 with Allow unless the request uses method.
func (inst *instance) allow(ctx *fasthttp.RequestCtx, method string) bool {
	if string(ctx.Method()) == method {
		return true
	}
	ctx.Response.Header.Set("Allow", method)
	writeError(ctx, httpError(fasthttp.StatusMethodNotAllowed))
	return false
}

func writeJSON(ctx *fasthttp.RequestCtx, status int, body []byte) {
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	ctx.SetBody(body)
}

func writeError(ctx *fasthttp.RequestCtx, e *openai.Error) {
	writeJSON(ctx, e.Status, openai.AppendError(nil, e))
}

// asAPIError turns a parse or check error into the error to send.
func asAPIError(err error) *openai.Error {
	if e, ok := err.(*openai.Error); ok {
		return e
	}
	return &openai.Error{Status: 400, Type: openai.TypeBadRequestError, Message: err.Error()}
}

// applyFault acts out f on one request. It reports whether the request has
// been dealt with; false means serve it normally (a delay has passed, or a
// hang was released).
func (inst *instance) applyFault(ctx *fasthttp.RequestCtx, f *Fault) bool {
	switch f.Kind {
	case FaultClose:
		ctx.HijackSetNoResponse(true)
		ctx.Hijack(func(c net.Conn) { c.Close() })
		return true
	case FaultHang:
		select {
		case <-*inst.s.faultChanged.Load():
		case <-inst.stopping:
			return true
		}
	case FaultDelay:
		t := time.NewTimer(f.Delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-inst.stopping:
			return true
		}
	case FaultFail:
		status := f.Status
		if status == 0 {
			status = fasthttp.StatusInternalServerError
		}
		writeError(ctx, &openai.Error{Status: status, Type: "InternalServerError",
			Message: "simulated engine failure (status " + strconv.Itoa(status) + ")"})
		return true
	}
	return false
}

func (inst *instance) served(name string) bool {
	for _, n := range inst.opts.Names() {
		if n == name {
			return true
		}
	}
	return false
}

// request is a validated generation request, ready for the engine.
type request struct {
	chat      bool
	model     string
	role      string
	prompt    []uint32
	maxTokens int    // tokens to generate
	reason    string // finish reason once they are generated
	maxParam  int    // the request's own max_tokens, 0 when unset
	salt      string
	baseID    string
	stream    bool
	usage     bool // a final usage chunk
	contUsage bool // usage on every chunk
	opts      openai.StreamOptions
	priority  int64
	bodyID    openai.Opt[string] // the body's request_id
	// batch holds, for a completion of several prompts (a list of strings
	// or of token lists), one request per prompt, the first being the
	// request itself; nil for one prompt.
	batch []*request
}

// parse reads and validates a chat or completion body as vLLM does.
func (inst *instance) parse(ctx *fasthttp.RequestCtx, chat bool) (*request, *openai.Error) {
	r, e := inst.prepare(ctx, chat)
	if e != nil {
		return nil, e
	}
	// After the length checks, as vLLM's engine checks ids after its
	// renderer checked the length. Only a token-id prompt can fail it.
	parts := r.batch
	if parts == nil {
		parts = []*request{r}
	}
	for _, part := range parts {
		if e := outOfVocabulary(part.prompt); e != nil {
			return nil, e
		}
	}
	hdr := ctx.Request.Header.Peek("X-Request-Id")
	r.baseID = openai.BaseRequestID(string(hdr), hdr != nil, r.bodyID, runtimeRand{})
	return r, nil
}

// prepare is what vLLM's renderer does to a chat or completion body,
// before the engine sees it: parsed, validated, rendered and tokenized,
// and checked against the context length.
func (inst *instance) prepare(ctx *fasthttp.RequestCtx, chat bool) (*request, *openai.Error) {
	if err := openai.CheckContentType(string(ctx.Request.Header.ContentType())); err != nil {
		return nil, asAPIError(err)
	}
	r := &request{chat: chat}
	var opts openai.StreamOptions
	var bodyID openai.Opt[string]
	var explicit bool
	var maxTok int64
	if chat {
		req, err := openai.ParseChat(ctx.PostBody())
		if err != nil {
			return nil, asAPIError(err)
		}
		if e := inst.chatRequest(r, req); e != nil {
			return nil, e
		}
		maxTok, explicit = req.MaxOutputTokens()
		opts, bodyID, r.priority = req.StreamOptions, req.RequestID, req.Priority
	} else {
		req, err := openai.ParseCompletion(ctx.PostBody())
		if err != nil {
			return nil, asAPIError(err)
		}
		if r.model = inst.resolveModel(req.Model); r.model == "" {
			return nil, openai.ModelNotFound(req.Model)
		}
		if err := req.Check(); err != nil {
			return nil, asAPIError(err)
		}
		if req.Prompt.Kind == openai.PromptTokens {
			r.prompt = req.Prompt.Tokens
		} else {
			r.prompt = token.Sim{}.Encode(nil, req.Prompt.Text)
		}
		maxTok, explicit = req.MaxTokens, true
		r.stream, opts, r.salt, bodyID = req.Stream, req.StreamOptions, req.CacheSalt, req.RequestID
		r.priority = req.Priority
		if req.Prompt.Count > 1 {
			prompts, e := batchPrompts(ctx.PostBody(), req.Prompt.Kind)
			if e != nil {
				return nil, e
			}
			for _, p := range prompts {
				part := *r
				part.prompt = p
				r.batch = append(r.batch, &part)
			}
		}
	}
	r.opts = opts
	r.usage, r.contUsage = opts.Usage(false)
	parts := r.batch
	if parts == nil {
		parts = []*request{r}
	}
	for _, part := range parts {
		part.opts, part.usage, part.contUsage = r.opts, r.usage, r.contUsage
		if e := inst.fitContext(part, maxTok, explicit); e != nil {
			return nil, e
		}
	}
	r.bodyID = bodyID
	return r, nil
}

// chatRequest fills r from a parsed chat request: its model, prompt,
// role, stream and salt.
func (inst *instance) chatRequest(r *request, req *openai.ChatRequest) *openai.Error {
	if r.model = inst.resolveModel(req.Model); r.model == "" {
		return openai.ModelNotFound(req.Model)
	}
	if err := req.Check(); err != nil {
		return asAPIError(err)
	}
	r.prompt = inst.renderChat(req)
	r.role = req.ResponseRole("assistant")
	r.stream, r.salt = req.Stream, req.CacheSalt
	return nil
}

// resolveModel returns the served name a request asked for, the first
// served name when it named none, or "" when it asked for another model.
func (inst *instance) resolveModel(name string) string {
	if name == "" {
		return inst.opts.Names()[0]
	}
	if inst.served(name) {
		return name
	}
	return ""
}

// outOfVocabulary is vLLM's refusal of a prompt holding a token id past
// the vocabulary (InputProcessor._validate_model_input, a
// VLLMValidationError: 400), for the simulator's vocabulary of
// token.VocabSize ids; nil when every id is in it.
func outOfVocabulary(ids []uint32) *openai.Error {
	top := uint32(0)
	for _, id := range ids {
		top = max(top, id)
	}
	if top < token.VocabSize {
		return nil
	}
	return &openai.Error{Status: 400, Type: openai.TypeBadRequestError,
		Message: "Token id " + strconv.FormatUint(uint64(top), 10) + " is out of vocabulary"}
}

// renderChat renders messages with the simulator's template and tokenizes
// them. The rendering is prompt.SimChat, which the gateway also calls to
// predict this engine's blocks (tokenizer builtin:sim).
func (inst *instance) renderChat(req *openai.ChatRequest) []uint32 {
	return token.Sim{}.Encode(nil, prompt.SimChat(req))
}

// fitContext settles how many tokens to generate, refusing requests that do
// not fit in --max-model-len as vLLM does.
func (inst *instance) fitContext(r *request, maxTok int64, explicit bool) *openai.Error {
	limit := inst.opts.Engine.MaxModelLen
	n := len(r.prompt)
	if n == 0 {
		return &openai.Error{Status: 400, Type: openai.TypeBadRequestError, Param: "prompt",
			Message: "The prompt must not be empty."}
	}
	if n >= limit || (explicit && int64(n)+maxTok > int64(limit)) {
		msg := "This model's maximum context length is " + strconv.Itoa(limit) + " tokens. However, "
		if explicit {
			msg += "you requested " + strconv.FormatInt(maxTok, 10) + " output tokens and your prompt contains " +
				strconv.Itoa(n) + " input tokens, for a total of " + strconv.FormatInt(int64(n)+maxTok, 10) +
				" tokens. Please reduce the length of the input prompt or the number of requested output tokens."
		} else {
			msg += "your request has " + strconv.Itoa(n) + " input tokens. Please reduce the length of the input messages."
		}
		return &openai.Error{Status: 400, Type: openai.TypeBadRequestError, Param: "input_tokens", Message: msg}
	}
	if explicit {
		r.maxTokens, r.reason, r.maxParam = int(maxTok), "length", int(maxTok)
		return nil
	}
	// No cap given: a real model stops at its end-of-sequence token. The
	// simulator stops after a deterministic 16 to 127 tokens.
	r.maxTokens, r.reason = min(16+int(seedOf(r.prompt)%112), limit-n), "stop"
	return nil
}

// seedOf is the seed of a prompt's answer: the same prompt always gets the
// same answer, as with temperature 0.
func seedOf(prompt []uint32) uint64 {
	h := uint64(14695981039346656037)
	for _, t := range prompt {
		h ^= uint64(t)
		h *= 1099511628211
	}
	return h
}

func (inst *instance) generate(ctx *fasthttp.RequestCtx, chat bool) {
	r, e := inst.parse(ctx, chat)
	if e != nil {
		writeError(ctx, e)
		return
	}
	if r.batch != nil {
		inst.respondBatch(ctx, r)
		return
	}
	j, e := inst.submit(r)
	if e != nil {
		writeError(ctx, e)
		return
	}
	inst.respond(ctx, r, j)
}

// submit hands r to the engine as a new job.
func (inst *instance) submit(r *request) (*job, *openai.Error) {
	j := newJob()
	j.seed = seedOf(r.prompt)
	j.maxParam = r.maxParam
	j.req.ID = strconv.FormatUint(inst.reqSeq.Add(1), 10)
	j.req.Root = inst.root
	if r.salt != "" {
		j.req.Root = prefix.Root(inst.opts.Model, "", r.salt)
	}
	j.req.Prompt = r.prompt
	j.req.Output = make([]uint32, r.maxTokens)
	var tok token.Sim
	var one [1]uint32
	for i := range j.req.Output {
		j.req.Output[i] = tok.Encode(one[:0], token.Piece(j.seed, i))[0]
	}
	j.req.Reason = r.reason
	if !inst.drv.submit(j) {
		return nil, &openai.Error{Status: fasthttp.StatusServiceUnavailable, Type: "ServiceUnavailableError",
			Message: "The engine is not running."}
	}
	return j, nil
}

// respond writes j's answer to the OpenAI request r.
func (inst *instance) respond(ctx *fasthttp.RequestCtx, r *request, j *job) {
	chat := r.chat
	created := time.Now().Unix()
	id := openai.CompletionID(r.baseID)
	if chat {
		id = openai.ChatID(r.baseID)
	}
	conn := ctx.Conn()
	if r.stream {
		cfg := openai.StreamConfig{ID: id, Created: created, Model: r.model,
			Fingerprint: inst.fingerprint, IncludeUsage: r.usage}
		st := openai.NewCompletionStream(cfg)
		if chat {
			st = openai.NewChatStream(cfg)
		}
		ctx.SetStatusCode(fasthttp.StatusOK)
		ctx.SetContentType("text/event-stream; charset=utf-8")
		ctx.SetBodyStreamWriter(func(w *bufio.Writer) { inst.stream(w, conn, j, r, st) })
		return
	}
	if !inst.wait(conn, j) {
		return
	}
	n, _ := j.progress()
	usage := openai.Usage{PromptTokens: len(r.prompt), CompletionTokens: n, CachedTokens: j.cached,
		Details: inst.opts.EnablePromptTokensDetails}
	text := token.Generate(j.seed, n)
	fin := openai.Finish{Reason: j.reason}
	var body []byte
	if chat {
		body = openai.AppendChatCompletion(nil, &openai.ChatCompletion{ID: id, Created: created, Model: r.model,
			Role: r.role, Content: text, Finish: fin, Fingerprint: inst.fingerprint, Usage: usage})
	} else {
		body = openai.AppendCompletion(nil, &openai.Completion{ID: id, Created: created, Model: r.model,
			Text: text, Finish: fin, Fingerprint: inst.fingerprint, Usage: usage})
	}
	writeJSON(ctx, fasthttp.StatusOK, body)
}

// wait blocks until j is done. It returns false, having aborted j, when the
// client goes away or the simulator stops first.
func (inst *instance) wait(conn net.Conn, j *job) bool {
	e := inst.watch.Add(conn, nil, j.clientGone)
	defer inst.watch.Remove(e)
	for !j.isDone() {
		select {
		case <-j.notify:
			if j.gone.Load() {
				inst.drv.abort(j)
				return false
			}
		case <-inst.stopping:
			return false
		}
	}
	return true
}

// stream writes j's tokens as SSE events as the engine produces them, one
// chunk per token, as vLLM does. The last token rides on the finish chunk.
func (inst *instance) stream(w *bufio.Writer, conn net.Conn, j *job, r *request, st *openai.Stream) {
	inst.pump(w, conn, j, inst.choiceChunks(j, r, st, func(buf []byte, n int) []byte {
		if r.usage {
			u := openai.Usage{PromptTokens: len(r.prompt), CompletionTokens: n, CachedTokens: j.cached,
				Details: inst.opts.EnablePromptTokensDetails}
			buf = st.AppendUsage(buf, &u)
		}
		return openai.AppendDone(buf)
	}))
}

// choiceChunks is pump's emit for one choice (j, of request r) written by
// st: the role chunk of a chat, a chunk per token, the last token on the
// finish chunk, then what end appends once j has generated its n tokens.
func (inst *instance) choiceChunks(j *job, r *request, st *openai.Stream, end func(buf []byte, n int) []byte) func([]byte, int, bool) []byte {
	sent, roleSent := 0, !r.chat
	usage := openai.Usage{PromptTokens: len(r.prompt), Details: inst.opts.EnablePromptTokensDetails}
	cont := func(n int) *openai.Usage {
		if !r.contUsage {
			return nil
		}
		usage.CompletionTokens = n
		return &usage
	}
	return func(buf []byte, n int, done bool) []byte {
		if !roleSent && (n > 0 || done) {
			buf = st.AppendRole(buf, r.role, cont(0))
			roleSent = true
		}
		last := n
		if done && n > 0 {
			last = n - 1
		}
		for ; sent < last; sent++ {
			buf = st.AppendContent(buf, token.Piece(j.seed, sent), cont(sent+1))
		}
		if !done {
			return buf
		}
		text := ""
		if sent < n {
			text = token.Piece(j.seed, sent)
		}
		buf = st.AppendFinish(buf, text, openai.Finish{Reason: j.reason}, cont(n))
		return end(buf, n)
	}
}

// pump drives a streamed response: at every step of the engine it calls
// emit with an empty buffer and j's progress, and writes and flushes what
// emit appended. It returns after the step that finished j (an aborted j
// writes nothing more), or once the client or the simulator has gone,
// aborting j when the client went.
func (inst *instance) pump(w *bufio.Writer, conn net.Conn, j *job, emit func(buf []byte, n int, done bool) []byte) {
	buf := make([]byte, 0, 1024)
	e := inst.watch.Add(conn, nil, j.clientGone)
	defer inst.watch.Remove(e)
	for {
		select {
		case <-j.notify:
		case <-inst.stopping:
			return
		}
		if j.gone.Load() {
			inst.drv.abort(j)
			return
		}
		n, done := j.progress()
		if done && j.reason == "abort" {
			return
		}
		buf = emit(buf[:0], n, done)
		if done {
			w.Write(buf)
			w.Flush()
			return
		}
		if _, err := w.Write(buf); err != nil {
			inst.drv.abort(j)
			return
		}
		if err := w.Flush(); err != nil {
			inst.drv.abort(j)
			return
		}
	}
}

func (inst *instance) models(ctx *fasthttp.RequestCtx) {
	now := time.Now().Unix()
	names := inst.opts.Names()
	cards := make([]openai.ModelCard, len(names))
	for i, n := range names {
		cards[i] = openai.ModelCard{ID: n, Created: now, Root: inst.opts.Model,
			MaxModelLen: inst.opts.Engine.MaxModelLen, PermissionID: openai.PermissionID(runtimeRand{})}
	}
	writeJSON(ctx, fasthttp.StatusOK, openai.AppendModelList(nil, cards))
}

// tokenize answers vLLM's POST /tokenize for a prompt or chat messages.
func (inst *instance) tokenize(ctx *fasthttp.RequestCtx) {
	var probe struct {
		Messages json.RawMessage `json:"messages"`
	}
	if err := json.Unmarshal(ctx.PostBody(), &probe); err != nil {
		writeError(ctx, &openai.Error{Status: 400, Type: openai.TypeBadRequest, Message: "There was an error parsing the body"})
		return
	}
	var ids []uint32
	if probe.Messages != nil {
		req, err := openai.ParseChat(ctx.PostBody())
		if err != nil {
			writeError(ctx, asAPIError(err))
			return
		}
		ids = inst.renderChat(req)
	} else if pr, err := (&prompt.Preparer{Sim: true}).Tokenize(ctx.PostBody(), time.Time{}); err == nil {
		// A prompt string, "" too, as vLLM's TokenizeCompletionRequest
		// takes it; the gateway answers /tokenize with the same code.
		ids = pr.IDs
	} else {
		req, err := openai.ParseCompletion(ctx.PostBody())
		if err != nil {
			writeError(ctx, asAPIError(err))
			return
		}
		ids = req.Prompt.Tokens
		if req.Prompt.Kind != openai.PromptTokens {
			ids = token.Sim{}.Encode(nil, req.Prompt.Text)
		}
	}
	writeJSON(ctx, fasthttp.StatusOK, openai.AppendTokenize(nil, ids, inst.opts.Engine.MaxModelLen))
}

// authorized applies --api-key as vLLM's AuthenticationMiddleware does:
// paths under /v1 need Authorization: Bearer KEY, else 401 with the body
// {"error":"Unauthorized"} (not the usual error shape).
func (inst *instance) authorized(ctx *fasthttp.RequestCtx, path []byte) bool {
	key := inst.opts.APIKey
	if key == "" || !bytes.HasPrefix(path, []byte("/v1")) || string(ctx.Method()) == "OPTIONS" {
		return true
	}
	if subtle.ConstantTimeCompare(ctx.Request.Header.Peek("Authorization"), []byte("Bearer "+key)) == 1 {
		return true
	}
	ctx.SetStatusCode(fasthttp.StatusUnauthorized)
	ctx.SetContentType("application/json")
	ctx.SetBodyString(`{"error":"Unauthorized"}`)
	return false
}

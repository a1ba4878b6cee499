package sim

import (
	"bufio"
	"encoding/hex"
	"encoding/json"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/inferrail/inferrail/model/openai"
	"github.com/inferrail/inferrail/model/responses"
	"github.com/inferrail/inferrail/model/token"
)

// The OpenAI Responses API as vLLM serves it
// (vllm/entrypoints/openai/responses/serving.py): the body is converted
// into the chat conversation vLLM builds (responses.Messages, with a
// stored response's conversation before it for previous_response_id) and
// served by the chat path; the answer is a ResponsesResponse, or its
// event stream (response.created, response.in_progress, one message of
// output_text deltas, response.completed with the usage). The simulator
// stores responses as vLLM does with VLLM_ENABLE_RESPONSES_API_STORE=1,
// in memory, the most recent storeSize of them, and runs a background
// request (background true, not streamed) as vLLM does: answered at once
// with the queued response, polled with GET /v1/responses/{id}, stopped
// with POST /v1/responses/{id}/cancel.

// storeSize bounds the simulator's response store (vLLM's grows forever).
const storeSize = 4096

// responseStore is an instance's stored responses. Safe for concurrent
// use.
type responseStore struct {
	mu    sync.Mutex
	byID  map[string]*stored
	order []string // ids, oldest first
}

// stored is one stored response: the conversation that continues it, and
// its ResponsesResponse as GET /v1/responses/{id} answers it. A
// background response still running has its job (and is settled, into
// its final answer, the first time it is looked at after the job ends).
type stored struct {
	hist *responses.History
	body []byte
	run  *background
}

// background is a background response's run: its job, and what settles
// it into the stored response.
type background struct {
	j    *job
	call *responseCall
	r    *request
}

// get returns the stored response id, settling a finished background
// one first.
func (st *responseStore) get(id string) *stored {
	st.mu.Lock()
	defer st.mu.Unlock()
	e := st.byID[id]
	if e != nil && e.run != nil && e.run.j.isDone() {
		e = e.run.settle()
		st.byID[id] = e
	}
	return e
}

// cancel is vLLM's cancel_responses on a stored response: a background
// one still running is aborted and stored cancelled, and returned; ok is
// false when the response has finished (or never ran in the background).
func (st *responseStore) cancel(id string, abort func(*job)) (e *stored, ok bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	e = st.byID[id]
	if e == nil || e.run == nil {
		return e, false
	}
	if e.run.j.isDone() && e.run.j.reason != "abort" {
		e = e.run.settle()
		st.byID[id] = e
		return e, false
	}
	abort(e.run.j)
	b := e.run.call
	e = &stored{hist: &responses.History{Messages: b.messages},
		body: b.appendResponse(nil, e.run.r, "cancelled", "", 0, 0, false)}
	st.byID[id] = e
	return e, true
}

// settle is the stored response of a finished background run.
func (b *background) settle() *stored {
	n, _ := b.j.progress()
	text := token.Generate(b.j.seed, n)
	h := &responses.History{Messages: b.call.messages}
	if text != "" {
		h.Output = []string{text}
	}
	return &stored{hist: h, body: b.call.appendResponse(nil, b.r, responseStatus(b.j.reason), text, n, b.j.cached, true)}
}

func (st *responseStore) put(id string, h *stored) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.byID == nil {
		st.byID = make(map[string]*stored)
	}
	if _, ok := st.byID[id]; !ok {
		st.order = append(st.order, id)
	}
	st.byID[id] = h
	for len(st.order) > storeSize {
		delete(st.byID, st.order[0])
		st.order = st.order[1:]
	}
}

// responseCall is one Responses request being served.
type responseCall struct {
	req      *responses.Request
	messages []json.RawMessage // what the store keeps for it
	id       string
	created  int64
	maxOut   int // max_output_tokens as the answer reports it
}

func (inst *instance) responses(ctx *fasthttp.RequestCtx) {
	if err := openai.CheckContentType(string(ctx.Request.Header.ContentType())); err != nil {
		writeError(ctx, asAPIError(err))
		return
	}
	rr, err := responses.Parse(ctx.PostBody())
	if err != nil {
		writeError(ctx, &openai.Error{Status: fasthttp.StatusBadRequest, Type: openai.TypeBadRequestError, Message: err.Error()})
		return
	}
	var hist *responses.History
	if id := rr.PreviousResponseID; id != "" {
		prev := inst.store.get(id)
		if prev == nil {
			writeError(ctx, responses.NotFound(id))
			return
		}
		hist = prev.hist
	}
	call := &responseCall{req: rr, created: time.Now().Unix(), id: "resp_" + randomHex()}
	var e *openai.Error
	if call.messages, err = responses.Messages(rr, hist); err == nil {
		var body []byte
		if body, err = responses.ToChat(rr, hist); err == nil {
			var req *openai.ChatRequest
			if req, err = openai.ParseChat(body); err == nil {
				r := &request{chat: true}
				if e = inst.chatRequest(r, req); e == nil {
					maxTok, explicit := req.MaxOutputTokens()
					if e = inst.fitContext(r, maxTok, explicit); e == nil {
						inst.serveResponse(ctx, call, r)
						return
					}
				}
			}
		}
	}
	if e == nil {
		e = asAPIError(err)
	}
	writeError(ctx, e)
}

// retrieveResponse answers GET /v1/responses/{id} (vLLM's
// retrieve_responses): the stored response, or a 404.
func (inst *instance) retrieveResponse(ctx *fasthttp.RequestCtx, id string) {
	st := inst.store.get(id)
	if st == nil {
		writeError(ctx, responses.NotFound(id))
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, st.body)
}

// cancelResponse answers POST /v1/responses/{id}/cancel (vLLM's
// cancel_responses): a background response still running is aborted and
// answered with status cancelled; any other stored response is a 400, an
// unknown id a 404.
func (inst *instance) cancelResponse(ctx *fasthttp.RequestCtx, id string) {
	e, ok := inst.store.cancel(id, inst.drv.abort)
	switch {
	case e == nil:
		writeError(ctx, responses.NotFound(id))
	case !ok:
		writeError(ctx, &openai.Error{Status: fasthttp.StatusBadRequest, Type: "invalid_request_error",
			Message: "Cannot cancel a synchronous response."})
	default:
		writeJSON(ctx, fasthttp.StatusOK, e.body)
	}
}

// serveResponse runs r on the engine and answers with call's response.
func (inst *instance) serveResponse(ctx *fasthttp.RequestCtx, call *responseCall, r *request) {
	r.baseID = call.id
	call.maxOut = inst.opts.Engine.MaxModelLen - len(r.prompt)
	if r.maxParam > 0 {
		call.maxOut = r.maxParam
	}
	if call.req.Background && call.req.Stream {
		// vLLM streams a background response's events as they are stored
		// (and GET ?stream=true replays them); the simulator does not.
		writeError(ctx, &openai.Error{Status: fasthttp.StatusBadRequest, Type: "invalid_request_error", Param: "background",
			Message: "background with stream is not supported by this simulator; set stream to false and poll GET /v1/responses/{id}."})
		return
	}
	j, e := inst.submit(r)
	if e != nil {
		writeError(ctx, e)
		return
	}
	if call.req.Background {
		// Answered at once, queued; the run settles when looked at after it ends.
		queued := call.appendResponse(nil, r, "queued", "", 0, 0, false)
		inst.store.put(call.id, &stored{hist: &responses.History{Messages: call.messages}, body: queued,
			run: &background{j: j, call: call, r: r}})
		writeJSON(ctx, fasthttp.StatusOK, queued)
		return
	}
	conn := ctx.Conn()
	if call.req.Stream {
		ctx.SetStatusCode(fasthttp.StatusOK)
		ctx.SetContentType("text/event-stream; charset=utf-8")
		ctx.SetBodyStreamWriter(func(w *bufio.Writer) { inst.responseStream(w, conn, j, r, call) })
		return
	}
	if !inst.wait(conn, j) {
		return
	}
	n, _ := j.progress()
	text := token.Generate(j.seed, n)
	body := call.appendResponse(nil, r, responseStatus(j.reason), text, n, j.cached, true)
	inst.storeResponse(call, text, body)
	writeJSON(ctx, fasthttp.StatusOK, body)
}

// storeResponse keeps a finished response for previous_response_id, when
// its request asked to store it.
func (inst *instance) storeResponse(call *responseCall, text string, body []byte) {
	if !call.req.Store {
		return
	}
	h := &responses.History{Messages: call.messages}
	if text != "" {
		h.Output = []string{text}
	}
	inst.store.put(call.id, &stored{hist: h, body: body})
}

// outputID is the id of call's output message.
func (call *responseCall) outputID() string { return "msg_" + call.id[len("resp_"):] }

// appendResponse writes a ResponsesResponse in vLLM's field order
// (protocol.py ResponsesResponse.from_request); done adds the output
// message with text, and the usage.
func (call *responseCall) appendResponse(b []byte, r *request, status, text string, n, cached int, done bool) []byte {
	rr := call.req
	b = append(b, `{"id":`...)
	b = strconv.AppendQuote(b, call.id)
	b = append(b, `,"created_at":`...)
	b = strconv.AppendInt(b, call.created, 10)
	b = append(b, `,"incomplete_details":`...)
	if done && status == "incomplete" {
		b = append(b, `{"reason":"max_output_tokens"}`...)
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"instructions":`...)
	b = appendOptString(b, rr.Instructions)
	b = append(b, `,"metadata":null,"model":`...)
	b = appendText(b, r.model)
	b = append(b, `,"object":"response","output":[`...)
	if done {
		b = call.appendMessage(b, text, "completed")
	}
	b = append(b, `],"parallel_tool_calls":true,"temperature":1.0,"tool_choice":"auto","tools":[`...)
	for i, t := range rr.Tools {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendTool(b, t)
	}
	b = append(b, `],"top_p":1.0,"background":`...)
	b = strconv.AppendBool(b, rr.Background)
	b = append(b, `,"max_output_tokens":`...)
	b = strconv.AppendInt(b, int64(call.maxOut), 10)
	b = append(b, `,"max_tool_calls":null,"previous_response_id":`...)
	b = appendOptString(b, rr.PreviousResponseID)
	b = append(b, `,"prompt":null,"reasoning":`...)
	b = appendReasoning(b, rr.Reasoning)
	b = append(b, `,"service_tier":"auto","status":"`...)
	b = append(b, status...)
	b = append(b, `","text":null,"top_logprobs":null,"truncation":"disabled","usage":`...)
	if done {
		// vLLM's ResponseUsage: the whole prompt in input_tokens, its
		// cached part (num_cached_tokens, always reported) in the details.
		b = append(b, `{"input_tokens":`...)
		b = strconv.AppendInt(b, int64(len(r.prompt)), 10)
		b = append(b, `,"input_tokens_details":{"cached_tokens":`...)
		b = strconv.AppendInt(b, int64(cached), 10)
		b = append(b, `,"input_tokens_per_turn":[],"cached_tokens_per_turn":[]},"output_tokens":`...)
		b = strconv.AppendInt(b, int64(n), 10)
		b = append(b, `,"output_tokens_details":{"reasoning_tokens":0,"tool_output_tokens":0,"output_tokens_per_turn":[],"tool_output_tokens_per_turn":[]},"total_tokens":`...)
		b = strconv.AppendInt(b, int64(len(r.prompt)+n), 10)
		b = append(b, '}')
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"user":`...)
	b = appendOptString(b, rr.User)
	return append(b, `,"input_messages":null,"output_messages":null}`...)
}

// appendMessage writes the output message (ResponseOutputMessage): its
// text part, or no content while in progress (or for no text).
func (call *responseCall) appendMessage(b []byte, text, status string) []byte {
	return append(call.openMessage(b, text, status), '}')
}

// openMessage is appendMessage without the closing brace.
func (call *responseCall) openMessage(b []byte, text, status string) []byte {
	b = append(b, `{"id":`...)
	b = strconv.AppendQuote(b, call.outputID())
	b = append(b, `,"content":[`...)
	if text != "" {
		b = append(b, `{"annotations":[],"text":`...)
		b = appendText(b, text)
		b = append(b, `,"type":"output_text","logprobs":null}`...)
	}
	b = append(b, `],"role":"assistant","status":"`...)
	b = append(b, status...)
	return append(b, `","type":"message"`...)
}

// responseStatus is a finish reason as a response's status: vLLM marks
// an answer cut by max_output_tokens incomplete.
func responseStatus(finish string) string {
	if finish == "length" {
		return "incomplete"
	}
	return "completed"
}

// appendReasoning writes the request's reasoning as vLLM echoes it
// (from_request: reasoning=request.reasoning, openai's Reasoning dumped):
// effort, generate_summary and summary, null when absent; null without
// reasoning.
func appendReasoning(b []byte, raw json.RawMessage) []byte {
	var m map[string]json.RawMessage
	if raw == nil || json.Unmarshal(raw, &m) != nil {
		return append(b, "null"...)
	}
	for i, k := range []string{"effort", "generate_summary", "summary"} {
		if i == 0 {
			b = append(b, '{')
		} else {
			b = append(b, ',')
		}
		b = strconv.AppendQuote(b, k)
		b = append(b, ':')
		var v string
		if json.Unmarshal(m[k], &v) == nil {
			b = appendText(b, v)
		} else {
			b = append(b, "null"...)
		}
	}
	return append(b, '}')
}

// appendTool writes a request's tool as vLLM echoes it: read into
// openai's Tool and dumped, a function tool as FunctionTool (name,
// parameters, strict, type, description, the absent ones null), any
// other as Python writes the object it read.
func appendTool(b []byte, raw json.RawMessage) []byte {
	var t map[string]json.RawMessage
	if json.Unmarshal(raw, &t) != nil || string(t["type"]) != `"function"` {
		out, err := openai.AppendPythonJSON(b, raw)
		if err != nil {
			return append(b, raw...)
		}
		return out
	}
	b = append(b, '{')
	for i, k := range []string{"name", "parameters", "strict", "type", "description"} {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendQuote(b, k)
		b = append(b, ':')
		v, ok := t[k]
		if !ok {
			b = append(b, "null"...)
			continue
		}
		out, err := openai.AppendPythonJSON(b, v)
		if err != nil {
			out = append(b, "null"...)
		}
		b = out
	}
	return append(b, '}')
}

func appendOptString(b []byte, s string) []byte {
	if s == "" {
		return append(b, "null"...)
	}
	return appendText(b, s)
}

// responseStream writes j's tokens as vLLM's responses_stream_generator
// does for a plain text answer (responseEvents).
func (inst *instance) responseStream(w *bufio.Writer, conn net.Conn, j *job, r *request, call *responseCall) {
	ev := &responseEvents{call: call, r: r}
	sent, started := 0, false
	inst.pump(w, conn, j, func(buf []byte, n int, done bool) []byte {
		if !started {
			buf = ev.start(buf)
			started = true
		}
		for ; sent < n; sent++ {
			buf = ev.delta(buf, token.Piece(j.seed, sent))
		}
		if !done {
			return buf
		}
		text := token.Generate(j.seed, n)
		final := call.appendResponse(nil, r, responseStatus(j.reason), text, n, j.cached, true)
		inst.storeResponse(call, text, final)
		return ev.finish(buf, text, final)
	})
}

// responseEvents writes the named events of a streamed text answer, each
// an openai-python event model dumped whole (model_dump_json), its
// fields in the model's order, with its sequence_number.
type responseEvents struct {
	call *responseCall
	r    *request
	seq  int
}

// end closes an event: its sequence_number and type.
func (ev *responseEvents) end(buf []byte, typ string) []byte {
	return closeType(ev.seqNum(buf), typ)
}

func (ev *responseEvents) seqNum(buf []byte) []byte {
	buf = append(buf, `"sequence_number":`...)
	buf = strconv.AppendInt(buf, int64(ev.seq), 10)
	ev.seq++
	return buf
}

func closeType(buf []byte, typ string) []byte {
	buf = append(buf, `,"type":"`...)
	buf = append(buf, typ...)
	return append(buf, "\"}\n\n"...)
}

func (ev *responseEvents) itemRef(buf []byte) []byte {
	buf = append(buf, `"item_id":`...)
	return strconv.AppendQuote(buf, ev.call.outputID())
}

// start writes response.created, response.in_progress, the output
// message added (no content yet) and its text part added (logprobs []).
func (ev *responseEvents) start(buf []byte) []byte {
	for _, typ := range []string{"response.created", "response.in_progress"} {
		buf = event(buf, typ)
		buf = append(buf, `{"response":`...)
		buf = ev.call.appendResponse(buf, ev.r, "in_progress", "", 0, 0, false)
		buf = ev.end(append(buf, ','), typ)
	}
	buf = event(buf, "response.output_item.added")
	buf = append(buf, `{"item":`...)
	buf = ev.call.appendMessage(buf, "", "in_progress")
	buf = ev.end(append(buf, `,"output_index":0,`...), "response.output_item.added")
	buf = event(buf, "response.content_part.added")
	buf = append(buf, `{"content_index":0,`...)
	buf = ev.itemRef(buf)
	buf = append(buf, `,"output_index":0,"part":{"annotations":[],"text":"","type":"output_text","logprobs":[]},`...)
	return ev.end(buf, "response.content_part.added")
}

// delta writes response.output_text.delta of piece.
func (ev *responseEvents) delta(buf []byte, piece string) []byte {
	buf = event(buf, "response.output_text.delta")
	buf = append(buf, `{"content_index":0,"delta":`...)
	buf = appendText(buf, piece)
	buf = append(buf, ',')
	buf = ev.itemRef(buf)
	buf = append(buf, `,"logprobs":[],"output_index":0,`...)
	return ev.end(buf, "response.output_text.delta")
}

// finish writes the text done, the part done, the message done and
// response.completed with final, the finished response.
func (ev *responseEvents) finish(buf []byte, text string, final []byte) []byte {
	buf = event(buf, "response.output_text.done")
	buf = append(buf, `{"content_index":0,`...)
	buf = ev.itemRef(buf)
	buf = append(buf, `,"logprobs":[],"output_index":0,`...)
	// ResponseTextDoneEvent has text after sequence_number.
	buf = append(ev.seqNum(buf), `,"text":`...)
	buf = closeType(appendText(buf, text), "response.output_text.done")
	buf = event(buf, "response.content_part.done")
	buf = append(buf, `{"content_index":0,`...)
	buf = ev.itemRef(buf)
	buf = append(buf, `,"output_index":0,"part":{"annotations":[],"text":`...)
	buf = appendText(buf, text)
	buf = ev.end(append(buf, `,"type":"output_text","logprobs":null},`...), "response.content_part.done")
	buf = event(buf, "response.output_item.done")
	buf = append(buf, `{"item":`...)
	// simple_streaming_events builds this message with annotations and
	// logprobs too, extra fields openai's models keep and dump last.
	buf = ev.call.openMessage(buf, text, "completed")
	buf = append(buf, `,"annotations":[],"logprobs":[]}`...)
	buf = ev.end(append(buf, `,"output_index":0,`...), "response.output_item.done")
	buf = event(buf, "response.completed")
	buf = append(buf, `{"response":`...)
	buf = append(buf, final...)
	return ev.end(append(buf, ','), "response.completed")
}

// randomHex is 32 random hex digits, as vLLM's random_uuid() (uuid4().hex).
func randomHex() string {
	var b [16]byte
	var r runtimeRand
	for i := 0; i < 16; i += 8 {
		v := r.Uint64()
		for k := 0; k < 8; k++ {
			b[i+k] = byte(v >> (8 * k))
		}
	}
	return hex.EncodeToString(b[:])
}

// event opens an SSE event of type name: its event line and "data: ".
func event(b []byte, name string) []byte {
	b = append(b, "event: "...)
	b = append(b, name...)
	return append(b, "\ndata: "...)
}

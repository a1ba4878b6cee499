package sim

import (
	"bufio"
	"encoding/json"
	"net"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/inferrail/inferrail/model/openai"
	"github.com/inferrail/inferrail/model/token"
)

// A /v1/completions prompt may be a batch: a list of strings or of token
// lists. vLLM serves each prompt as a request of its own (request id
// "<id>-<i>") and merges their outputs into one response
// (completion/serving.py): a choice per prompt whose index is the
// prompt's, and one usage summing every prompt's tokens and every
// choice's. A stream carries each choice's chunks under its index, then
// one usage chunk for them all and [DONE]. The simulator submits every
// prompt to the engine at once, so they batch as vLLM's would, and
// streams the choices one after the other.

// batchPrompts reads every prompt of a batch body, as token ids (texts
// encoded with the simulator's tokenizer). openai.ParseCompletion has
// validated the prompt's shape; kind is the kind it found.
func batchPrompts(body []byte, kind openai.PromptKind) ([][]uint32, *openai.Error) {
	var raw struct {
		Prompt json.RawMessage `json:"prompt"`
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		return nil, badPrompt(err)
	}
	var out [][]uint32
	if kind == openai.PromptTokens {
		if err := json.Unmarshal(raw.Prompt, &out); err != nil {
			return nil, badPrompt(err)
		}
		for _, p := range out {
			if len(p) == 0 {
				return nil, openai.ErrEmptyPrompt
			}
		}
		return out, nil
	}
	var texts []string
	if err := json.Unmarshal(raw.Prompt, &texts); err != nil {
		return nil, badPrompt(err)
	}
	for _, t := range texts {
		out = append(out, token.Sim{}.Encode(nil, t))
	}
	return out, nil
}

func badPrompt(err error) *openai.Error {
	return &openai.Error{Status: 400, Type: openai.TypeBadRequestError, Param: "prompt", Message: "prompt: " + err.Error()}
}

// respondBatch serves r's prompts (r.batch) and answers with one
// response.
func (inst *instance) respondBatch(ctx *fasthttp.RequestCtx, r *request) {
	jobs := make([]*job, len(r.batch))
	for i, part := range r.batch {
		j, e := inst.submit(part)
		if e != nil {
			inst.abortAll(jobs[:i])
			writeError(ctx, e)
			return
		}
		jobs[i] = j
	}
	created := time.Now().Unix()
	id := openai.CompletionID(r.baseID)
	conn := ctx.Conn()
	if r.stream {
		st := openai.NewCompletionStream(openai.StreamConfig{ID: id, Created: created, Model: r.model,
			Fingerprint: inst.fingerprint, IncludeUsage: r.usage})
		ctx.SetStatusCode(fasthttp.StatusOK)
		ctx.SetContentType("text/event-stream; charset=utf-8")
		ctx.SetBodyStreamWriter(func(w *bufio.Writer) { inst.streamBatch(w, conn, jobs, r, st) })
		return
	}
	c := &openai.Completion{ID: id, Created: created, Model: r.model, Fingerprint: inst.fingerprint,
		Usage: openai.Usage{Details: inst.opts.EnablePromptTokensDetails}}
	for i, j := range jobs {
		if !inst.wait(conn, j) {
			inst.abortAll(jobs[i+1:])
			return
		}
		n, _ := j.progress()
		c.Choices = append(c.Choices, openai.CompletionChoice{Text: token.Generate(j.seed, n), Finish: openai.Finish{Reason: j.reason}})
		addUsage(&c.Usage, r.batch[i], j, n)
	}
	writeJSON(ctx, fasthttp.StatusOK, openai.AppendCompletion(nil, c))
}

// streamBatch streams each choice in turn under its index, then the
// usage of them all and [DONE]. A client gone mid-way aborts the prompts
// not yet streamed.
func (inst *instance) streamBatch(w *bufio.Writer, conn net.Conn, jobs []*job, r *request, st *openai.Stream) {
	total := openai.Usage{Details: inst.opts.EnablePromptTokensDetails}
	for i, j := range jobs {
		inst.pump(w, conn, j, inst.choiceChunks(j, r.batch[i], st.Choice(i), func(buf []byte, n int) []byte {
			addUsage(&total, r.batch[i], j, n)
			if i < len(jobs)-1 {
				return buf
			}
			if r.usage {
				buf = st.AppendUsage(buf, &total)
			}
			return openai.AppendDone(buf)
		}))
		if !j.isDone() || j.reason == "abort" {
			inst.abortAll(jobs[i+1:])
			return
		}
	}
}

// addUsage adds part's prompt, j's n tokens and its cached ones to u.
func addUsage(u *openai.Usage, part *request, j *job, n int) {
	u.PromptTokens += len(part.prompt)
	u.CompletionTokens += n
	u.CachedTokens += j.cached
}

func (inst *instance) abortAll(jobs []*job) {
	for _, j := range jobs {
		inst.drv.abort(j)
	}
}

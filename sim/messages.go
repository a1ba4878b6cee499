package sim

import (
	"bufio"
	"net"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/inferrail/inferrail/model/anthropic"
	"github.com/inferrail/inferrail/model/openai"
	"github.com/inferrail/inferrail/model/token"
)

// The Anthropic Messages API as vLLM serves it
// (vllm/entrypoints/anthropic/serving.py @ a8c3bdb20f5d): the body is
// converted into the chat request vLLM builds (anthropic.ToChat, inline
// system messages preserved, as vLLM's probe chooses for a template that
// marks system turns, as the simulator's does) and served by the chat
// path; the answer is converted back: a message, or its event stream.

// writeMessagesError is vLLM's translate_error_response: the error's type
// and message in Anthropic's envelope, with its status.
func writeMessagesError(ctx *fasthttp.RequestCtx, e *openai.Error) {
	writeJSON(ctx, e.Status, anthropic.AppendErrorType(nil, e.Type, e.Message))
}

// messagesRequest reads a Messages (or count_tokens) body into a chat
// request.
func (inst *instance) messagesRequest(ctx *fasthttp.RequestCtx, count bool) (*openai.ChatRequest, *openai.Error) {
	if err := openai.CheckContentType(string(ctx.Request.Header.ContentType())); err != nil {
		return nil, asAPIError(err)
	}
	ar, err := anthropic.Parse(ctx.PostBody(), count)
	if err != nil {
		return nil, &openai.Error{Status: fasthttp.StatusBadRequest, Type: openai.TypeBadRequest, Message: err.Error()}
	}
	body, err := anthropic.ToChat(ar, anthropic.Preserve, time.Now())
	if err != nil {
		return nil, &openai.Error{Status: fasthttp.StatusBadRequest, Type: openai.TypeBadRequestError, Message: err.Error()}
	}
	req, err := openai.ParseChat(body)
	if err != nil {
		return nil, asAPIError(err)
	}
	return req, nil
}

func (inst *instance) countTokens(ctx *fasthttp.RequestCtx) {
	req, e := inst.messagesRequest(ctx, true)
	if e == nil && inst.resolveModel(req.Model) == "" {
		e = openai.ModelNotFound(req.Model)
	}
	if e != nil {
		writeMessagesError(ctx, e)
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, anthropic.AppendCountTokens(nil, len(inst.renderChat(req))))
}

func (inst *instance) messages(ctx *fasthttp.RequestCtx) {
	req, e := inst.messagesRequest(ctx, false)
	r := &request{chat: true}
	if e == nil {
		e = inst.chatRequest(r, req)
	}
	if e == nil {
		maxTok, explicit := req.MaxOutputTokens()
		e = inst.fitContext(r, maxTok, explicit)
	}
	var j *job
	if e == nil {
		hdr := ctx.Request.Header.Peek("X-Request-Id")
		r.baseID = openai.BaseRequestID(string(hdr), hdr != nil, req.RequestID, runtimeRand{})
		j, e = inst.submit(r)
	}
	if e != nil {
		writeMessagesError(ctx, e)
		return
	}
	id := openai.ChatID(r.baseID)
	conn := ctx.Conn()
	if r.stream {
		ctx.SetStatusCode(fasthttp.StatusOK)
		ctx.SetContentType("text/event-stream; charset=utf-8")
		ctx.SetBodyStreamWriter(func(w *bufio.Writer) { inst.messageStream(w, conn, j, r, id) })
		return
	}
	if !inst.wait(conn, j) {
		return
	}
	n, _ := j.progress()
	writeJSON(ctx, fasthttp.StatusOK, anthropic.AppendMessage(make([]byte, 0, 256), &anthropic.Answer{
		ID: id, Model: r.model, Text: token.Generate(j.seed, n), StopReason: stopReason(j.reason),
		Usage: inst.usage(len(r.prompt), n, j.cached, true)}))
}

// stopReason is a finish reason as Anthropic's stop_reason.
func stopReason(finish string) string {
	if finish == "length" {
		return "max_tokens"
	}
	return "end_turn"
}

func appendText(b []byte, s string) []byte {
	return anthropic.AppendString(b, s)
}

// usage is vLLM's _build_anthropic_usage: input_tokens is the prompt
// less its cached tokens, which cache_read_input_tokens reports, when
// prompt token details are on (and cached is known).
func (inst *instance) usage(prompt, output, cached int, final bool) anthropic.Usage {
	details := inst.opts.EnablePromptTokensDetails && final
	u := anthropic.Usage{Input: prompt, Output: output, HasInput: true}
	if details {
		u.Input -= cached
		u.CacheRead, u.HasCacheRead = cached, true
	}
	return u
}

// messageStream writes j's tokens as vLLM's message_stream_converter
// does: message_start (usage of the first chunk: the prompt, no cache
// details yet), one text block of deltas, message_delta with the stop
// reason and the final usage, message_stop.
func (inst *instance) messageStream(w *bufio.Writer, conn net.Conn, j *job, r *request, id string) {
	sent, started := 0, false
	inst.pump(w, conn, j, func(buf []byte, n int, done bool) []byte {
		if !started && (n > 0 || done) {
			buf = anthropic.AppendMessageStart(buf, id, r.model, inst.usage(len(r.prompt), 0, 0, false))
			started = true
		}
		for ; sent < n; sent++ {
			if sent == 0 {
				buf = anthropic.AppendTextStart(buf, 0)
			}
			buf = anthropic.AppendTextDelta(buf, 0, token.Piece(j.seed, sent))
		}
		if !done {
			return buf
		}
		if sent > 0 {
			buf = anthropic.AppendBlockStop(buf, 0)
		}
		buf = anthropic.AppendMessageDelta(buf, stopReason(j.reason), "", inst.usage(len(r.prompt), n, j.cached, true))
		return anthropic.AppendMessageStop(buf)
	})
}

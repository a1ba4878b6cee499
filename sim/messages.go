package sim

import (
	"bufio"
	"net"
	"strconv"
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
	n := strconv.Itoa(len(inst.renderChat(req)))
	writeJSON(ctx, fasthttp.StatusOK, []byte(`{"input_tokens":`+n+`,"context_management":{"original_input_tokens":`+n+`}}`))
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
	b := append(make([]byte, 0, 256), `{"id":`...)
	b = strconv.AppendQuote(b, id)
	b = append(b, `,"type":"message","role":"assistant","content":[`...)
	if n > 0 {
		b = append(b, `{"type":"text","text":`...)
		b = appendText(b, token.Generate(j.seed, n))
		b = append(b, '}')
	} else {
		b = append(b, `{"type":"text","text":""}`...)
	}
	b = append(b, `],"model":`...)
	b = appendText(b, r.model)
	b = append(b, `,"stop_reason":"`...)
	b = append(b, stopReason(j.reason)...)
	b = append(b, `","usage":`...)
	b = inst.appendUsage(b, len(r.prompt), n, j.cached, true)
	writeJSON(ctx, fasthttp.StatusOK, append(b, '}'))
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

// appendUsage writes vLLM's _build_anthropic_usage: input_tokens is the
// prompt less its cached tokens, which cache_read_input_tokens reports,
// when prompt token details are on (and cached is known).
func (inst *instance) appendUsage(b []byte, prompt, output, cached int, final bool) []byte {
	details := inst.opts.EnablePromptTokensDetails && final
	in := prompt
	if details {
		in -= cached
	}
	b = append(b, `{"input_tokens":`...)
	b = strconv.AppendInt(b, int64(in), 10)
	b = append(b, `,"output_tokens":`...)
	b = strconv.AppendInt(b, int64(output), 10)
	if details {
		b = append(b, `,"cache_read_input_tokens":`...)
		b = strconv.AppendInt(b, int64(cached), 10)
	}
	return append(b, '}')
}

func event(b []byte, name string) []byte {
	b = append(b, "event: "...)
	b = append(b, name...)
	return append(b, "\ndata: "...)
}

// messageStream writes j's tokens as vLLM's message_stream_converter
// does: message_start (usage of the first chunk: the prompt, no cache
// details yet), one text block of deltas, message_delta with the stop
// reason and the final usage, message_stop.
func (inst *instance) messageStream(w *bufio.Writer, conn net.Conn, j *job, r *request, id string) {
	sent, started := 0, false
	inst.pump(w, conn, j, func(buf []byte, n int, done bool) []byte {
		if !started && (n > 0 || done) {
			buf = event(buf, "message_start")
			buf = append(buf, `{"type":"message_start","message":{"id":`...)
			buf = strconv.AppendQuote(buf, id)
			buf = append(buf, `,"type":"message","role":"assistant","content":[],"model":`...)
			buf = appendText(buf, r.model)
			buf = append(buf, `,"stop_reason":null,"stop_sequence":null,"usage":`...)
			buf = inst.appendUsage(buf, len(r.prompt), 0, 0, false)
			buf = append(buf, "}}\n\n"...)
			started = true
		}
		for ; sent < n; sent++ {
			if sent == 0 {
				buf = event(buf, "content_block_start")
				buf = append(buf, `{"type":"content_block_start","content_block":{"type":"text","text":""},"index":0}`+"\n\n"...)
			}
			buf = event(buf, "content_block_delta")
			buf = append(buf, `{"type":"content_block_delta","delta":{"type":"text_delta","text":`...)
			buf = appendText(buf, token.Piece(j.seed, sent))
			buf = append(buf, "},\"index\":0}\n\n"...)
		}
		if !done {
			return buf
		}
		if sent > 0 {
			buf = event(buf, "content_block_stop")
			buf = append(buf, `{"type":"content_block_stop","index":0}`+"\n\n"...)
		}
		buf = event(buf, "message_delta")
		buf = append(buf, `{"type":"message_delta","delta":{"stop_reason":"`...)
		buf = append(buf, stopReason(j.reason)...)
		buf = append(buf, `","stop_sequence":null},"usage":`...)
		buf = inst.appendUsage(buf, len(r.prompt), n, j.cached, true)
		buf = append(buf, "}\n\n"...)
		buf = event(buf, "message_stop")
		return append(buf, `{"type":"message_stop"}`+"\n\n"...)
	})
}

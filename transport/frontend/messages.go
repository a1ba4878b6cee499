package frontend

import (
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/inferrail/inferrail/model/anthropic"
	"github.com/inferrail/inferrail/model/openai"
	"github.com/inferrail/inferrail/transport/auth"
)

// The Anthropic Messages API, as vLLM serves it
// (vllm/entrypoints/anthropic/api_router.py): Claude Code and the
// Anthropic SDKs reach self-hosted models through it. Requests are routed
// like chat, on the prompt vLLM renders for them (model/anthropic,
// prompt.Preparer.Messages); the engine's usage (input_tokens,
// cache_read_input_tokens, output_tokens, streamed in message_start and
// message_delta) feeds the same accounting; the gateway's own errors on
// these paths are in Anthropic's shape; count_tokens is answered from the
// gateway's tokenizer when the model has one.
const (
	pathMessages    = "/v1/messages"
	pathCountTokens = "/v1/messages/count_tokens"
)

// MessagesTokenizer is a Tokenizer that also prepares Anthropic Messages
// bodies (count: a count_tokens body). The gateway's tokenizer pool is
// one; a Tokenizer that is not routes Messages requests without a
// prediction and forwards count_tokens.
type MessagesTokenizer interface {
	PrepareMessages(model string, count bool, body []byte, deadline time.Time) (p Prompt, ok bool)
}

// openAIGeneration reports whether path is an OpenAI generation API, the
// only ones whose streams take stream_options.include_usage (Messages
// streams carry their usage anyway).
func openAIGeneration(path []byte) bool {
	return string(path) == "/v1/chat/completions" || string(path) == "/v1/completions"
}

// anthropicPath reports whether errors on path take Anthropic's shape.
func anthropicPath(path []byte) bool {
	return string(path) == pathMessages || string(path) == pathCountTokens
}

// writeAnthropicError writes e in Anthropic's error shape, its status
// kept.
func writeAnthropicError(ctx *fasthttp.RequestCtx, e *openai.Error) {
	ctx.SetStatusCode(e.Status)
	ctx.SetContentType("application/json")
	if e.Status == fasthttp.StatusServiceUnavailable || e.Status == fasthttp.StatusTooManyRequests {
		ctx.Response.Header.Set("Retry-After", "1")
	}
	ctx.SetBody(anthropic.AppendError(nil, e.Status, e.Message))
}

// prepareMessages is PolicyRequest's preparation for a Messages body.
func prepareMessages(tok Tokenizer, model string, count bool, body []byte, deadline time.Time) (Prompt, bool) {
	mt, ok := tok.(MessagesTokenizer)
	if !ok {
		return Prompt{}, false
	}
	return mt.PrepareMessages(model, count, body, deadline)
}

// countTokens answers POST /v1/messages/count_tokens from the gateway's
// tokenizer, with the number vLLM's count_tokens gives (the length of the
// prompt it renders) and its body, when the model has a tokenizer that
// prepares the request; else the request goes to an engine as any other.
func (s *Server) countTokens(ctx *fasthttp.RequestCtx, who *auth.Identity) {
	rs := ResolveModel(s.fleet, ctx.PostBody())
	if rs.Err != nil || who.Restricted() && !who.Allows(rs.Model) || s.tok == nil {
		s.proxy(ctx, who) // which answers the error
		return
	}
	deadline := time.Now().Add(s.cfg.Server.RequestTimeout)
	p, ok := prepareMessages(s.tok, rs.Model, true, rs.Body, deadline)
	if !ok {
		s.proxy(ctx, who)
		return
	}
	n := strconv.Itoa(p.Tokens)
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.SetContentType("application/json")
	ctx.Response.Header.Set(HeaderPromptTokens, n)
	ctx.SetBodyString(`{"input_tokens":` + n + `,"context_management":{"original_input_tokens":` + n + `}}`)
}

// StreamHeadBytes is how much of a stream's start the relay (and the
// endpoint picker) keeps: a Messages stream's message_start event, with
// the prompt's usage, or the start of a Responses stream's
// response.created event, whose response names its id first.
const StreamHeadBytes = 2 << 10

// streamHead keeps the first bytes of a stream. The zero value is ready.
type streamHead struct {
	b [StreamHeadBytes]byte
	n int
}

func (h *streamHead) Write(p []byte) { h.n += copy(h.b[h.n:], p) }

// messagesStart is the usage of the message_start event in h.
func (h *streamHead) messagesStart() (anthropic.Usage, bool) {
	var t openai.StreamTail
	t.Write(h.b[:h.n])
	var u anthropic.Usage
	found := false
	t.EachData(func(v []byte) {
		if found || anthropic.Event(v) != "message_start" {
			return
		}
		u, found = anthropic.FindUsage(v)
	})
	return u, found
}

// responseUsage reads the usage of r's non-streamed response body.
func (r *request) responseUsage(body []byte) (openai.Usage, bool) {
	if r.responses {
		return ResponsesUsage(body)
	}
	return ResponseUsage(r.messages, body)
}

// ResponseUsage reads the usage of a non-streamed response body: an
// Anthropic message's when messages, else the OpenAI usage.
func ResponseUsage(messages bool, body []byte) (openai.Usage, bool) {
	if !messages {
		return openai.FindUsage(body)
	}
	u, ok := anthropic.FindUsage(body)
	return u.OpenAI(), ok && u.HasInput
}

// streamDone reports whether r's stream has ended with its last event:
// data: [DONE], or a Messages stream's message_stop.
func (r *request) streamDone(tail *openai.StreamTail) bool {
	if r.responses {
		return responsesStreamDone(tail)
	}
	if !r.messages {
		return tail.Done()
	}
	v, ok := tail.LastData()
	return ok && (anthropic.Event(v) == "message_stop" || string(v) == "[DONE]")
}

// streamUsage reads the usage of r's stream (StreamUsage).
func (r *request) streamUsage(head *streamHead, tail *openai.StreamTail) (openai.Usage, bool) {
	if r.responses {
		return responsesStreamUsage(tail)
	}
	return StreamUsage(r.messages, head, tail)
}

// StreamUsage reads the usage of a stream: its final usage chunk, or, for
// a Messages stream, the usage of its message_start event (in head, nil
// when not kept) updated by its last message_delta's (vLLM's carries the
// prompt's counts too).
func StreamUsage(messages bool, head *streamHead, tail *openai.StreamTail) (openai.Usage, bool) {
	if !messages {
		return tail.Usage()
	}
	var u anthropic.Usage
	found := false
	if head != nil {
		u, found = head.messagesStart()
	}
	tail.EachData(func(v []byte) {
		if anthropic.Event(v) != "message_delta" {
			return
		}
		if d, ok := anthropic.FindUsage(v); ok {
			u, found = anthropic.Merge(u, d), found || d.HasInput
		}
	})
	return u.OpenAI(), found && u.HasInput
}

// anthropicUser is a Messages body's metadata.user_id, which Claude Code
// fills with its user and session: the conversation key, as a chat
// body's user field is. nil when there is none.
func anthropicUser(body []byte) []byte {
	f, err := openai.FindMember(body, "metadata")
	if err != nil || !f.Found || f.End <= f.Start || body[f.Start] != '{' {
		return nil
	}
	u, err := openai.FindMember(body[f.Start:f.End], "user_id")
	if err != nil || !u.Found || !u.IsString || u.Name == "" {
		return nil
	}
	return []byte(u.Name)
}

package frontend

import (
	"github.com/valyala/fasthttp"

	"github.com/inferrail/inferrail/model/openai"
	"github.com/inferrail/inferrail/transport/auth"
)

// Detokenizer decodes token ids with a model's tokenizer, so that the
// gateway answers POST /detokenize itself. cmd/inferrail implements it over
// transport/tokenize's models.
type Detokenizer interface {
	// Detokenize returns the text of ids as the engine decodes them. ok is
	// false when the model has no tokenizer of its own, or one whose
	// decoding the gateway cannot reproduce; the engine answers those.
	Detokenize(model string, ids []uint32) (text string, ok bool)
}

// Renderer gives the token ids of a chat or completion body, rendered and
// tokenized by the same Preparer that predicts the request's blocks, so
// that the gateway answers vLLM's render endpoints itself.
type Renderer interface {
	// RenderIDs returns the prompt ids of a /v1/chat/completions (chat) or
	// /v1/completions body for model. ok is false when the model has no
	// tokenizer or the body is one it cannot follow.
	RenderIDs(model string, chat bool, body []byte) (ids []uint32, ok bool)
}

// detokenize answers POST /detokenize from the gateway's tokenizer when it
// can, byte for byte as vLLM's ServingTokenization.create_detokenize
// answers ({"prompt": tokenizer.decode(tokens)}), and sends the request to
// a replica otherwise: a model without a tokenizer, a body vLLM refuses
// (the engine's error is the answer), an id past 2**32.
func (s *Server) detokenize(ctx *fasthttp.RequestCtx, who *auth.Identity) {
	s.answerOrProxy(ctx, who, s.answerDetokenize)
}

func (s *Server) answerDetokenize(body []byte, who *auth.Identity) ([]byte, bool) {
	dt, ok := s.tok.(Detokenizer)
	if !ok {
		return nil, false
	}
	rs := ResolveModel(s.fleet, body)
	if rs.Err != nil || !who.Allows(rs.Model) {
		return nil, false
	}
	req, err := openai.ParseDetokenize(body)
	if err != nil || req.Wide {
		return nil, false
	}
	text, ok := dt.Detokenize(rs.Model, req.Tokens)
	if !ok {
		return nil, false
	}
	return openai.AppendDetokenize(make([]byte, 0, 16+len(text)), text), true
}

// The members of the render bodies the gateway answers: the fields that
// shape the prompt, and those that reach the answer. A body with any other
// (a sampling parameter, n, tool_choice, a chat_template, ...) goes to an
// engine, whose SamplingParams the gateway does not reproduce. Sorted.
var (
	chatRenderMembers = []string{"add_generation_prompt", "add_special_tokens", "cache_salt",
		"chat_template_kwargs", "continue_final_message", "documents", "max_completion_tokens", "max_tokens",
		"messages", "model", "priority", "request_id", "stream", "stream_options", "tools", "user"}
	completionRenderMembers = []string{"add_special_tokens", "cache_salt", "max_tokens", "model",
		"priority", "prompt", "request_id", "stream", "stream_options", "user"}
)

// render answers POST /v1/chat/completions/render (chat) or
// /v1/completions/render from the gateway's tokenizer when it can, in the
// shape of vLLM's ServingRender: a GenerateRequest (for completions, a list
// of one) holding the rendered prompt's token ids, the sampling parameters
// and the request's stream, cache_salt and priority. It sends the request
// to a replica otherwise: a model without a tokenizer or without a known
// max_model_len, a body with fields outside chatRenderMembers or
// completionRenderMembers, a body vLLM refuses (the engine's error is the
// answer), a prompt that does not fit, a batch of prompts.
func (s *Server) render(ctx *fasthttp.RequestCtx, who *auth.Identity, chat bool) {
	s.answerOrProxy(ctx, who, func(body []byte, who *auth.Identity) ([]byte, bool) {
		return s.answerRender(body, who, chat)
	})
}

func (s *Server) answerRender(body []byte, who *auth.Identity, chat bool) ([]byte, bool) {
	rd, ok := s.tok.(Renderer)
	if !ok {
		return nil, false
	}
	rs := ResolveModel(s.fleet, body)
	if rs.Err != nil || !who.Allows(rs.Model) {
		return nil, false
	}
	r := openai.Render{Model: rs.Model, ModelSet: true}
	var maxTok int64
	var explicit bool
	if chat {
		if !openai.OnlyMembers(body, chatRenderMembers) {
			return nil, false
		}
		req, err := openai.ParseChat(body)
		if err != nil || req.Check() != nil {
			return nil, false
		}
		maxTok, explicit = req.MaxOutputTokens()
		r.Stream, r.StreamOptions, r.CacheSalt, r.Priority = req.Stream, req.StreamOptions, req.CacheSalt, req.Priority
		r.RequestID = "chatcmpl-" + openai.RandomID(runtimeRand{})
	} else {
		if !openai.OnlyMembers(body, completionRenderMembers) {
			return nil, false
		}
		req, err := openai.ParseCompletion(body)
		if err != nil || req.Check() != nil || req.Prompt.Count > 1 {
			return nil, false // a batch renders one GenerateRequest per prompt: the engine's
		}
		maxTok, explicit = req.MaxTokens, true
		r.Stream, r.StreamOptions, r.CacheSalt, r.Priority = req.Stream, req.StreamOptions, req.CacheSalt, req.Priority
		r.RequestID = "cmpl-" + openai.RandomID(runtimeRand{})
	}
	if r.Priority != 0 {
		return nil, false // refused unless the engine schedules by priority
	}
	limit, ok := s.maxModelLen(rs.Model)
	if !ok {
		return nil, false
	}
	ids, ok := rd.RenderIDs(rs.Model, chat, body)
	if n := int64(len(ids)); !ok || n == 0 || n >= int64(limit) || explicit && n+maxTok > int64(limit) {
		return nil, false // the engine refuses these
	}
	r.TokenIDs, r.MaxTokens = ids, limit-len(ids)
	if explicit {
		r.MaxTokens = int(maxTok)
	}
	dst := make([]byte, 0, 512+len(ids)*7)
	if chat {
		return openai.AppendRender(dst, &r), true
	}
	return openai.AppendRenderList(dst, []openai.Render{r}), true
}

// answerOrProxy writes what answer makes of the request's body, or, when
// it cannot answer, proxies the request to a replica.
func (s *Server) answerOrProxy(ctx *fasthttp.RequestCtx, who *auth.Identity, answer func([]byte, *auth.Identity) ([]byte, bool)) {
	// vLLM's validate_json_request refuses any other content type; the
	// engine answers that.
	if openai.CheckContentType(string(ctx.Request.Header.ContentType())) == nil {
		if b, ok := answer(ctx.PostBody(), who); ok {
			ctx.SetStatusCode(fasthttp.StatusOK)
			ctx.SetContentType("application/json")
			ctx.SetBody(b)
			return
		}
	}
	s.proxy(ctx, who)
}

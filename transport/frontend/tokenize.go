package frontend

import (
	"bytes"
	"strconv"

	"github.com/valyala/fasthttp"

	"github.com/inferrail/inferrail/model/openai"
	"github.com/inferrail/inferrail/transport/auth"
)

// vLLM's tokenizer endpoints (vllm/entrypoints/serve/tokenize), served at
// the root, not under /v1, and its render endpoints
// (vllm/entrypoints/serve/render/api_router.py).
const (
	pathTokenize         = openai.PathTokenize
	pathDetokenize       = openai.PathDetokenize
	pathChatRender       = openai.PathChatRender
	pathCompletionRender = openai.PathCompletionRender
)

// TokenIDs is a Tokenizer that can also give a prompt's token ids, so that
// the gateway answers POST /tokenize itself. transport/tokenize's pool
// implements it through cmd/inferrail.
type TokenIDs interface {
	// TokenIDs returns the ids of a /tokenize body for the configured
	// model as the engine computes them: chat messages rendered with its
	// template, or a prompt string tokenized. ok is false when the model
	// has no tokenizer of its own or the body is one it cannot follow; the
	// engine answers those.
	TokenIDs(model string, body []byte) (ids []uint32, ok bool)
}

// tokenize answers POST /tokenize from the gateway's tokenizer when it can,
// byte for byte as vLLM's ServingTokenization.create_tokenize answers
// (TokenizeResponse: count, max_model_len, tokens, token_strs), and sends
// the request to a replica otherwise: a model without a tokenizer, a body
// the gateway does not follow (a prompt that is not a string, both prompt
// and messages, images, a chat_template of its own), return_token_strs,
// or a model whose max_model_len no engine has reported yet (it is read
// from the engines' /v1/models cards).
func (s *Server) tokenize(ctx *fasthttp.RequestCtx, who *auth.Identity) {
	s.answerOrProxy(ctx, who, s.answerTokenize)
}

func (s *Server) answerTokenize(body []byte, who *auth.Identity) ([]byte, bool) {
	tk, ok := s.tok.(TokenIDs)
	if !ok {
		return nil, false
	}
	rs := ResolveModel(s.fleet, body)
	if rs.Err != nil || !who.Allows(rs.Model) {
		return nil, false // the proxy path answers these as it answers them
	}
	messages, _ := openai.FindMember(body, "messages")
	prompt, _ := openai.FindMember(body, "prompt")
	switch {
	case messages.Found == prompt.Found:
		return nil, false
	case prompt.Found && body[prompt.Start] != '"':
		return nil, false // TokenizeCompletionRequest.prompt is a str: the engine refuses the rest
	case set(body, "return_token_strs"):
		return nil, false
	case set(body, "continue_final_message"):
		// With add_generation_prompt (default true) vLLM refuses it.
		return nil, false
	}
	maxLen, ok := s.maxModelLen(rs.Model)
	if !ok {
		return nil, false
	}
	ids, ok := tk.TokenIDs(rs.Model, body)
	if !ok {
		return nil, false
	}
	return openai.AppendTokenize(make([]byte, 0, 64+len(ids)*7), ids, maxLen), true
}

// set reports whether body's top-level member key is there with a value
// other than false or null.
func set(body []byte, key string) bool {
	f, _ := openai.FindMember(body, key)
	if !f.Found {
		return false
	}
	v := body[f.Start:f.End]
	return !bytes.Equal(v, []byte("false")) && !bytes.Equal(v, []byte("null"))
}

// maxModelLen is the max_model_len of model's card as an engine published
// it on /v1/models.
func (s *Server) maxModelLen(model string) (int, bool) {
	for _, m := range s.fleet.Models() {
		if m.Model != model || m.Card == nil {
			continue
		}
		f, err := openai.FindMember(m.Card, "max_model_len")
		if err != nil || !f.Found {
			return 0, false
		}
		n, err := strconv.Atoi(string(m.Card[f.Start:f.End]))
		return n, err == nil && n > 0
	}
	return 0, false
}

package frontend

import (
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/inferrail/inferrail/model/openai"
	"github.com/inferrail/inferrail/model/policy"
	"github.com/inferrail/inferrail/model/prefix"
)

// Tokenizer prepares prompts at the edge for the KV index: their length in
// tokens and the hashes of their full blocks, exactly as the engine will
// compute them. transport/tokenize implements it. It must be safe for
// concurrent use and must not wait past deadline.
type Tokenizer interface {
	// Prepare reads a /v1/chat/completions (chat) or /v1/completions body
	// for the configured model. ok is false when the request gets no
	// prediction: the model has no tokenizer, the request is one the
	// tokenizer cannot follow, or the tokenizer was too busy; the
	// implementation counts why.
	Prepare(model string, chat bool, body []byte, deadline time.Time) (p Prompt, ok bool)
}

// Prompt is a prepared prompt.
type Prompt struct {
	Tokens    int           // prompt length in tokens
	Blocks    []prefix.Hash // chained hashes of its full blocks
	BlockSize int           // tokens per block
	// Batch is set when the body was a /v1/completions batch and the rest
	// is its first prompt's: the request is routed on it, but its count
	// and the cache prediction would be the first prompt's where the
	// engine reports the batch's, so neither is compared with the engine.
	Batch bool
}

// policyRequest builds what the policy may know of r and names the
// prompt's length in the response headers when it was prepared.
func (s *Server) policyRequest(r *request, path []byte) {
	var ok bool
	var p Prompt
	r.policy, p, ok = PreparePolicy(s.tok, r.model, string(path), r.ctx.Request.Header.Peek("X-Session-Id"),
		r.body, r.user, r.id, r.deadline)
	r.batch = p.Batch
	if ok {
		r.tokenized = true
		r.ctx.Response.Header.Set(HeaderPromptTokens, strconv.Itoa(p.Tokens))
	}
}

// PreparePolicy is PolicyRequest for a request to path, which may carry a
// prefix before the API's own path (as behind Envoy), its query cut: a
// chat or completion body prepared as such; an Anthropic Messages body as
// vLLM's Anthropic entrypoint renders it, its metadata.user_id the
// conversation key when sessionID is empty; a count_tokens body (sent on
// for an engine to count), a pooling request, a /tokenize or /detokenize
// body and a render body not at all, since they fill no cache worth
// predicting. The gateway and the endpoint picker
// prepare requests so.
func PreparePolicy(tok Tokenizer, model, path string, sessionID, body []byte, user openai.ModelField, id string, deadline time.Time) (policy.Request, Prompt, bool) {
	switch {
	case strings.HasSuffix(path, pathMessages):
		if len(sessionID) == 0 {
			sessionID = anthropicUser(body)
		}
		req, _, _ := PolicyRequest(nil, model, false, sessionID, body, user, id, deadline)
		if tok == nil {
			return req, Prompt{}, false
		}
		p, ok := prepareMessages(tok, model, false, body, deadline)
		if ok {
			req.PromptTokens, req.Blocks, req.BlockSize = p.Tokens, p.Blocks, p.BlockSize
		}
		return req, p, ok
	case strings.HasSuffix(path, pathResponses):
		req, _, _ := PolicyRequest(nil, model, false, sessionID, body, user, id, deadline)
		if tok == nil {
			return req, Prompt{}, false
		}
		p, ok := prepareResponses(tok, model, body, deadline)
		if ok {
			req.PromptTokens, req.Blocks, req.BlockSize = p.Tokens, p.Blocks, p.BlockSize
		}
		return req, p, ok
	case strings.HasSuffix(path, pathCountTokens) || poolingPath(path) ||
		strings.HasSuffix(path, pathTokenize) || strings.HasSuffix(path, pathDetokenize) ||
		strings.HasSuffix(path, pathChatRender) || strings.HasSuffix(path, pathCompletionRender):
		return PolicyRequest(nil, model, false, sessionID, body, user, id, deadline)
	}
	return PolicyRequest(tok, model, strings.HasSuffix(path, "/chat/completions"), sessionID, body, user, id, deadline)
}

// PromptError is the 400 a /v1/completions body at path (which may carry a
// prefix) gets from the gateway itself when its prompt has a shape vLLM
// refuses (openai.ParsePrompt): mixed strings and token ids, negative or
// fractional ids, a token list with no ids. Such a body is never routed,
// with a tokenizer or without. nil for any other body or path, and for a
// body that did not resolve. Only a prompt that is a list is read (a
// string prompt is left to the engine, and costs no second parse of its
// text).
func (rs *Resolved) PromptError(path string) *openai.Error {
	if rs.Err != nil || !strings.HasSuffix(path, "/v1/completions") {
		return nil
	}
	body, f := rs.Body, rs.Prompt
	if !f.Found || body[f.Start] != '[' {
		return nil
	}
	if _, err := openai.ParsePrompt(body); err != nil {
		e, _ := err.(*openai.Error)
		return e
	}
	return nil
}

// PolicyRequest builds what a policy may know of a request for model: its
// conversation key from sessionID (the x-session-id header) or the body's
// user member (user, as ResolveModel found it), else a key from its
// request id; and its prompt, when tok prepares it (ok). A completions
// batch puts its first prompt in req, for routing, but is not ok, since the
// engine counts the whole batch (Prompt.Batch tells). The gateway and
// /admin/explain build it the same way.
func PolicyRequest(tok Tokenizer, model string, chat bool, sessionID, body []byte, user openai.ModelField, id string, deadline time.Time) (req policy.Request, p Prompt, ok bool) {
	conv := sessionID
	if len(conv) == 0 && user.Found && user.IsString && user.Name != "" {
		conv = []byte(user.Name)
	}
	if len(conv) > 0 {
		req.SessionKey = keyOf(conv)
		req.Key = req.SessionKey
	} else {
		req.Key = keyOf(id)
	}
	if tok == nil {
		return req, p, false
	}
	p, ok = tok.Prepare(model, chat, body, deadline)
	if ok {
		req.PromptTokens, req.Blocks, req.BlockSize = p.Tokens, p.Blocks, p.BlockSize
	}
	return req, p, ok && !p.Batch
}

// keyOf is policy.Key of b, never 0 (0 means "no key" to a policy).
func keyOf[T ~string | ~[]byte](b T) uint64 { return max(policy.Key(b), 1) }

// predicted records a decision the KV index priced, and names its
// prediction in the response headers.
func (r *request) predicted(ctx *fasthttp.RequestCtx, tokens, cached int) {
	ctx.Response.Header.Set(HeaderCachedTokens, strconv.Itoa(cached))
	r.met.PromptTokens.Add(tokens)
	r.met.PredictedCached.Add(cached)
}

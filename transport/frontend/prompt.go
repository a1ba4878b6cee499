package frontend

import (
	"strconv"
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
}

// policyRequest builds what the policy may know of r and names the
// prompt's length in the response headers when it was prepared.
func (s *Server) policyRequest(r *request, path []byte) {
	var ok bool
	var p Prompt
	tok := s.tok
	if r.messages || string(path) == pathCountTokens || poolingPath(path) {
		// Keys only: a Messages body is prepared below; a count_tokens
		// body forwarded for the engine to count, and a pooling request,
		// fill no cache worth predicting.
		tok = nil
	}
	session := r.ctx.Request.Header.Peek("X-Session-Id")
	if len(session) == 0 && r.messages {
		session = anthropicUser(r.body)
	}
	r.policy, p, ok = PolicyRequest(tok, r.model, string(path) == "/v1/chat/completions",
		session, r.body, r.id, r.deadline)
	if r.messages && s.tok != nil {
		if p, ok = prepareMessages(s.tok, r.model, false, r.body, r.deadline); ok {
			r.policy.PromptTokens, r.policy.Blocks, r.policy.BlockSize = p.Tokens, p.Blocks, p.BlockSize
		}
	}
	if ok {
		r.tokenized = true
		r.ctx.Response.Header.Set(HeaderPromptTokens, strconv.Itoa(p.Tokens))
	}
}

// PolicyRequest builds what a policy may know of a request for model: its
// conversation key from sessionID (the x-session-id header) or the body's
// user field, else a key from its request id; and its prompt, when tok
// prepares it (ok). The gateway and /admin/explain build it the same way.
func PolicyRequest(tok Tokenizer, model string, chat bool, sessionID, body []byte, id string, deadline time.Time) (req policy.Request, p Prompt, ok bool) {
	conv := sessionID
	if len(conv) == 0 {
		if f, err := openai.FindMember(body, "user"); err == nil && f.Found && f.IsString && f.Name != "" {
			conv = []byte(f.Name)
		}
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
	return req, p, ok
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

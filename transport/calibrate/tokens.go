package calibrate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/valyala/fasthttp"
)

// ErrNotServed means the engine answered 404 for the model: it serves
// another.
var ErrNotServed = errors.New("the engine does not serve the model")

// TokenOptions configure CheckTokens.
type TokenOptions struct {
	// URL is the engine's base URL.
	URL string
	// Model is the model name sent with each request.
	Model string
	// Count is the gateway's own count of the prompt of a request body
	// (a /v1/chat/completions body when chat, else /v1/completions); ok is
	// false when it cannot predict that request, which is then not sent.
	Count func(chat bool, body []byte) (tokens int, ok bool)
	// Seed draws the prompts' words.
	Seed uint64
	// RequestTimeout bounds each request (default 5m).
	RequestTimeout time.Duration
}

// TokenSample is one prompt of a tokenizer check, as the engine and the
// gateway counted it. It is a plain value.
type TokenSample struct {
	Chat    bool   // a chat request (else a completion)
	Prompt  string // what the prompt was, for the report
	Engine  int    // the engine's usage.prompt_tokens
	Gateway int    // the gateway tokenizer's count
}

// Agrees reports whether the two counts are equal: vLLM's
// usage.prompt_tokens is the length of the very ids it computed, so a
// tokenizer and chat template that are the engine's count the same.
func (s TokenSample) Agrees() bool { return s.Engine == s.Gateway }

// fixedPrompt is the check's first prompt: punctuation, digits, accents and
// CJK, where tokenizers differ most.
const fixedPrompt = "Tokenizers differ: punctuation, digits (2024-06-01, 3.14159), accents (café, naïve), 東京 and emoji 🙂."

// checkWords are the sizes, in words, of the check's random prompts.
var checkWords = []int{64, 512}

// CheckTokens sends the engine at opts.URL a few prompts of different
// sizes for opts.Model, each as a completion and as a chat with one user
// message, and returns for each the engine's usage.prompt_tokens and the
// gateway's count (opts.Count). The engine need not be idle. It returns
// ErrNotServed (wrapped) when the engine does not serve the model, and
// stops at the first other error.
func CheckTokens(ctx context.Context, opts TokenOptions) ([]TokenSample, error) {
	c, err := newClient(Options{URL: opts.URL, Model: opts.Model, RequestTimeout: opts.RequestTimeout})
	if err != nil {
		return nil, err
	}
	defer c.hc.CloseIdleConnections()
	w := words{rng: rand.New(rand.NewPCG(opts.Seed, 0x746f6b656e73)), ratio: 1}
	prompts := []string{fixedPrompt}
	for _, n := range checkWords {
		prompts = append(prompts, w.text(n))
	}
	var out []TokenSample
	for _, p := range prompts {
		for _, chat := range []bool{false, true} {
			body, path := tokenBody(opts.Model, p, chat)
			gw, ok := opts.Count(chat, body)
			if !ok {
				continue
			}
			n, err := c.promptTokens(ctx, path, body)
			if se := (*StatusError)(nil); errors.As(err, &se) && se.Status == fasthttp.StatusNotFound {
				return out, fmt.Errorf("%w: %v", ErrNotServed, err)
			}
			if err != nil {
				return out, err
			}
			out = append(out, TokenSample{Chat: chat, Prompt: describe(p), Engine: n, Gateway: gw})
		}
	}
	return out, nil
}

// tokenBody is the request for prompt: a completion, or a chat with one user
// message, for one token at temperature 0.
func tokenBody(model, prompt string, chat bool) (body []byte, path string) {
	type message struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	}
	req := struct {
		Model       string    `json:"model"`
		Prompt      string    `json:"prompt,omitempty"`
		Messages    []message `json:"messages,omitempty"`
		MaxTokens   int       `json:"max_tokens"`
		Temperature float64   `json:"temperature"`
	}{Model: model, MaxTokens: 1}
	path = "/v1/completions"
	if chat {
		req.Messages, path = []message{{"user", prompt}}, "/v1/chat/completions"
	} else {
		req.Prompt = prompt
	}
	body, _ = json.Marshal(req) // strings and numbers only: cannot fail
	return body, path
}

// describe names a prompt in a report: the fixed one by its start, a
// random one by its length.
func describe(p string) string {
	if p == fixedPrompt {
		return "mixed text"
	}
	return fmt.Sprintf("%d words", len(p)/4)
}

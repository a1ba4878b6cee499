package frontend

import (
	"strings"
	"sync/atomic"
	"testing"
)

// TestRenderProxiedUnpredicted: with a Tokenizer that renders nothing
// itself (no Renderer, no Detokenizer), the render endpoints and
// /detokenize go to a replica, whose answer passes as it came, and they
// are routed without a cache prediction: the tokenizer is never asked.
func TestRenderProxiedUnpredicted(t *testing.T) {
	var calls atomic.Int64
	sims, urls := startSims(t, 2, nil)
	g := startOpts(t, urls, nil, func(o *Options) { o.Tokenizer = countingTokenizer{calls: &calls} })
	g.sims = sims
	for _, c := range []struct{ path, body, prefix string }{
		{pathChatRender, chat("hi", 1, false), `{"request_id":"chatcmpl-`},
		{pathCompletionRender, `{"model":"sim","prompt":"hi"}`, `[{"request_id":"cmpl-`},
		{pathCompletionRender, `{"model":"sim","prompt":[1,2,3]}`, `[{"request_id":"cmpl-`},
		{pathDetokenize, `{"model":"sim","tokens":[300]}`, `{"prompt":`},
	} {
		resp, body := g.post(c.path, c.body)
		if resp.StatusCode != 200 || resp.Header.Get(HeaderReplica) == "" || !strings.HasPrefix(body, c.prefix) {
			t.Errorf("%s %s: %d (replica %q) %s", c.path, c.body, resp.StatusCode, resp.Header.Get(HeaderReplica), body)
		}
		if resp.Header.Get(HeaderPromptTokens) != "" || resp.Header.Get(HeaderCachedTokens) != "" {
			t.Errorf("%s %s: predicted", c.path, c.body)
		}
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("the tokenizer prepared %d render bodies", n)
	}
}

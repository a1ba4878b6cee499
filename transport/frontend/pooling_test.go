package frontend

import (
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/inferrail/inferrail/model/openai"
)

// countingTokenizer counts the bodies it is asked to prepare.
type countingTokenizer struct {
	simMessagesTokenizer
	calls *atomic.Int64
}

func (c countingTokenizer) Prepare(model string, chat bool, body []byte, now time.Time) (Prompt, bool) {
	c.calls.Add(1)
	return c.simMessagesTokenizer.Prepare(model, chat, body, now)
}

// TestPoolingProxied: the pooling APIs are proxied to a replica and
// routed without a cache prediction: the tokenizer is never asked, no
// prompt or cached tokens are named, and the engine's answer (an
// embedding with its usage; a 404 from an engine that serves no rerank)
// passes as it came.
func TestPoolingProxied(t *testing.T) {
	var calls atomic.Int64
	sims, urls := startSims(t, 2, nil)
	g := startOpts(t, urls, nil, func(o *Options) { o.Tokenizer = countingTokenizer{calls: &calls} })
	g.sims = sims
	resp, body := g.post("/v1/embeddings", `{"model":"sim","input":"embed this sentence"}`)
	if resp.StatusCode != 200 || resp.Header.Get(HeaderReplica) == "" {
		t.Fatalf("embeddings: %d %s", resp.StatusCode, body)
	}
	if u, ok := openai.FindUsage([]byte(body)); !ok || u.PromptTokens == 0 {
		t.Errorf("embeddings usage: %s", body)
	}
	var e struct{ Model string }
	if json.Unmarshal([]byte(body), &e) != nil || e.Model != model {
		t.Errorf("embeddings model: %s", body)
	}
	for _, p := range poolingPaths {
		resp, body := g.post(p, `{"model":"sim","input":"x","query":"q","documents":["d"],"text_1":"a","text_2":"b"}`)
		if resp.Header.Get(HeaderReplica) == "" {
			t.Errorf("%s: not proxied: %d %s", p, resp.StatusCode, body)
		}
		if resp.Header.Get(HeaderPromptTokens) != "" || resp.Header.Get(HeaderCachedTokens) != "" {
			t.Errorf("%s: predicted", p)
		}
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("the tokenizer prepared %d pooling bodies", n)
	}
	// Chat still asks it.
	g.post("/v1/chat/completions", chat("hi", 1, false))
	if calls.Load() != 1 {
		t.Errorf("chat: %d tokenizer calls", calls.Load())
	}
}

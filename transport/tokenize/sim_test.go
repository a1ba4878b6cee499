package tokenize

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/inferrail/inferrail/config"
	"github.com/inferrail/inferrail/sim"
	"github.com/inferrail/inferrail/sim/engine"
)

func startSim(t *testing.T, edit func(*sim.Options)) *sim.Server {
	t.Helper()
	o := sim.DefaultOptions()
	o.Port = 0
	o.Engine.Latency.Zero = true
	if edit != nil {
		edit(&o)
	}
	s, err := sim.Start(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func post(t *testing.T, s *sim.Server, path, body string) string {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Post(s.URL()+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("%s: %d %s", path, resp.StatusCode, b)
	}
	return string(b)
}

// cachedAfter sends body to a simulator whose prefix cache was just reset,
// and returns the hashes of the blocks its engine holds afterwards: the
// prompt's, and one more when the generated token completes a block.
func cachedAfter(t *testing.T, s *sim.Server, path, body string) map[uint64]int {
	t.Helper()
	post(t, s, "/reset_prefix_cache", "")
	post(t, s, path, body)
	var got map[uint64]int
	if !s.Inspect(func(e *engine.Engine) { got = e.CachedHashes() }) {
		t.Fatal("simulator not running")
	}
	return got
}

// TestSimExact: for a builtin:sim model, the gateway predicts exactly the
// blocks the simulator's engine caches for the request: same ids, same
// chain, salted with the same model name and cache_salt. Chat and
// completion bodies, inline and through the workers.
func TestSimExact(t *testing.T) {
	s := startSim(t, nil)
	cfg := config.Default()
	cfg.Models = []config.Model{{Name: "inferrail/sim-8b", Tokenizer: Sim, BlockSize: 16}}
	p := New(cfg, "", metrics.NewSet())
	defer p.Close()
	long := strings.Repeat("A long shared system prompt, in many words. ", 60) // > InlineBytes
	bodies := []struct{ path, body string }{
		{"/v1/chat/completions", `{"messages":[{"role":"system","content":"You are a terse assistant who answers in one line."},{"role":"user","content":"What is the capital of France, and why?"}],"max_tokens":1}`},
		{"/v1/chat/completions", `{"messages":[{"role":"system","content":"` + long + `"},{"role":"user","content":"Hello there, general Kenobi."}],"max_tokens":1}`},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"Tenant A asks a question long enough to fill blocks."}],"cache_salt":"tenant-a","max_tokens":1}`},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":[{"type":"text","text":"part one"},{"type":"text","text":"part two of a message"}]},{"role":"assistant","content":null},{"role":"user","content":"and the last turn, with words"}],"max_tokens":1}`},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"Write a poem about the sea."},{"role":"assistant","content":"The sea is wide, the sea is"}],"continue_final_message":true,"add_generation_prompt":false,"max_tokens":1}`},
		{"/v1/completions", `{"prompt":"Once upon a time, in a land far away, there lived a simulated engine.","max_tokens":1}`},
		{"/v1/completions", `{"prompt":"` + long + `","cache_salt":"s2","max_tokens":1}`},
		{"/v1/completions", `{"prompt":[300,301,302,303,304,305,306,307,308,309,310,311,312,313,314,315,316,317,318,319,320,321,322,323,324,325,326,327,328,329,330,331,332],"max_tokens":1}`},
	}
	for _, b := range bodies {
		kind := Chat
		if b.path == "/v1/completions" {
			kind = Completion
		}
		pr, r := p.Prepare(context.Background(), "inferrail/sim-8b", kind, []byte(b.body))
		if r != OK {
			t.Fatalf("%.80s: %v", b.body, r)
		}
		cached := cachedAfter(t, s, b.path, b.body)
		if len(pr.Blocks) == 0 {
			t.Fatalf("%.80s: no full block", b.body)
		}
		for i, h := range pr.Blocks {
			if cached[h.External()] == 0 {
				t.Fatalf("%.80s: block %d of %d is not what the engine cached", b.body, i, len(pr.Blocks))
			}
		}
		if extra := len(cached) - len(pr.Blocks); extra < 0 || extra > 1 {
			t.Fatalf("%.80s: engine holds %d blocks, prediction %d", b.body, len(cached), len(pr.Blocks))
		}
	}
}

// TestSimRootName: the simulator salts its chain with its --model (the
// model card's root), not the served name a client asked for, so a
// builtin:sim model's configured name must be the simulator's --model, as
// in inferrail launch and deploy/local.yaml.
func TestSimRootName(t *testing.T) {
	s := startSim(t, func(o *sim.Options) {
		o.Model = "org/root-model"
		o.ServedModelNames = []string{"served-name"}
	})
	body := `{"model":"served-name","prompt":"` + strings.Repeat("words words ", 20) + `","max_tokens":1}`
	cached := cachedAfter(t, s, "/v1/completions", body)
	for name, want := range map[string]bool{"org/root-model": true, "served-name": false} {
		m, err := Load(config.Model{Name: name, Tokenizer: Sim, BlockSize: 16}, "", 0)
		if err != nil {
			t.Fatal(err)
		}
		pr, err := m.Prepare(Completion, []byte(body), time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if got := cached[pr.Blocks[0].External()] > 0; got != want {
			t.Errorf("salted with %q: matches the engine %v, want %v", name, got, want)
		}
	}
}

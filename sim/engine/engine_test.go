package engine

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/inferrail/inferrail/model/kvevent"
	"github.com/inferrail/inferrail/model/prefix"
)

func testConfig() Config {
	return Config{
		BlockSize:        16,
		NumBlocks:        4096,
		MaxNumSeqs:       256,
		MaxBatchedTokens: 2048,
		MaxModelLen:      32768,
		PrefixCaching:    true,
		Latency:          defaultLatency,
	}
}

func mustNew(t testing.TB, cfg Config) *Engine {
	t.Helper()
	e, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

var testRoot = prefix.Root("sim-model", "", "")

// tokens returns n token ids starting at from.
func tokens(from, n int) []uint32 {
	t := make([]uint32, n)
	for i := range t {
		t[i] = uint32(from + i)
	}
	return t
}

func request(id string, prompt []uint32, out int) *Request {
	return &Request{ID: id, Root: testRoot, Prompt: prompt, Output: tokens(1_000_000, out), Reason: "stop"}
}

// drain steps e from now until it is idle and returns the time it got to.
func drain(t *testing.T, e *Engine, now time.Duration, m mirror) time.Duration {
	t.Helper()
	for i := 0; !e.Idle(); i++ {
		if i > 1_000_000 {
			t.Fatal("engine does not drain")
		}
		res := e.Step(now)
		if m != nil {
			m.apply(t, res.Events)
			checkMirror(t, m, e)
		}
		now += res.Duration
	}
	return now
}

func TestNewRefuses(t *testing.T) {
	f := func(mod func(*Config), want ...string) {
		t.Helper()
		cfg := testConfig()
		mod(&cfg)
		_, err := New(cfg)
		if err == nil {
			t.Fatalf("New accepted %+v", cfg)
		}
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("error %q does not mention %q", err, w)
			}
		}
	}
	f(func(c *Config) { c.NumBlocks = 100; c.MaxModelLen = 2000 },
		"kv cache too small", "100 × --block-size 16 = 1600 tokens < --max-model-len 2000")
	f(func(c *Config) { c.MaxBatchedTokens = 100; c.MaxNumSeqs = 128 },
		"--max-num-batched-tokens (100) must be greater than or equal to --max-num-seqs (128)")
	f(func(c *Config) { c.BlockSize = 0; c.MaxNumSeqs = -1 }, "--block-size", "--max-num-seqs")
	f(func(c *Config) { c.Latency.PrefillPair = -1 }, "--prefill-pair-ns")
	f(func(c *Config) { c.Latency.DecodeToken = -time.Millisecond }, "--decode-token-ms")
	if _, err := New(testConfig()); err != nil {
		t.Fatalf("default config refused: %v", err)
	}
}

func TestAddRefuses(t *testing.T) {
	cfg := testConfig()
	cfg.MaxModelLen = 100
	e := mustNew(t, cfg)
	if err := e.Add(request("a", nil, 1)); !errors.Is(err, ErrEmptyPrompt) {
		t.Errorf("empty prompt: %v", err)
	}
	if err := e.Add(request("a", tokens(0, 90), 11)); !errors.Is(err, ErrTooLong) {
		t.Errorf("too long: %v", err)
	}
	if err := e.Add(request("a", tokens(0, 90), 10)); err != nil {
		t.Errorf("exactly max_model_len: %v", err)
	}
	if err := e.Add(request("a", tokens(0, 9), 1)); !errors.Is(err, ErrDuplicateID) {
		t.Errorf("duplicate: %v", err)
	}
}

// TestRequestLifecycle follows one request through chunked prefill and decode.
func TestRequestLifecycle(t *testing.T) {
	cfg := testConfig()
	cfg.MaxBatchedTokens = 256
	e := mustNew(t, cfg)
	r := request("a", tokens(0, 600), 3)
	r.Arrival = time.Second
	if err := e.Add(r); err != nil {
		t.Fatal(err)
	}
	now := time.Second
	var got []string
	for !e.Idle() {
		res := e.Step(now)
		now += res.Duration
		for _, o := range res.Outputs {
			got = append(got, fmt.Sprintf("%d:+%d/%v/%s", res.ScheduledTokens, o.NewTokens, o.Done, o.Reason))
		}
		if len(res.Outputs) == 0 {
			got = append(got, fmt.Sprintf("%d:-", res.ScheduledTokens))
		}
	}
	want := "256:- 256:- 88:+1/false/ 1:+1/false/ 1:+1/true/stop"
	if s := strings.Join(got, " "); s != want {
		t.Fatalf("steps %s, want %s", s, want)
	}
	if r.Scheduled != time.Second || r.Generated != 3 || r.Finished != now {
		t.Fatalf("request %+v", r)
	}
	if ttft, p := r.FirstToken-r.Arrival, defaultLatency.Prefill(600, 0); ttft != p {
		t.Fatalf("TTFT %v, Prefill %v", ttft, p)
	}
	st := e.Stats()
	if st.PromptTokens != 600 || st.GenerationTokens != 3 || st.FinishedByReason["stop"] != 1 ||
		st.PrefixQueries != 600 || st.KVUsage != 0 || st.UsedBlocks != 0 || st.CachedBlocks != 37 {
		t.Fatalf("stats %+v", st)
	}
}

// TestEmptyOutputFinishesAtPrefill: a request with nothing to generate
// finishes when its prefill completes.
func TestEmptyOutputFinishesAtPrefill(t *testing.T) {
	e := mustNew(t, testConfig())
	r := request("a", tokens(0, 20), 0)
	if err := e.Add(r); err != nil {
		t.Fatal(err)
	}
	res := e.Step(0)
	if len(res.Outputs) != 1 || !res.Outputs[0].Done || res.Outputs[0].NewTokens != 0 || r.Finished != res.Duration {
		t.Fatalf("outputs %+v", res.Outputs)
	}
	if !e.Idle() || e.Stats().PromptTokens != 20 {
		t.Fatalf("stats %+v", e.Stats())
	}
}

// TestIdleTTFTIsPrefill: a request added to an idle engine and stepped at
// once gets its first token after exactly Prefill(u,c), across chunks and
// with a cached prefix.
func TestIdleTTFTIsPrefill(t *testing.T) {
	e := mustNew(t, testConfig())
	m := mirror{}
	now := 3 * time.Second
	a := request("a", tokens(0, 5000), 2) // three 2048-token chunks
	a.Arrival = now
	if err := e.Add(a); err != nil {
		t.Fatal(err)
	}
	now = drain(t, e, now, m)
	if ttft, p := a.FirstToken-a.Arrival, defaultLatency.Prefill(5000, 0); ttft < p-time.Microsecond || ttft > p+time.Microsecond {
		t.Fatalf("TTFT %v, Prefill(5000, 0) %v", ttft, p)
	}

	// b shares a's first 5000 tokens: 312 full blocks are cached.
	b := request("b", append(tokens(0, 5000), tokens(90000, 2500)...), 1)
	now += time.Minute
	b.Arrival = now
	if err := e.Add(b); err != nil {
		t.Fatal(err)
	}
	drain(t, e, now, m)
	if b.CachedTokens != 4992 {
		t.Fatalf("cached %d tokens, want 4992", b.CachedTokens)
	}
	if ttft, p := b.FirstToken-b.Arrival, defaultLatency.Prefill(7500-4992, 4992); ttft < p-time.Microsecond || ttft > p+time.Microsecond {
		t.Fatalf("TTFT %v, Prefill %v", ttft, p)
	}
	if st := e.Stats(); st.PrefixQueries != 12500 || st.PrefixHits != 4992 {
		t.Fatalf("stats %+v", st)
	}
}

// TestFullyCachedPrompt: a prompt that is entirely cached still computes its
// last token, and a whole last block when its length is a multiple of the
// block size.
func TestFullyCachedPrompt(t *testing.T) {
	f := func(n, wantHit int) {
		t.Helper()
		e := mustNew(t, testConfig())
		m := mirror{}
		drain(t, e, 0, m)
		if err := e.Add(request("a", tokens(0, n), 1)); err != nil {
			t.Fatal(err)
		}
		now := drain(t, e, 0, m)
		b := request("b", tokens(0, n), 1)
		if err := e.Add(b); err != nil {
			t.Fatal(err)
		}
		res := e.Step(now)
		m.apply(t, res.Events)
		checkMirror(t, m, e)
		if b.CachedTokens != wantHit || res.ScheduledTokens != n-wantHit {
			t.Fatalf("len %d: hit %d and scheduled %d, want hit %d", n, b.CachedTokens, res.ScheduledTokens, wantHit)
		}
		if st := e.Stats(); st.PrefixQueries != int64(2*n) || st.PrefixHits != int64(wantHit) {
			t.Fatalf("len %d: stats %+v", n, st)
		}
	}
	f(32, 16)
	f(40, 32)
	f(15, 0)
	f(17, 16)
}

// TestPrefixCachingOff: no hits, no prefix queries, no events, and KV usage
// still returns to 0.
func TestPrefixCachingOff(t *testing.T) {
	cfg := testConfig()
	cfg.PrefixCaching = false
	e := mustNew(t, cfg)
	now := time.Duration(0)
	for i := range 5 {
		r := request(fmt.Sprint(i), tokens(0, 100), 20)
		if err := e.Add(r); err != nil {
			t.Fatal(err)
		}
		for !e.Idle() {
			res := e.Step(now)
			if len(res.Events) > 0 {
				t.Fatalf("events with caching off: %s", fmtEvents(res.Events))
			}
			checkEngine(t, e)
			now += res.Duration
		}
		if r.CachedTokens != 0 {
			t.Fatalf("hit %d tokens with caching off", r.CachedTokens)
		}
	}
	st := e.Stats()
	if st.PrefixHits != 0 || st.PrefixQueries != 0 || st.CachedBlocks != 0 || st.KVUsage != 0 || st.PromptTokens != 500 {
		t.Fatalf("stats %+v", st)
	}
	if !e.ResetPrefixCache() || !e.Idle() {
		t.Fatal("reset with caching off")
	}
}

// TestDecodeStretches: a decode step costs DecodeToken + DecodeSeq·(n−1), and
// a prefill chunk sharing the step adds its own cost.
func TestDecodeStretches(t *testing.T) {
	prev := time.Duration(0)
	for _, n := range []int{1, 2, 16, 100} {
		e := mustNew(t, testConfig())
		for i := range n {
			if err := e.Add(request(fmt.Sprint(i), tokens(i*100, 10), 5)); err != nil {
				t.Fatal(err)
			}
		}
		res := e.Step(0) // every prompt prefills in one step
		if len(res.Outputs) != n {
			t.Fatalf("%d outputs after the prefill step, want %d", len(res.Outputs), n)
		}
		res = e.Step(res.Duration)
		want := defaultLatency.Decode(n)
		if res.Duration != want || res.ScheduledTokens != n {
			t.Fatalf("n=%d: decode step %v (%d tokens), want %v", n, res.Duration, res.ScheduledTokens, want)
		}
		if res.Duration <= prev {
			t.Fatalf("n=%d: decode step %v not longer than %v", n, res.Duration, prev)
		}
		prev = res.Duration

		// A long prompt joins: the budget left after n decodes goes to its
		// first chunk, and the step costs both.
		if err := e.Add(request("long", tokens(50000, 4000), 1)); err != nil {
			t.Fatal(err)
		}
		res = e.Step(time.Hour)
		chunk := 2048 - n
		want = defaultLatency.Decode(n) + defaultLatency.Chunk(0, chunk) + defaultLatency.PrefillFixed
		if res.Duration != want || res.ScheduledTokens != 2048 {
			t.Fatalf("n=%d: mixed step %v (%d tokens), want %v", n, res.Duration, res.ScheduledTokens, want)
		}
	}
}

// TestAbort: aborted requests leave at once and are reported by the next step.
func TestAbort(t *testing.T) {
	cfg := testConfig()
	cfg.MaxNumSeqs = 1
	cfg.MaxBatchedTokens = 64
	e := mustNew(t, cfg)
	a, b := request("a", tokens(0, 100), 5), request("b", tokens(500, 10), 5)
	for _, r := range []*Request{a, b} {
		if err := e.Add(r); err != nil {
			t.Fatal(err)
		}
	}
	e.Step(0) // a prefills its first 64 tokens; b waits for a slot
	if st := e.Stats(); st.Running != 1 || st.Waiting != 1 || st.UsedBlocks != 4 {
		t.Fatalf("stats %+v", st)
	}
	if !e.Abort("b") || !e.Abort("a") || e.Abort("a") || e.Abort("nope") {
		t.Fatal("Abort results")
	}
	st := e.Stats()
	if st.Running != 0 || st.Waiting != 0 || st.UsedBlocks != 0 || st.FinishedByReason["abort"] != 2 || e.Idle() {
		t.Fatalf("after abort: stats %+v, idle %v", st, e.Idle())
	}
	res := e.Step(time.Second)
	if len(res.Outputs) != 2 || res.Outputs[0].Req != b || res.Outputs[1].Req != a || res.Duration != 0 {
		t.Fatalf("outputs %+v", res.Outputs)
	}
	for _, o := range res.Outputs {
		if !o.Done || o.Reason != "abort" || o.NewTokens != 0 || o.Req.Finished != time.Second {
			t.Fatalf("output %+v", o)
		}
	}
	if !e.Idle() {
		t.Fatal("not idle after reporting aborts")
	}
	// The id is free again.
	if err := e.Add(request("a", tokens(0, 10), 1)); err != nil {
		t.Fatal(err)
	}
}

// TestResetPrefixCache: refused while blocks are in use; otherwise drops all
// hashes and reports AllBlocksCleared in the next step.
func TestResetPrefixCache(t *testing.T) {
	e := mustNew(t, testConfig())
	m := mirror{}
	if err := e.Add(request("a", tokens(0, 100), 3)); err != nil {
		t.Fatal(err)
	}
	res := e.Step(0)
	m.apply(t, res.Events)
	if e.ResetPrefixCache() {
		t.Fatal("reset succeeded with a running request")
	}
	now := drain(t, e, res.Duration, m)
	if e.Stats().CachedBlocks != 6 {
		t.Fatalf("stats %+v", e.Stats())
	}
	if !e.ResetPrefixCache() || e.Idle() {
		t.Fatal("reset refused on an idle engine, or left it idle with an event pending")
	}
	res = e.Step(now)
	if len(res.Events) != 1 {
		t.Fatalf("events %s", fmtEvents(res.Events))
	}
	if _, ok := res.Events[0].(*kvevent.AllBlocksCleared); !ok {
		t.Fatalf("events %s", fmtEvents(res.Events))
	}
	m.apply(t, res.Events)
	checkMirror(t, m, e)
	if !e.Idle() || e.Stats().CachedBlocks != 0 {
		t.Fatalf("stats %+v", e.Stats())
	}
	b := request("b", tokens(0, 100), 1)
	if err := e.Add(b); err != nil {
		t.Fatal(err)
	}
	drain(t, e, now, m)
	if b.CachedTokens != 0 {
		t.Fatalf("hit %d tokens after reset", b.CachedTokens)
	}
}

// TestGeneratedBlocksAreCached: blocks filled by generated tokens are cached
// when their last token is scheduled, so a follow-up turn that repeats the
// conversation hits them.
func TestGeneratedBlocksAreCached(t *testing.T) {
	e := mustNew(t, testConfig())
	m := mirror{}
	a := request("a", tokens(0, 20), 30) // 50 tokens: blocks 0-2 full
	if err := e.Add(a); err != nil {
		t.Fatal(err)
	}
	now := drain(t, e, 0, m)
	// a computed 49 tokens' KV; its cached blocks cover 48.
	if st := e.Stats(); st.CachedBlocks != 3 {
		t.Fatalf("cached %d blocks, want 3", st.CachedBlocks)
	}
	b := request("b", append(append(tokens(0, 20), a.Output...), tokens(7000, 5)...), 1)
	if err := e.Add(b); err != nil {
		t.Fatal(err)
	}
	drain(t, e, now, m)
	if b.CachedTokens != 48 {
		t.Fatalf("follow-up hit %d tokens, want 48", b.CachedTokens)
	}
}

// Load reads what Stats reads of the load, step after step.
func TestLoadMatchesStats(t *testing.T) {
	cfg := testConfig()
	cfg.NumBlocks, cfg.MaxNumSeqs, cfg.MaxModelLen = 24, 3, 384 // some wait, the pool fills
	e := mustNew(t, cfg)
	for i := range 6 {
		if err := e.Add(request(string(rune('a'+i)), tokens(100*i, 40+30*i), 5)); err != nil {
			t.Fatal(err)
		}
	}
	var now time.Duration
	for range 30 {
		st := e.Stats()
		running, waiting, kv := e.Load()
		if running != st.Running || waiting != st.Waiting || kv != st.KVUsage {
			t.Fatalf("Load %d %d %v, Stats %+v", running, waiting, kv, st)
		}
		now += e.Step(now).Duration
	}
}

// TestWithContext: a longer context raises max_model_len to the power of two
// that holds it and grows the pool to hold one such sequence; a context the
// engine holds already changes nothing.
func TestWithContext(t *testing.T) {
	c := Config{BlockSize: 16, NumBlocks: 4096, MaxModelLen: 32768}
	if got, raised := c.WithContext(32768); raised || got != c {
		t.Fatalf("WithContext(32768) = %+v, %v: want c unchanged", got, raised)
	}
	got, raised := c.WithContext(40010)
	if !raised || got.MaxModelLen != 65536 || got.NumBlocks != 4096 {
		t.Fatalf("WithContext(40010) = %+v, %v: want max_model_len 65536 and the pool kept", got, raised)
	}
	if got, _ := c.WithContext(100000); got.MaxModelLen != 131072 || got.NumBlocks != 8192 {
		t.Fatalf("WithContext(100000) = %+v: want 131072 tokens in 8192 blocks", got)
	}
	big, _ := Config{BlockSize: 16, NumBlocks: 4096, MaxModelLen: 32768, MaxNumSeqs: 256, MaxBatchedTokens: 2048}.WithContext(200000)
	if _, err := New(big); err != nil {
		t.Fatalf("a raised engine is refused: %v", err)
	}
}

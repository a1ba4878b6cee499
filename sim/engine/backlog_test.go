package engine

import (
	"testing"
	"time"

	"github.com/inferrail/inferrail/model/prefix"
)

// Outlook's backlog is the prefill still to run: with decoding free,
// before every step it equals the durations of the steps left until the
// engine idles, for a cached prefix, a prompt cut into chunks, one waiting
// behind it and one sharing a queued request's prefix, computed once.
func TestBacklogIsThePrefillLeft(t *testing.T) {
	cfg := testConfig()
	cfg.Latency.DecodeToken, cfg.Latency.DecodeSeq = 0, 0
	e := mustNew(t, cfg)
	if got, _ := e.Outlook(nil, 0); got != 0 {
		t.Fatalf("idle engine: Backlog = %v, want 0", got)
	}
	if err := e.Add(request("warm", tokens(1, 1000), 1)); err != nil {
		t.Fatal(err)
	}
	drain(t, e, 0, nil)
	for _, r := range []*Request{
		request("hit", append(tokens(1, 1000), tokens(70_000, 2049)...), 1), // 992 cached, two chunks and a token
		request("cold", tokens(90_000, 3000), 1),
		request("short", tokens(1, 500), 1),
		// Queued behind cold, which computes its first 3,000 tokens.
		request("shares", append(tokens(90_000, 3000), tokens(95_000, 300)...), 1),
	} {
		if err := e.Add(r); err != nil {
			t.Fatal(err)
		}
	}
	var backlogs, durations []time.Duration
	now := time.Duration(0)
	for !e.Idle() {
		b, _ := e.Outlook(nil, 0)
		backlogs = append(backlogs, b)
		res := e.Step(now)
		durations = append(durations, res.Duration)
		now += res.Duration
	}
	if len(durations) < 3 {
		t.Fatalf("%d steps: want the prompts cut into several", len(durations))
	}
	left := time.Duration(0)
	for k := len(durations) - 1; k >= 0; k-- {
		left += durations[k]
		if backlogs[k] != left {
			t.Errorf("before step %d: Backlog = %v, want the %v the steps left took", k, backlogs[k], left)
		}
	}
}

// Outlook's ahead counts what the pool holds and what the requests queued
// ahead will compute: a prompt sharing a waiting request's first 40 tokens
// finds its two full blocks; one sharing nothing finds what the pool has.
func TestAheadCountsTheQueue(t *testing.T) {
	e := mustNew(t, testConfig())
	var h prefix.Hasher
	if err := e.Add(request("warm", tokens(1, 100), 1)); err != nil {
		t.Fatal(err)
	}
	drain(t, e, 0, nil)
	if err := e.Add(request("queued", tokens(5_000, 200), 1)); err != nil {
		t.Fatal(err)
	}
	shares := append(tokens(5_000, 40), tokens(9_000, 60)...)
	chain := h.Chain(nil, testRoot, shares, 16)
	if _, got := e.Outlook(chain, len(shares)); got != 32 || e.Cached(chain, len(shares)) != 0 {
		t.Fatalf("sharing the queued prompt's 2 blocks: ahead %d, Cached %d; want 32 and 0", got, e.Cached(chain, len(shares)))
	}
	warm := tokens(1, 100)
	if _, got := e.Outlook(h.Chain(nil, testRoot, warm, 16), len(warm)); got != 96 {
		t.Fatalf("the cached prompt: ahead %d, want 96", got)
	}
	if b, _ := e.Outlook(nil, 0); b == 0 || e.Stats().Waiting != 1 {
		t.Fatal("Outlook changed the queue")
	}
}

package engine

import (
	"testing"
	"time"
)

// Backlog is the prefill still to run: with decoding free, before every
// step it equals the durations of the steps left until the engine idles,
// for a cached prefix, a prompt cut into chunks and one waiting behind it.
func TestBacklogIsThePrefillLeft(t *testing.T) {
	cfg := testConfig()
	cfg.Latency.DecodeToken, cfg.Latency.DecodeSeq = 0, 0
	e := mustNew(t, cfg)
	if got := e.Backlog(); got != 0 {
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
	} {
		if err := e.Add(r); err != nil {
			t.Fatal(err)
		}
	}
	var backlogs, durations []time.Duration
	now := time.Duration(0)
	for !e.Idle() {
		backlogs = append(backlogs, e.Backlog())
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

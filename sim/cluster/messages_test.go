package cluster

import (
	"testing"
	"time"

	"github.com/inferrail/inferrail/sim"
	"github.com/inferrail/inferrail/sim/workload"
)

// On claude-code sessions, cost_model routing on the prompt vLLM renders
// (the billing header dropped), with the engines' KV events, keeps each
// session's growing prefix where it is cached and predicts it; routing the same traffic on the text with
// the header kept (KeepBillingHeader) sees a new prompt every request, so
// the engines hit less and the predictions fall short of what they find.
func TestKeepBillingHeader(t *testing.T) {
	if raceEnabled {
		t.Skip("a run is one goroutine: nothing for -race to find, and 25 times slower under it")
	}
	w := workload.NewClaudeCode()
	base := Config{Replicas: 3, Engine: sim.DefaultOptions().Engine, Policy: "cost_model", KVEvents: true,
		Workload: &w, Rate: 4, Duration: 40 * time.Second, WarmUp: 10 * time.Second, Seed: 1}
	strip, err := Run(base)
	if err != nil {
		t.Fatal(err)
	}
	base.KeepBillingHeader = true
	keep, err := Run(base)
	if err != nil {
		t.Fatal(err)
	}
	s, k := strip.Summary, keep.Summary
	t.Logf("dropped: hit %.3f exact %.3f; kept: hit %.3f exact %.3f (%d requests)", s.HitRate, s.Accuracy, k.HitRate, k.Accuracy, s.Requests)
	if s.Requests != k.Requests || s.PromptTokens != k.PromptTokens {
		t.Fatalf("the runs differ in their traffic: %d and %d requests, %d and %d prompt tokens", s.Requests, k.Requests, s.PromptTokens, k.PromptTokens)
	}
	if s.HitRate <= k.HitRate || s.Accuracy < 0.9 || k.Accuracy >= s.Accuracy || k.Under <= s.Under {
		t.Errorf("header dropped: hit %.3f, exact %.3f, under %.3f; kept: hit %.3f, exact %.3f, under %.3f",
			s.HitRate, s.Accuracy, s.Under, k.HitRate, k.Accuracy, k.Under)
	}
}

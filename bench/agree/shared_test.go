package agree

import (
	"strings"
	"testing"
	"time"

	"github.com/inferrail/inferrail/sim"
	"github.com/inferrail/inferrail/sim/workload"
)

// TestSharedEnginesRendezvous measures issue 32's case 4 in virtual time,
// on TestRendezvousOnSmallEngines' fleet (3 engines of 400 blocks, 12
// system prompts of about 1,550 tokens, two instances behind a
// round-robin balancer, no KV events): cost_model as the gateway routes it
// now, turning the cold rendezvous on while an instance finds an engine
// shared (load.Shared), against the same with that check off (the gateway
// before) and with routing.cold_rendezvous set. Two instances must keep at
// least 0.9× one's hit rate with the automatic behaviour, and a lone
// instance must lose nothing to it (it never finds an engine shared).
func TestSharedEnginesRendezvous(t *testing.T) {
	if testing.Short() {
		t.Skip("96 fleet runs")
	}
	rows, err := Run(smallEngines([]Variant{{Name: "cost_model", Policy: "cost_model"},
		{Name: "cost_model, shared check off", Policy: "cost_model", IgnoreShared: true},
		{Name: "cost_model+cold_rendezvous", Policy: "cost_model", ColdRendezvous: true}}))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	_ = Write(&b, rows)
	t.Log("\n" + b.String())
	row := func(policy string, n int) Row {
		for _, r := range rows {
			if r.Policy == policy && !r.Events && r.Instances == n {
				return r
			}
		}
		t.Fatalf("no row for %s, %d instances, without events", policy, n)
		return Row{}
	}
	auto1, auto2 := row("cost_model", 1), row("cost_model", 2)
	off1, off2 := row("cost_model, shared check off", 1), row("cost_model, shared check off", 2)
	t.Logf("without events: one instance %.3f (check off %.3f); two %.3f = %.3f× (check off %.3f = %.3f×)",
		auto1.HitRate, off1.HitRate, auto2.HitRate, auto2.Ratio, off2.HitRate, off2.Ratio)
	if auto1.HitRate != off1.HitRate {
		t.Errorf("a lone instance's hit rate %.3f with the check, %.3f without: it found an engine shared", auto1.HitRate, off1.HitRate)
	}
	if auto2.Ratio < 0.9 {
		t.Errorf("two instances without events: %.3f× one's hit rate with the automatic rendezvous; want at least 0.9×", auto2.Ratio)
	}
	if auto2.Ratio <= off2.Ratio {
		t.Errorf("two instances: %.3f× with the check, %.3f× without; want better", auto2.Ratio, off2.Ratio)
	}
}

// smallEngines is the matrix of variants on TestRendezvousOnSmallEngines'
// fleet: 3 engines of 400 blocks, 12 system prompts of about 1,550 tokens
// at 4 requests a second, 1 and 2 instances, 8 seeds of 90 s.
func smallEngines(variants []Variant) Options {
	w := &workload.Shared{Label: "small", Prompts: 12, SystemTokens: workload.Range{Min: 1520, Max: 1580},
		QuestionTokens: workload.Range{Min: 4, Max: 12}, OutputTokens: workload.Range{Min: 4, Max: 4}}
	eng := sim.DefaultOptions().Engine
	eng.NumBlocks, eng.MaxModelLen = 400, 6000
	return Options{Points: []Point{{Name: "small", Workload: w, Rate: 4}}, Variants: variants, Instances: []int{1, 2},
		Replicas: 3, Engine: eng, Duration: 90 * time.Second, WarmUp: 15 * time.Second,
		Seeds: []uint64{1, 2, 3, 4, 5, 6, 7, 8}, Jobs: 2}
}

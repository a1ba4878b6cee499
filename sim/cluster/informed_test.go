package cluster

import (
	"reflect"
	"testing"
	"time"

	"github.com/inferrail/inferrail/model/sched"
	"github.com/inferrail/inferrail/sim/workload"
)

// evictionRun is a fleet under eviction pressure: W1 over 24 shared
// prompts of 2k to 8k tokens on engines whose KV cache holds about four
// of them, so the shadow index, which learns of evictions only by
// guessing each engine's LRU, mispredicts about one request in eight.
func evictionRun(policy string, seed uint64) Config {
	wl := workload.W1()
	wl.Prompts = 24
	e := defaultEngine()
	e.NumBlocks, e.MaxModelLen = 2048, 16384
	return Config{Replicas: 3, Engine: e, Policy: policy, Workload: &wl, Rate: 2,
		Duration: 120 * time.Second, WarmUp: 15 * time.Second, Seed: seed}
}

// The informed upper bound decides as cost_model does on the engines'
// true state: where the shadow index mispredicts it predicts what the
// engines find, and it keeps as much of the cache over five seeds.
func TestInformedBeatsEstimates(t *testing.T) {
	var cm, inf Summary
	var cmMean, infMean time.Duration
	for seed := uint64(1); seed <= 5; seed++ {
		a := mustRun(t, evictionRun("cost_model", seed)).Summary
		b := mustRun(t, evictionRun(Informed, seed)).Summary
		t.Logf("seed %d: cost_model %v", seed, a)
		t.Logf("seed %d: informed   %v", seed, b)
		cmMean += a.MeanTTFT
		infMean += b.MeanTTFT
		cm.HitRate += a.HitRate / 5
		inf.HitRate += b.HitRate / 5
		cm.Accuracy += a.Accuracy / 5
		inf.Accuracy += b.Accuracy / 5
	}
	if cm.Accuracy > 0.95 {
		t.Fatalf("cost_model's predictions exact on %.3f of requests: no eviction pressure to tell", cm.Accuracy)
	}
	if inf.Accuracy < 0.97 || inf.Accuracy <= cm.Accuracy {
		t.Errorf("informed predictions exact on %.3f, cost_model's on %.3f: want the truth at least 0.97 and better", inf.Accuracy, cm.Accuracy)
	}
	// Its hit rate stays within half a point. Its mean TTFT is not
	// asserted: with cost_model's recompute price the true queues move more
	// requests off the replica holding their prefix, and over these seeds
	// the bound's mean TTFT came out up to 14% above cost_model's on a seed (the
	// capacity report says the bound is no upper bound; issue 31's notes).
	if inf.HitRate < cm.HitRate-0.005 {
		t.Errorf("informed: hit rate %.3f; cost_model: %.3f: want the bound within half a point", inf.HitRate, cm.HitRate)
	}
	t.Logf("mean TTFT summed over the seeds: informed %v, cost_model %v", infMean, cmMean)
}

// The informed bound is a pure function of its config, as every run is,
// and the name routes nowhere but the simulator: sched knows no such
// policy.
func TestInformedDeterministic(t *testing.T) {
	cfg := evictionRun(Informed, 9)
	cfg.Duration = 40 * time.Second
	a, b := mustRun(t, cfg), mustRun(t, cfg)
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("same config, different results:\n%v\n%v", a.Summary, b.Summary)
	}
	if a.Policy != Informed || a.Summary.Requests < 50 {
		t.Fatalf("run labelled %q with %d requests", a.Policy, a.Summary.Requests)
	}
	if _, ok := sched.Lookup(Informed); ok {
		t.Fatalf("sched knows %s: the gateway would accept it", Informed)
	}
	cfg.Seed = 10
	if c := mustRun(t, cfg); reflect.DeepEqual(a.Requests, c.Requests) {
		t.Fatal("seeds 9 and 10 gave the same run")
	}
}

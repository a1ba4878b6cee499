package cluster

import (
	"math"
	"testing"
	"time"

	"github.com/inferrail/inferrail/sim/engine"
)

// TestAutoCalibrate: with AutoCalibrate, each instance's shadow of each
// engine fits the engine's prefill from what the virtual gateway sees.
// Engines twice and half as slow as configured, whose decode steps cost
// what the cost model prices, come within 5% on a within 1500 requests;
// and the fit follows a speed change.
func TestAutoCalibrate(t *testing.T) {
	if raceEnabled {
		t.Skip("a run is one goroutine: nothing for -race to find, and 25 times slower under it")
	}
	eng := defaultEngine()
	eng.Latency.DecodeToken = eng.Latency.DecodeSeq
	factors := []float64{2, 0.5, 2}
	cfg := Config{Replicas: 3, Engine: eng, Policy: "cost_model", Workload: w1x32(), Rate: 2.5, Requests: 1500, Seed: 1,
		AutoCalibrate: true, EngineOverrides: map[int]engine.Latency{},
		Faults: Faults{SpeedChange: []SpeedChange{{At: 300 * time.Second, Replica: 2, Factor: 0.25}}}}
	for i, f := range factors {
		cfg.EngineOverrides[i] = scaleLatency(eng.Latency, f)
	}
	res := mustRun(t, cfg)
	if len(res.Fits) != 3 {
		t.Fatalf("%d fit traces, want 3", len(res.Fits))
	}
	for i, f := range factors {
		if i == 2 {
			f *= 0.25 // the speed change
		}
		want := eng.Latency.PrefillToken.Seconds() * f
		tr := res.Fits[i]
		last := tr[len(tr)-1]
		if got := last.Model.PrefillTokenSecs; math.Abs(got/want-1) > 0.05 || !last.Stats.Fitted {
			t.Errorf("replica %d: a = %.3g after %d requests (%+v), want %.3g within 5%%", i, got, last.Requests, last.Stats, want)
		}
	}
	bad := cfg
	bad.Faults.SpeedChange = []SpeedChange{{At: time.Second, Replica: 3, Factor: 2}}
	if _, err := Run(bad); err == nil {
		t.Error("a speed change of replica 3 of 3 ran")
	}
}

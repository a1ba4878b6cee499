package cluster

import (
	"testing"
	"time"

	"github.com/inferrail/inferrail/sim/workload"
)

// An instance killed mid-run: the load balancer sends the rest everything
// from then on, the only requests lost are those it had in flight, and the
// others keep one instance's hit rate through the engines' events.
func TestKillInstance(t *testing.T) {
	cfg := Config{Replicas: 3, Engine: defaultEngine(), Policy: "cost_model", Workload: w1x32(), Rate: 5,
		Instances: 2, KVEvents: true, Duration: 40 * time.Second, Seed: 11,
		Faults: Faults{KillAt: 20 * time.Second, KillInstance: 1}}
	res := mustRun(t, cfg)
	lost, inFlight := 0, 0
	for i := range res.Requests {
		r := &res.Requests[i]
		if r.Arrival >= cfg.Faults.KillAt && r.Instance == 1 {
			t.Fatalf("request %d at %v went to the killed instance", i, r.Arrival)
		}
		if r.Instance == 1 && r.Arrival < cfg.Faults.KillAt && r.Finished > cfg.Faults.KillAt {
			inFlight++
		}
		if r.Lost {
			lost++
			if r.Instance != 1 || r.Arrival >= cfg.Faults.KillAt {
				t.Fatalf("request %d lost: instance %d at %v", i, r.Instance, r.Arrival)
			}
		}
	}
	if lost != inFlight || res.Summary.Lost != lost {
		t.Fatalf("%d lost (summary %d), %d in flight on the killed instance", lost, res.Summary.Lost, inFlight)
	}
	after := res.Summarize(func(r *Record) bool { return r.Arrival >= cfg.Faults.KillAt+time.Second })
	if after.Accuracy < 0.95 {
		t.Errorf("after the kill: predictions exact on %.3f, want at least 0.95", after.Accuracy)
	}
	t.Logf("lost %d in flight; after: %v", lost, after)
}

// Events withheld for 5 s: the instances predict from their decisions
// alone meanwhile (as the gateway's approximate index), and exactly again
// once the held events arrive.
func TestWithholdEvents(t *testing.T) {
	wl, from, d := w2(t), 40*time.Second, 5*time.Second
	cfg := Config{Replicas: 3, Engine: defaultEngine(), Policy: "cost_model", Workload: wl, Rate: 7,
		Instances: 2, KVEvents: true, Duration: 70 * time.Second, Seed: 5,
		Faults: Faults{WithholdFrom: from, WithholdFor: d}}
	res := mustRun(t, cfg)
	window := func(lo, hi time.Duration) Summary {
		return res.Summarize(func(r *Record) bool { return r.Arrival >= lo && r.Arrival < hi })
	}
	before, during, back := window(20*time.Second, from), window(from+time.Second, from+d), window(from+d, from+d+time.Second)
	after := window(from+d+time.Second, cfg.Duration)
	t.Logf("exact before %.3f, withheld %.3f, first second after %.3f, after %.3f",
		before.Accuracy, during.Accuracy, back.Accuracy, after.Accuracy)
	if during.Accuracy >= before.Accuracy || after.Accuracy < 0.95 || back.Accuracy < 0.9 {
		t.Errorf("exact before %.3f, withheld %.3f, first second after %.3f, after %.3f: want lower while withheld, at least 0.9 within 1 s after and 0.95 later",
			before.Accuracy, during.Accuracy, back.Accuracy, after.Accuracy)
	}
	if err := (&Config{Instances: 1, Faults: Faults{KillAt: time.Second}}).Faults.validate(1, 1); err == nil {
		t.Error("killing the only instance validated")
	}
}

func w2(t *testing.T) workload.Workload {
	t.Helper()
	w, err := workload.New("W2")
	if err != nil {
		t.Fatal(err)
	}
	return w
}

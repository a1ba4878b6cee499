package message

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/inferrail/inferrail/bench/harness"
	"github.com/inferrail/inferrail/sim"
	"github.com/inferrail/inferrail/sim/workload"
)

// A short run of each mode: a row per events setting and variant, in
// that order, every one with measured requests and no errors, predictions
// where the router makes them, and one table line per row. The real-time
// fleet here is the simulators alone (the gateway's is cmd/inferrail's),
// so only its plumbing is under test: the requests go over /v1/messages
// and their usage is read.
func TestRuns(t *testing.T) {
	w := workload.NewClaudeCode()
	o := Options{Workload: &w, Rate: 4, Replicas: 3, Engine: sim.DefaultOptions().Engine, Events: []bool{false, true},
		Duration: 12 * time.Second, WarmUp: 3 * time.Second, Seeds: []uint64{1}}
	rows, err := Virtual(o)
	if err != nil {
		t.Fatal(err)
	}
	vs := Variants()
	check := func(rows []Row, mode string, events []bool) {
		t.Helper()
		if len(rows) != len(events)*len(vs) {
			t.Fatalf("%s: %d rows, want %d", mode, len(rows), len(events)*len(vs))
		}
		for i, r := range rows {
			v := vs[i%len(vs)]
			if r.Mode != mode || r.Variant != v.Name || r.Events != events[i/len(vs)] || r.Requests == 0 || r.Errors != 0 ||
				r.HitRate <= 0 || r.HitRate > 1 || r.P50TTFT <= 0 || r.P99TTFT < r.P50TTFT {
				t.Fatalf("%s row %d: %+v", mode, i, r)
			}
		}
	}
	check(rows, ModeVirtual, o.Events)
	for _, r := range rows {
		if (r.Predicted > 0) != (r.Variant != "round_robin") {
			t.Errorf("virtual %s: %d predictions", r.Variant, r.Predicted)
		}
	}

	opts := sim.DefaultOptions()
	opts.Port, opts.EnablePromptTokensDetails, opts.Engine.Latency.Zero = 0, true, true
	o.Duration, o.WarmUp, o.Events = 3*time.Second, time.Second, []bool{false}
	started := 0
	rt, err := Real(context.Background(), o, func(ctx context.Context, v Variant, events bool) (harness.Target, func(), error) {
		s, err := sim.Start(opts)
		if err != nil {
			return harness.Target{}, nil, err
		}
		started++
		return harness.Target{URL: s.URL(), Model: opts.Model}, func() { s.Close() }, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if started != len(vs) {
		t.Fatalf("%d fleets started, want one per variant", started)
	}
	check(rt, ModeReal, o.Events)

	var b strings.Builder
	if err := Write(&b, append(rows, rt...)); err != nil || strings.Count(b.String(), "\n") != 2+len(rows)+len(rt) {
		t.Fatalf("table: %v\n%s", err, b.String())
	}
}

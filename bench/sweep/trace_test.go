package sweep

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/inferrail/inferrail/sim"
)

// traceSweep replays the first 40 requests of Mooncake's trace (kept with
// the workload package's tests) at its own rate and twice it.
const traceSweep = `
name = "trace"
replicas = 2
repetitions = 1
policies = ["cost_model"]

[[point]]
name = "mooncake"
workload = "trace"
trace = "mooncake_first300.jsonl"
rates = [0, %s]
#point
[point.set]
limit = 40
speed = 1
`

const traceDir = "../../sim/workload/testdata"

func TestTracePoint(t *testing.T) {
	s, err := Parse(strings.Replace(traceSweep, "%s", "1.5", 1), traceDir)
	if err != nil {
		t.Fatal(err)
	}
	p := &s.Points[0]
	own := p.trace.Rate()
	if p.trace.Len() != 40 || p.Rates[0] != own || p.Main != own || p.Rates[1] != 1.5 {
		t.Fatalf("rates %v, main %v, the trace's %v over %d requests", p.Rates, p.Main, own, p.trace.Len())
	}
	if len(s.Notes) != 1 || !strings.Contains(s.Notes[0], "40 of 300 requests kept") {
		t.Errorf("notes %q", s.Notes)
	}
	// The slice's longest prompt is 120,633 tokens, past the default
	// engine's max_model_len: the point's engines are sized up, and say so.
	def := sim.DefaultOptions().Engine
	runs := s.Plan("virtual")
	if len(runs) != 2 {
		t.Fatalf("%d runs", len(runs))
	}
	for _, r := range runs {
		if r.Kind != "trace" || r.Duration != p.trace.End(r.Rate) || r.Engine.MaxModelLen != 128<<10 ||
			r.Engine.NumBlocks != 128<<10/def.BlockSize || !strings.Contains(string(r.Params), `"sha256":"`) {
			t.Fatalf("run %+v", r)
		}
	}
	if len(s.Warnings) != 1 || !strings.Contains(s.Warnings[0], "max_model_len 131072") {
		t.Errorf("warnings %q", s.Warnings)
	}
	res, err := Virtual{}.Run(context.Background(), runs[1])
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Records) != 40 || res.Records[39].Due >= runs[1].Duration {
		t.Fatalf("%d requests, the last due at %v of %v", len(res.Records), res.Records[len(res.Records)-1].Due, runs[1].Duration)
	}

	// A duration cuts the replay short.
	short, err := Parse(strings.Replace(strings.Replace(traceSweep, "%s", "1.5", 1), "#point", `duration = "3s"`, 1), traceDir)
	if err != nil {
		t.Fatal(err)
	}
	if d := short.Plan("virtual")[0].Duration; d != 3*time.Second {
		t.Errorf("duration 3s: the run lasts %v", d)
	}
}

func TestTracePointErrors(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{strings.Replace(traceSweep, `trace = "mooncake_first300.jsonl"`, "", 1), `point "mooncake": trace: a trace point names its file`},
		{strings.Replace(traceSweep, `workload = "trace"`, `workload = "W1"`, 1), `only a "trace" point replays a trace`},
		{strings.Replace(traceSweep, "limit = 40", "limit = 40\nspeeed = 2", 1), "unknown key point.set.speeed"},
		{strings.Replace(traceSweep, "speed = 1", "speed = -1", 1), "speed -1"},
		{strings.Replace(traceSweep, "mooncake_first300", "none", 1), "none.jsonl"},
		{strings.Replace(traceSweep, "#point", `warmup = "1h"`, 1), "warmup 1h0m0s: want 0 <= warmup < duration (at"},
	} {
		_, err := Parse(strings.Replace(tc.text, "%s", "2", 1), traceDir)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %v, want one with %q", err, tc.want)
		}
	}
}

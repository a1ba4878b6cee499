package whatif

import (
	"testing"

	"github.com/inferrail/inferrail/sim/cluster"
	"github.com/inferrail/inferrail/sim/workload"
)

// Sink keeps the benchmark's results alive.
var Sink Result

// BenchmarkPoint is one point of a whatif on a long-prompt trace: the test
// request log (prompts up to 6,000 tokens in 512-token hash ids) replayed
// over and over to 2,000 requests, cost_model on 4 h100-8b replicas with
// 256-token blocks. Its ns/op over 2,000 is a point's cost per request;
// scripts/whatif-100k.sh times the whole command at 100,000.
func BenchmarkPoint(b *testing.B) {
	tr, err := workload.LoadTrace("testdata/requestlog.jsonl", workload.TraceOptions{})
	if err != nil {
		b.Fatal(err)
	}
	e, _ := Preset("h100-8b")
	if e, err = e.WithBlockSize(256); err != nil {
		b.Fatal(err)
	}
	// The log's own rate is 80 req/s; a fifth of it keeps 4 replicas busy
	// but not drowning.
	p := Plan{Workload: tr, Rate: tr.Rate() / 5, Requests: 2000, Engine: e, Fanout: 16}
	r := Route{Name: "cost_model", Policy: "cost_model"}
	b.ReportAllocs()
	for b.Loop() {
		res, err := cluster.Run(p.config(&r, Point{Replicas: 4, Scale: 1, Rate: p.Rate}))
		if err != nil {
			b.Fatal(err)
		}
		Sink = Measure(&res, SLO{TTFT: 1e10, TPOT: 1e8})
	}
}

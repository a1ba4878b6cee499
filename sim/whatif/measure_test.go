package whatif

import (
	"math"
	"testing"
	"time"

	"github.com/inferrail/inferrail/sim/cluster"
)

func TestMeasure(t *testing.T) {
	ms := time.Millisecond
	rec := func(ttft, perToken time.Duration, out int) cluster.Record {
		first := time.Second + ttft
		return cluster.Record{Arrival: time.Second, FirstToken: first,
			Finished: first + perToken*time.Duration(max(out-1, 0)), PromptTokens: 100, CachedTokens: 40, OracleTokens: 60, OutputTokens: out}
	}
	res := &cluster.Result{Requests: []cluster.Record{
		rec(100*ms, 20*ms, 11), // within both
		rec(300*ms, 20*ms, 11), // TTFT over
		rec(100*ms, 80*ms, 11), // TPOT over
		rec(150*ms, 0, 1),      // one token: no TPOT, within
		{Rejected: true},       // rejected: counts against attainment
	}}
	slo := SLO{TTFT: 200 * ms, TPOT: 50 * ms}
	r := Measure(res, slo)
	if r.Requests != 5 || r.Rejected != 1 || r.Meets {
		t.Fatalf("%+v", r)
	}
	if r.Attainment != 2.0/5 {
		t.Fatalf("attainment %v, want 0.4", r.Attainment)
	}
	near := func(name string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 1e-9 {
			t.Fatalf("%s %v, want %v", name, got, want)
		}
	}
	near("p50 TTFT", r.P50TTFT, 0.1)
	near("p99 TTFT", r.P99TTFT, 0.3)
	near("p50 TPOT", r.P50TPOT, 0.02)
	near("p99 TPOT", r.P99TPOT, 0.08)
	near("hit rate", r.HitRate, 0.4)
	near("oracle", r.OracleHitRate, 0.6)

	// Without the rejection and the slow ones, it meets.
	res.Requests = []cluster.Record{rec(100*ms, 20*ms, 11), rec(150*ms, 0, 1)}
	if r := Measure(res, slo); !r.Meets || r.Attainment != 1 {
		t.Fatalf("%+v", r)
	}
	// Nothing served never meets.
	if r := Measure(&cluster.Result{Requests: []cluster.Record{{Rejected: true}}}, slo); r.Meets {
		t.Fatalf("%+v", r)
	}
}

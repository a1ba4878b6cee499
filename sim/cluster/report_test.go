package cluster

import (
	"flag"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/inferrail/inferrail/sim/workload"
)

// reportPoints are the workloads of the report, each at the point the
// routing criteria use.
var reportPoints = []struct {
	wl       workload.Workload
	replicas int
	rate     float64
}{
	{w1(), 4, 20},
	{w1x32(), 4, 5},
	{w6(), 4, 7},
	{mixW1W6(), 4, 12},
	{hot(), 8, 45},
}

var reportPolicies = []string{"round_robin", "random", "least_request", "p2c", "prefix_hash", "kv_aware", "cost_model"}

// TestReportFleet prints every policy on every workload: TTFT, the engines'
// hit rate against the oracle's, and the busiest replica's share. It runs
// only when asked for by name, as it takes a while:
//
//	go test ./sim/cluster/ -run TestReportFleet -v
func TestReportFleet(t *testing.T) {
	if f := flag.Lookup("test.run"); f == nil || !strings.Contains(f.Value.String(), "ReportFleet") {
		t.Skip("run with -run TestReportFleet")
	}
	d, warm := span()
	var b strings.Builder
	start := time.Now()
	requests := 0
	for _, pt := range reportPoints {
		runs := runAll(t, Config{
			Replicas: pt.replicas, Engine: defaultEngine(), Workload: pt.wl, Rate: pt.rate,
			Duration: d, WarmUp: warm, Seed: 1,
		}, reportPolicies...)
		fmt.Fprintf(&b, "\n%s, %d replicas, %v req/s, %v (first %v left out)\n", pt.wl.Name(), pt.replicas, pt.rate, d, warm)
		fmt.Fprintf(&b, "%-14s %10s %10s %10s %6s %6s %7s %7s %8s\n",
			"policy", "mean TTFT", "p50 TTFT", "p99 TTFT", "hit", "oracle", "exact", "busiest", "preempt")
		for _, p := range reportPolicies {
			res := runs[p]
			requests += len(res.Requests)
			s := res.Summary
			exact := "-"
			if cacheAwareName(p) {
				exact = fmt.Sprintf("%.3f", s.Accuracy)
			}
			fmt.Fprintf(&b, "%-14s %10v %10v %10v %6.3f %6.3f %7s %7.3f %8d\n", p,
				s.MeanTTFT.Round(time.Millisecond), s.P50TTFT.Round(time.Millisecond), s.P99TTFT.Round(time.Millisecond),
				s.HitRate, s.OracleHitRate, exact, s.BusiestShare, s.Preemptions)
		}
	}
	wall := time.Since(start)
	fmt.Fprintf(&b, "\n%d simulated requests in %v of wall time (two runs at a time): %.0f requests per second\n",
		requests, wall.Round(time.Millisecond), float64(requests)/wall.Seconds())
	t.Log(b.String())
}

func cacheAwareName(p string) bool {
	return p == "prefix_hash" || p == "kv_aware" || p == "cost_model"
}

// BenchmarkRun measures how fast the fleet simulates: one run of cost_model
// on mix at 12 req/s over 4 replicas for a minute of virtual time.
func BenchmarkRun(b *testing.B) {
	cfg := Config{
		Replicas: 4, Engine: defaultEngine(), Policy: "cost_model", Workload: mixW1W6(), Rate: 12,
		Duration: time.Minute, Seed: 1,
	}
	b.ReportAllocs()
	requests := 0
	for b.Loop() {
		res, err := Run(cfg)
		if err != nil {
			b.Fatal(err)
		}
		requests += len(res.Requests)
		Sink = res.Summary
	}
	b.ReportMetric(float64(requests)/b.Elapsed().Seconds(), "requests/s")
}

// Sink keeps benchmark results alive.
var Sink Summary

package harness

import (
	"context"
	"flag"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/inferrail/inferrail/sim"
	"github.com/inferrail/inferrail/sim/workload"
)

// TestMain fails the package when a test leaves a goroutine behind:
// Measure joins every request's. fasthttp keeps a few of its own past a
// server's Shutdown and a client's last request (see sim/server_test.go);
// they exit on their next tick.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.updateServerDate.func1"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*workerPool).Start.func2"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*TCPDialer).tcpAddrsClean"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*HostClient).connsCleaner"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*Client).mCleaner"),
	)
}

func TestSummarize(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	run := &Run{WarmUp: time.Second, Duration: 11 * time.Second, ITL: []time.Duration{ms(10), ms(30)}, Engine: &Counters{Queries: 1000, Hits: 250}}
	add := func(r Record) { run.Records = append(run.Records, r) }
	// Left out: before the warm-up.
	add(Record{Due: ms(500), WarmUp: true, TTFT: ms(9000), E2E: ms(9000), OutputTokens: 2, PromptTokens: 100, Replica: "a"})
	// Within the SLO: TTFT 1 s, TPOT (3 s - 1 s) / 20 = 100 ms.
	add(Record{Class: "x", Due: ms(1000), TTFT: ms(1000), E2E: ms(3000), OutputTokens: 21, PromptTokens: 100, CachedTokens: 50,
		Replica: "a", Predicted: true, PredictedTokens: 50})
	// TTFT over 2 s.
	add(Record{Class: "x", Due: ms(2000), TTFT: ms(2500), E2E: ms(3000), OutputTokens: 2, PromptTokens: 100, CachedTokens: 0,
		Replica: "b", Predicted: true, PredictedTokens: 16})
	// TPOT over 100 ms; the last to end, at 12 s.
	add(Record{Class: "y", Due: ms(4000), TTFT: ms(100), E2E: ms(8000), OutputTokens: 11, PromptTokens: 200, CachedTokens: 100, Replica: "a"})
	// Failed.
	add(Record{Class: "y", Due: ms(5000), Lag: ms(7), Err: "status 503"})

	s := run.Summarize(DefaultSLO())
	if s.Requests != 4 || s.Errors != 1 || s.ErrKinds["status 503"] != 1 {
		t.Fatalf("counts: %+v", s)
	}
	if s.TTFT.P50 != 1 || s.TTFT.Max != 2.5 || s.TTFT.Mean != 1.2 || s.SendLag.Max != 0.007 {
		t.Errorf("TTFT %+v, send lag %+v", s.TTFT, s.SendLag)
	}
	// 1 of 4 within the SLO, over a 10 s window; 3 successes from 1 s to
	// the last end at 12 s.
	if s.Goodput != 0.1 || s.GoodShare != 0.25 || s.Offered != 0.4 || s.Throughput != round(3.0/11) {
		t.Errorf("goodput %v, share %v, offered %v, throughput %v", s.Goodput, s.GoodShare, s.Offered, s.Throughput)
	}
	if s.HitRate != 0.375 || *s.EngineHitRate != 0.25 || s.OracleHitRate != nil {
		t.Errorf("hit %v, engine %v", s.HitRate, s.EngineHitRate)
	}
	p := s.Prediction
	if p == nil || p.Requests != 2 || p.Exact != 0.5 || p.Over != 0.5 || p.MeanError != 8 || p.HitRate != 0.33 {
		t.Errorf("prediction %+v", p)
	}
	if len(s.Shares) != 2 || s.Shares[0] != (Share{"a", round(2.0 / 3)}) || s.BusiestShare != round(2.0/3) {
		t.Errorf("shares %v", s.Shares)
	}
	if s.ITL.Mean != 0.02 {
		t.Errorf("ITL %+v", s.ITL)
	}
	y := run.SummarizeClass(DefaultSLO(), "y")
	if y.Requests != 2 || y.Errors != 1 || y.HitRate != 0.5 || y.EngineHitRate != nil || y.ITL != (Dist{}) {
		t.Errorf("class y: %+v", y)
	}
	if got := strings.Join(run.Classes(), ","); got != ",x,y" {
		t.Errorf("classes %q", got)
	}
	if s.Policies != nil {
		t.Errorf("policies of a run without x-inferrail-policy: %+v", s.Policies)
	}

	// The same requests routed by a split: the first two by cost_model,
	// the others by round_robin; the warm-up's arm does not count.
	run.Records[0].Policy = "p2c"
	for i, p := range []string{"cost_model", "cost_model", "round_robin", "round_robin"} {
		run.Records[i+1].Policy = p
	}
	s = run.Summarize(DefaultSLO())
	want := []PolicySummary{
		{Policy: "cost_model", Requests: 2, TTFT: Dist{Mean: 1.75, P50: 1, P90: 2.5, P99: 2.5, Max: 2.5}, HitRate: 0.25, GoodShare: 0.5},
		{Policy: "round_robin", Requests: 2, Errors: 1, TTFT: Dist{Mean: 0.1, P50: 0.1, P90: 0.1, P99: 0.1, Max: 0.1}, HitRate: 0.5},
	}
	if len(s.Policies) != 2 || s.Policies[0] != want[0] || s.Policies[1] != want[1] {
		t.Errorf("policies %+v, want %+v", s.Policies, want)
	}
	run.Records[3].Policy, run.Records[4].Policy = "cost_model", "cost_model"
	if s = run.Summarize(DefaultSLO()); s.Policies != nil {
		t.Errorf("policies of a run routed by one policy: %+v", s.Policies)
	}
}

// The harness's own precision: against zero-latency simulators at 300
// req/s every request is sent within 3 ms of its schedule at p99. Run by
// name, on a quiet machine:
//
//	go test ./bench/harness/ -run TestSendLagAt300 -v
func TestSendLagAt300(t *testing.T) {
	if f := flag.Lookup("test.run"); f == nil || !strings.Contains(f.Value.String(), "SendLagAt300") {
		t.Skip("run with -run TestSendLagAt300")
	}
	opts := sim.DefaultOptions()
	opts.Port, opts.Engine.Latency.Zero, opts.EnablePromptTokensDetails = 0, true, true
	s, err := sim.Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	w := workload.W6()
	w.PromptTokens, w.OutputTokens = workload.Range{Min: 50, Max: 200}, workload.Range{Min: 8, Max: 32}
	run, err := Measure(context.Background(), Target{URL: s.URL(), Model: opts.Model, Metrics: []string{s.URL() + "/metrics"}},
		Options{Workload: &w, Rate: 300, Duration: 20 * time.Second, WarmUp: 2 * time.Second, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	sum := run.Summarize(DefaultSLO())
	t.Logf("%d requests at 300 req/s: send lag p50 %.3f ms, p99 %.3f ms, max %.3f ms; TTFT p99 %.3f ms; %d errors",
		sum.Requests, sum.SendLag.P50*1000, sum.SendLag.P99*1000, sum.SendLag.Max*1000, sum.TTFT.P99*1000, sum.Errors)
	if sum.Errors > 0 || sum.SendLag.P99 > 0.003 {
		t.Errorf("send lag p99 %.3f ms (want at most 3), %d errors", sum.SendLag.P99*1000, sum.Errors)
	}
}

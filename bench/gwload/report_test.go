package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/inferrail/inferrail/bench/loadgen"
	gwconfig "github.com/inferrail/inferrail/config"
)

func TestRotation(t *testing.T) {
	xs := []string{"direct", "nginx", "gateway"}
	f := func(r int, want ...string) {
		t.Helper()
		if got := rotation(xs, r); !slices.Equal(got, want) {
			t.Errorf("rotation(%d) = %v, want %v", r, got, want)
		}
	}
	f(0, "direct", "nginx", "gateway")
	f(1, "nginx", "gateway", "direct")
	f(2, "gateway", "direct", "nginx")
	f(3, "direct", "nginx", "gateway")
	if xs[0] != "direct" {
		t.Fatal("rotation changed its input")
	}
	// Over as many rounds as targets, each target takes each position once.
	for pos := range xs {
		var seen []string
		for r := range xs {
			seen = append(seen, rotation(xs, r)[pos])
		}
		slices.Sort(seen)
		if !slices.Equal(seen, []string{"direct", "gateway", "nginx"}) {
			t.Fatalf("position %d held %v", pos, seen)
		}
	}
}

// fakeRuns builds one mode's runs from per-round p50/p99 in µs.
func fakeRuns(mode string, p50, p99 map[string][]float64) []*runResult {
	var runs []*runResult
	for _, name := range targetNames {
		for r := range p50[name] {
			runs = append(runs, &runResult{Round: r + 1, Target: name, Mode: mode,
				Latency: loadgen.Summary{P50S: p50[name][r] / 1e6, P99S: p99[name][r] / 1e6}, ProxyCores: 0.1 * float64(r+1)})
		}
	}
	return runs
}

func TestSummarizeAddedLatency(t *testing.T) {
	runs := fakeRuns("unary",
		map[string][]float64{"direct": {200, 210, 190}, "nginx": {220, 240, 200}, "gateway": {230, 230, 215}},
		map[string][]float64{"direct": {800, 900, 700}, "nginx": {1000, 1000, 1000}, "gateway": {1100, 1300, 1000}})
	ms, err := summarize("unary", runs, 3)
	if err != nil {
		t.Fatal(err)
	}
	us := time.Microsecond
	ng, gw := ms.Targets[1], ms.Targets[2]
	// nginx adds 20, 30, 10 at p50 (median 20); the gateway 30, 20, 25 (median 25).
	if !slices.Equal(ng.AddedP50, []time.Duration{20 * us, 30 * us, 10 * us}) || ng.MedAddedP50 != 20*us {
		t.Fatalf("nginx added p50 %v, median %v", ng.AddedP50, ng.MedAddedP50)
	}
	if gw.MedAddedP50 != 25*us || ms.Targets[0].MedP50 != 200*us || gw.MedP50 != 230*us {
		t.Fatalf("gateway: %+v", gw)
	}
	// p99: nginx adds 200, 100, 300 (median 200); the gateway 300, 400, 300 (median 300).
	if ng.MedAddedP99 != 200*us || gw.MedAddedP99 != 300*us {
		t.Fatalf("added p99: nginx %v, gateway %v", ng.MedAddedP99, gw.MedAddedP99)
	}
	if !ms.RatioP50Defined || ms.RatioP50 != 1.25 || !ms.RatioP99Defined || ms.RatioP99 != 1.5 {
		t.Fatalf("ratios %v %v / %v %v", ms.RatioP50, ms.RatioP50Defined, ms.RatioP99, ms.RatioP99Defined)
	}
	if !slices.Equal(ms.RoundRatiosP50, []string{"1.50×", "0.67×", "2.50×"}) {
		t.Fatalf("round ratios %v", ms.RoundRatiosP50)
	}
	if ng.MedProxyCores != 0.2 {
		t.Fatalf("median proxy cores %v", ng.MedProxyCores)
	}

	if _, err := summarize("unary", runs[1:], 3); err == nil {
		t.Fatal("a missing run: no error")
	}
	if _, err := summarize("unary", runs, 2); err == nil {
		t.Fatal("a run past the last round: no error")
	}
}

func TestEvaluate(t *testing.T) {
	f := func(gwP50, gwP99 float64, wantFailures int) {
		t.Helper()
		r := &report{Runs: fakeRuns("unary",
			map[string][]float64{"direct": {200}, "nginx": {220}, "gateway": {gwP50}},
			map[string][]float64{"direct": {800}, "nginx": {900}, "gateway": {gwP99}}),
			Decision: &decision{Bench: parseBench(pickOutput)}}
		r.evaluate()
		// The decision benchmarks always miss one here: 64 replicas' p99 is 32 µs.
		if got := len(r.Failures) - 1; got != wantFailures {
			t.Errorf("gateway p50 %v p99 %v: %d failures, want %d: %q", gwP50, gwP99, got, wantFailures, r.Failures)
		}
	}
	f(220, 920, 0) // 1.0× and 1.2×: met
	f(221, 920, 1) // p50 over
	f(220, 921, 1) // p99 over
	f(300, 2000, 2)
	f(190, 700, 0) // faster than direct
}

func TestEvaluateUndefinedRatio(t *testing.T) {
	// nginx adds nothing at p99: the ratio means nothing, and the gateway
	// passes only by adding no more.
	f := func(gwP99 float64, pass bool) {
		t.Helper()
		r := &report{Runs: fakeRuns("stream",
			map[string][]float64{"direct": {200}, "nginx": {210}, "gateway": {205}},
			map[string][]float64{"direct": {800}, "nginx": {790}, "gateway": {gwP99}})}
		r.evaluate()
		var c *check
		for i := range r.Checks {
			if strings.Contains(r.Checks[i].Name, "p99") {
				c = &r.Checks[i]
			}
		}
		if c == nil || c.Pass != pass || !strings.HasPrefix(c.Value, "n/a") {
			t.Errorf("gateway p99 %v: %+v, want pass %v", gwP99, c, pass)
		}
	}
	f(780, true)
	f(795, false)
}

func TestEvaluateErrors(t *testing.T) {
	runs := fakeRuns("unary",
		map[string][]float64{"direct": {200}, "nginx": {220}, "gateway": {220}},
		map[string][]float64{"direct": {800}, "nginx": {900}, "gateway": {900}})
	runs[2].WarmupErrors = 1
	r := &report{Runs: runs}
	r.evaluate()
	if r.Checks[0].Pass || !strings.Contains(r.Failures[0], "errors") {
		t.Fatalf("a warm-up error passed: %+v", r.Checks[0])
	}
}

// TestGatewayConfigLoads: the config gwload writes is one the gateway
// accepts, with the simulators as least_request replicas.
func TestGatewayConfigLoads(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gateway.yaml")
	sims := []string{"http://127.0.0.1:40001", "http://127.0.0.1:40002", "http://127.0.0.1:40003"}
	if err := os.WriteFile(path, []byte(gatewayConfig("127.0.0.1:40000", "inferrail/sim-8b", sims)), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := gwconfig.Load(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Server.Listen != "127.0.0.1:40000" || c.Routing.DefaultPolicy != "least_request" || len(c.Replicas) != 3 ||
		len(c.Models) != 1 || c.Models[0].Name != "inferrail/sim-8b" {
		t.Fatalf("loaded %+v", c)
	}
	for i, r := range c.Replicas {
		if r.URL != sims[i] || !slices.Equal(r.Models, []string{"inferrail/sim-8b"}) {
			t.Fatalf("replica %d: %+v", i, r)
		}
	}
}

func TestLastLines(t *testing.T) {
	if got := lastLines("a\nb\nc\nd\n", 2); got != "c\nd\n" {
		t.Fatalf("lastLines = %q", got)
	}
	if got := lastLines("a", 3); got != "a\n" {
		t.Fatalf("lastLines = %q", got)
	}
}

func TestRedoRound(t *testing.T) {
	runs := []*runResult{{OtherCores: 0.1}, {OtherCores: 0.45}, {OtherCores: 0.2}}
	f := func(maxOther float64, left int, timeLeft time.Duration, want bool) {
		t.Helper()
		worst, again := redoRound(runs, maxOther, left, timeLeft, 30*time.Second)
		if worst != 0.45 || again != want {
			t.Errorf("redoRound(max %v, %d left, %v) = %v, %v; want 0.45, %v", maxOther, left, timeLeft, worst, again, want)
		}
	}
	f(0.3, 3, 2*time.Minute, true)
	f(0.5, 3, 2*time.Minute, false)  // quiet enough
	f(0.3, 0, 2*time.Minute, false)  // no redos left
	f(0.3, 3, 50*time.Second, false) // no time for it
}

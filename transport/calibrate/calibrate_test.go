package calibrate_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/inferrail/inferrail/model/cost"
	"github.com/inferrail/inferrail/model/token"
	"github.com/inferrail/inferrail/sim"
	"github.com/inferrail/inferrail/sim/engine"
	"github.com/inferrail/inferrail/transport/calibrate"
)

// startSim runs a simulator with latency l on a free port for the test.
func startSim(t testing.TB, l engine.Latency) *sim.Server {
	t.Helper()
	opts := sim.DefaultOptions()
	opts.Port = 0
	opts.Engine.Latency = l
	s, err := sim.Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// testPlan is small enough for a few seconds of simulated prefill: cached
// sizes that are not whole blocks (the engine caches 992 and 2992 tokens, and
// the fit must use those), and a compute size past the 2048-token step
// budget, which the engine prefills in two chunks.
var testPlan = cost.Plan{Cached: []int{0, 1000, 3000}, Compute: []int{64, 512, 2500}, Repeats: 1}

// TestCalibrateRecoversSimulator is the acceptance test of inferrail
// calibrate: against simulators with two different latency models, the fit
// recovers a, b and d each within 5%.
func TestCalibrateRecoversSimulator(t *testing.T) {
	for _, l := range []engine.Latency{
		{PrefillToken: 25 * time.Microsecond, PrefillPair: 3.3, PrefillFixed: 5 * time.Millisecond,
			DecodeToken: 20 * time.Millisecond, DecodeSeq: 100 * time.Microsecond},
		{PrefillToken: 60 * time.Microsecond, PrefillPair: 1.2, PrefillFixed: 12 * time.Millisecond,
			DecodeToken: 30 * time.Millisecond, DecodeSeq: 200 * time.Microsecond},
	} {
		t.Run(fmt.Sprintf("a=%v,b=%gns,d=%v", l.PrefillToken, l.PrefillPair, l.PrefillFixed), func(t *testing.T) {
			s := startSim(t, l)
			start := time.Now()
			res, err := calibrate.Run(context.Background(), calibrate.Options{URL: s.URL(), Seed: 7, Probes: testPlan.Probes()})
			if err != nil {
				t.Fatal(err)
			}
			if res.Model != "inferrail/sim-8b" || len(res.Probes) != 9 {
				t.Fatalf("model %q, %d probes", res.Model, len(res.Probes))
			}
			samples := res.Samples()
			for _, m := range res.Probes {
				p := m.Probe
				// The simulator's tokenizer makes one token per word, and
				// caches whole blocks of 16 only.
				if m.PromptTokens != p.Cached+p.Compute || m.Cached != p.Cached/16*16 {
					t.Fatalf("probe %+v: %d prompt tokens, %d cached", p, m.PromptTokens, m.Cached)
				}
				if want := l.Prefill(m.Computed(), m.Cached); m.TTFT < want-time.Microsecond || m.TTFT > want+time.Microsecond {
					t.Fatalf("probe %+v: TTFT %v, the simulator's P is %v", p, m.TTFT, want)
				}
				if m.HTTP < m.TTFT {
					t.Fatalf("probe %+v: HTTP %v under TTFT %v", p, m.HTTP, m.TTFT)
				}
			}
			fit, err := cost.Fit(samples)
			if err != nil {
				t.Fatal(err)
			}
			want := cost.Model{
				PrefillTokenSecs: l.PrefillToken.Seconds(),
				PrefillPairSecs:  l.PrefillPair * 1e-9,
				PrefillFixedSecs: l.PrefillFixed.Seconds(),
			}
			t.Logf("%d probes in %v, rms error %.2g", len(res.Probes), time.Since(start).Round(time.Millisecond),
				cost.RelError(fit, samples))
			for _, p := range []struct {
				name      string
				got, want float64
			}{
				{"a", fit.PrefillTokenSecs, want.PrefillTokenSecs},
				{"b", fit.PrefillPairSecs, want.PrefillPairSecs},
				{"d", fit.PrefillFixedSecs, want.PrefillFixedSecs},
			} {
				t.Logf("%s = %.9g, truth %.9g (%+.2g%%)", p.name, p.got, p.want, 100*(p.got/p.want-1))
				if math.Abs(p.got-p.want) > 0.05*p.want {
					t.Errorf("%s = %g, want %g within 5%%", p.name, p.got, p.want)
				}
			}
		})
	}
}

// TestCalibrateFreshPrompts: a run's prompts come from its seed, so a new
// seed finds nothing cached and a seed run again finds its prompts cached.
func TestCalibrateFreshPrompts(t *testing.T) {
	s := startSim(t, engine.Latency{PrefillToken: 10 * time.Microsecond, PrefillFixed: time.Millisecond})
	probes := []cost.Probe{{Cached: 0, Compute: 64}}
	for _, run := range []struct {
		seed   uint64
		cached int
	}{{1, 0}, {2, 0}, {1, 48}} { // 48: the whole blocks of 64 tokens short of the last one
		res, err := calibrate.Run(context.Background(), calibrate.Options{URL: s.URL(), Seed: run.seed, Probes: probes})
		if err != nil {
			t.Fatal(err)
		}
		if m := res.Probes[0]; m.Cached != run.cached || m.PromptTokens != 64 {
			t.Fatalf("seed %d: %+v, want %d cached", run.seed, m, run.cached)
		}
	}
	if n := (token.Sim{}).Count("abc def ghi "); n != 3 {
		t.Fatalf("three words are %d tokens", n)
	}
}

// fakeEngine answers completions and serves a vLLM page whose counters a
// test scripts: each completion adds perRequest to the TTFT count.
type fakeEngine struct {
	mu         sync.Mutex
	count, sum float64
	queries    float64
	perRequest float64
}

func (f *fakeEngine) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch r.URL.Path {
	case "/v1/models":
		fmt.Fprint(w, `{"object":"list","data":[{"id":"m","object":"model"}]}`)
	case "/v1/completions":
		f.count += f.perRequest
		f.sum += 0.01 * f.perRequest
		f.queries += 10
		fmt.Fprint(w, `{"choices":[{"text":"x"}],"usage":{"prompt_tokens":10,"completion_tokens":1,"total_tokens":11}}`)
	case "/metrics":
		fmt.Fprintf(w, "vllm:num_requests_running 0.0\nvllm:num_requests_waiting 0.0\nvllm:kv_cache_usage_perc 0.0\n"+
			"vllm:prefix_cache_queries_total %g\nvllm:prefix_cache_hits_total 0.0\n"+
			"vllm:time_to_first_token_seconds_count %g\nvllm:time_to_first_token_seconds_sum %g\n", f.queries, f.count, f.sum)
	default:
		http.NotFound(w, r)
	}
}

// TestCalibrateNotIdle: requests of someone else's that show in the
// engine's counters fail the run rather than skew the fit.
func TestCalibrateNotIdle(t *testing.T) {
	f := &fakeEngine{perRequest: 2}
	srv := httptest.NewServer(f)
	defer srv.Close()
	_, err := calibrate.Run(context.Background(), calibrate.Options{URL: srv.URL, Probes: []cost.Probe{{Cached: 0, Compute: 10}}})
	if !errors.Is(err, calibrate.ErrNotIdle) {
		t.Fatalf("err = %v, want ErrNotIdle", err)
	}

	f.mu.Lock()
	f.perRequest = 1
	f.mu.Unlock()
	res, err := calibrate.Run(context.Background(), calibrate.Options{URL: srv.URL, Seed: 3, Probes: []cost.Probe{{Cached: 0, Compute: 10}}})
	if err != nil || res.Model != "m" || len(res.Probes) != 1 || res.Probes[0].TTFT != 10*time.Millisecond ||
		res.Probes[0].Computed() != 10 {
		t.Fatalf("Run = %+v, %v", res, err)
	}
}

// TestCalibrateBadEngine: an engine that is down, not vLLM or refuses the
// prompt fails the run with what went wrong.
func TestCalibrateBadEngine(t *testing.T) {
	f := func(url, want string) {
		t.Helper()
		_, err := calibrate.Run(context.Background(), calibrate.Options{URL: url, Probes: []cost.Probe{{Compute: 10}},
			SettleTimeout: time.Second})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("Run(%s) = %v, want an error containing %q", url, err, want)
		}
	}
	f("ftp://x", "want http or https")
	f("http://127.0.0.1:1", "connection refused")
	sglang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/metrics" {
			fmt.Fprint(w, "sglang:num_running_reqs 0\nsglang:num_queue_reqs 0\nsglang:token_usage 0\n")
			return
		}
		fmt.Fprint(w, `{"data":[{"id":"m"}]}`)
	}))
	defer sglang.Close()
	f(sglang.URL, "calibrate reads vLLM's metrics")
	refuses := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"error":{"message":"too long"}}`, http.StatusBadRequest)
	}))
	defer refuses.Close()
	f(refuses.URL, "status 400")
}

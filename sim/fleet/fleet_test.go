package fleet

import (
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/inferrail/inferrail/model/policy"
	"github.com/inferrail/inferrail/model/prefix"
	"github.com/inferrail/inferrail/sim"
	"github.com/inferrail/inferrail/sim/engine"
)

// defaultEngine is the simulator's default engine: an 8B model on one 24 GB
// GPU, 4096 blocks of 16 tokens, 2048 tokens per step.
func defaultEngine() engine.Config { return sim.DefaultOptions().Engine }

func mustRun(t testing.TB, cfg Config) Result {
	t.Helper()
	res, err := Run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// runWith runs cfg with onPick watching every decision.
func runWith(t testing.TB, cfg Config, onPick func(r *run, req *policy.Request, cands []policy.Candidate, winner int)) Result {
	t.Helper()
	if err := cfg.validate(); err != nil {
		t.Fatal(err)
	}
	r, err := newRun(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	r.onPick = onPick
	if err := r.loop(); err != nil {
		t.Fatal(err)
	}
	return r.result()
}

func TestRunDeterministic(t *testing.T) {
	for _, pol := range []string{"p2c", "cost_model"} {
		t.Run(pol, func(t *testing.T) {
			t.Parallel()
			cfg := Config{
				Replicas: 3, Engine: defaultEngine(), Policy: pol,
				Workload: MixW1W6(), Rate: 8, Duration: 20 * time.Second, WarmUp: 5 * time.Second, Seed: 7,
			}
			a, b := mustRun(t, cfg), mustRun(t, cfg)
			if !reflect.DeepEqual(a, b) {
				t.Fatalf("same seed, different results:\n%v\n%v", a.Summary, b.Summary)
			}
			if len(a.Requests) < 100 || a.Summary.CachedTokens == 0 {
				t.Fatalf("run too small to tell: %v", a.Summary)
			}
			cfg.Seed = 8
			c := mustRun(t, cfg)
			if reflect.DeepEqual(a.Requests, c.Requests) || a.Summary.P99TTFT == c.Summary.P99TTFT {
				t.Fatalf("seeds 7 and 8 gave the same run: %v", c.Summary)
			}
		})
	}
}

func TestConfigErrorsAtOnce(t *testing.T) {
	_, err := Run(Config{Policy: "nope", Rate: -1, WarmUp: -time.Second, MaxConcurrency: -1})
	if err == nil {
		t.Fatal("Run accepted an empty config")
	}
	for _, want := range []string{"replicas 0", "workload: not set", "rate -1", "duration 0s, requests 0",
		"warm-up -1s", "max concurrency -1", "--block-size", `unknown policy "nope"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q:\n%v", want, err)
		}
	}
	w := W1()
	w.Prompts, w.QuestionTokens = 0, Range{10, 5}
	_, err = Run(Config{Replicas: 1, Engine: defaultEngine(), Policy: "random", Workload: w, Rate: 1, Requests: 1})
	for _, want := range []string{"W1: prompts 0", "W1: question tokens: range [10, 5]"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q: %v", want, err)
		}
	}
	small := defaultEngine()
	small.MaxModelLen = 1024
	small.NumBlocks = 64
	_, err = Run(Config{Replicas: 1, Engine: small, Policy: "random", Workload: W6(), Rate: 1, Requests: 50})
	if err == nil || !strings.Contains(err.Error(), "max_model_len") {
		t.Errorf("a prompt longer than max_model_len: %v", err)
	}
}

// The policy sees each replica as the gateway's routing actor would show
// it: its own counts of requests in flight and waiting for a first token,
// the stable key of its id, the last scrape of the engine, and the
// replica's estimate, whose predicted cache is what the engine actually
// holds.
func TestCandidatesAreTheGatewaysView(t *testing.T) {
	cases := []struct {
		name     string
		wl       Workload
		rate     float64
		pressure bool // the working set overflows a replica's cache
	}{
		{"W1", W1(), 20, false},
		{"mix", MixW1W6(), 10, false},
		{"W1x32", w1x32(), 5, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := Config{
				Replicas: 4, Engine: defaultEngine(), Policy: "cost_model",
				Workload: tc.wl, Rate: tc.rate, Duration: 40 * time.Second, Seed: 3,
			}
			var picks, cands, quiet, quietExact, exact int
			res := runWith(t, cfg, func(r *run, req *policy.Request, cs []policy.Candidate, w int) {
				picks++
				inFlight := make([]int, len(r.reps))
				pending := make([]int, len(r.reps))
				for i := range r.recs {
					rec := &r.recs[i]
					if rec.Replica < 0 {
						continue
					}
					if rec.Finished == 0 {
						inFlight[rec.Replica]++
					}
					if rec.FirstToken == 0 {
						pending[rec.Replica]++
					}
				}
				for _, c := range cs {
					p := r.reps[c.Replica]
					if c.Key != policy.ReplicaKey(p.id) || c.Key == 0 {
						t.Fatalf("replica %s: key %#x", p.id, c.Key)
					}
					if c.InFlight != inFlight[c.Replica] || c.Pending != pending[c.Replica] {
						t.Fatalf("replica %s at %v: in flight %d pending %d, records say %d and %d",
							p.id, r.now, c.InFlight, c.Pending, inFlight[c.Replica], pending[c.Replica])
					}
					if !c.Fresh || r.now-p.seenAt > DefaultScrapeInterval || c.KVUsage < 0 || c.KVUsage > 1 {
						t.Fatalf("replica %s at %v: load from %v, fresh %v, kv %v", p.id, r.now, p.seenAt, c.Fresh, c.KVUsage)
					}
					if c.Pending == 0 && c.QueuedPrefill != 0 {
						t.Fatalf("replica %s: %v queued with nothing waiting", p.id, c.QueuedPrefill)
					}
					actual := p.eng.Cached(req.Blocks, req.PromptTokens)
					cands++
					if c.CachedTokens == actual {
						exact++
					}
					// With nothing pending every routed prompt has been
					// computed, so the index should hold what the engine
					// holds; with prompts pending the index runs ahead.
					if c.Pending == 0 {
						quiet++
						if c.CachedTokens == actual {
							quietExact++
						}
					}
				}
			})
			s := res.Summary
			t.Logf("%s: %d picks; winner's prediction exact %.4f (over %.4f, under %.4f); every candidate exact %.4f; "+
				"candidates with nothing pending exact %.4f of %d; hit %.3f predicted %.3f",
				tc.name, picks, s.Accuracy, s.Over, s.Under, float64(exact)/float64(cands),
				float64(quietExact)/float64(quiet), quiet, s.HitRate, s.PredictedHitRate)
			if picks != len(res.Requests) {
				t.Fatalf("%d picks for %d requests", picks, len(res.Requests))
			}
			if tc.pressure {
				return // reported, not asserted: LRU order differs from the engine's under eviction
			}
			if s.Accuracy < 0.97 {
				t.Errorf("winner's predicted cache exact on %.4f of requests, want at least 0.97", s.Accuracy)
			}
			if quiet < 100 || float64(quietExact)/float64(quiet) < 0.97 {
				t.Errorf("quiet candidates' predicted cache exact on %d of %d, want at least 0.97", quietExact, quiet)
			}
		})
	}
}

// The baselines get what the gateway gives them: counts only, no estimate,
// and nothing is recorded in the shadow state.
func TestBaselinesGetCountsOnly(t *testing.T) {
	cfg := Config{Replicas: 3, Engine: defaultEngine(), Policy: "least_request", Workload: W1(), Rate: 10, Duration: 10 * time.Second, Seed: 1}
	var r0 *run
	res := runWith(t, cfg, func(r *run, _ *policy.Request, cs []policy.Candidate, _ int) {
		r0 = r
		for _, c := range cs {
			if c.Key != 0 || c.CachedTokens != 0 || c.QueuedPrefill != 0 || c.Running != 0 || c.Fresh {
				t.Fatalf("baseline candidate with estimate fields: %+v", c)
			}
		}
	})
	for _, p := range r0.reps {
		if p.est.Index.Len() != 0 || p.est.Queue.Waiting() != 0 {
			t.Fatalf("replica %s: shadow state recorded for a baseline", p.id)
		}
	}
	if res.Summary.PredictedHitRate != 0 || res.Summary.HitRate < 0.5 {
		t.Fatalf("baseline summary: %v", res.Summary)
	}
}

func TestMaxConcurrencyCaps(t *testing.T) {
	const limit = 20
	cfg := Config{
		Replicas: 2, Engine: defaultEngine(), Policy: "cost_model", MaxConcurrency: limit,
		Workload: W6(), Rate: 20, Duration: 20 * time.Second, Seed: 1,
	}
	res := runWith(t, cfg, func(r *run, _ *policy.Request, cs []policy.Candidate, _ int) {
		for _, c := range cs {
			if c.InFlight >= limit {
				t.Fatalf("offered a full replica: %+v", c)
			}
		}
	})
	s := res.Summary
	if s.Rejected == 0 || s.Rejected == s.Requests {
		t.Fatalf("an overloaded capped fleet: %d of %d rejected", s.Rejected, s.Requests)
	}
	for _, rec := range res.Requests {
		if rec.Rejected != (rec.Replica < 0) || rec.Rejected && (rec.FirstToken != 0 || rec.Finished != 0) {
			t.Fatalf("inconsistent record %+v", rec)
		}
	}
	t.Logf("cap %d on 2 replicas at 20 req/s of W6: %v", limit, s)
}

// A run bounded by a request count routes exactly that many and finishes
// every one, also on engines that take no time.
func TestRunFinishesEveryRequest(t *testing.T) {
	for _, zero := range []bool{false, true} {
		eng := defaultEngine()
		eng.Latency.Zero = zero
		res := mustRun(t, Config{Replicas: 2, Engine: eng, Policy: "kv_aware", Workload: MixW1W6(), Rate: 10, Requests: 300, Seed: 4})
		if len(res.Requests) != 300 || res.Summary.Requests != 300 {
			t.Fatalf("zero latency %v: %d requests, summary of %d; want 300", zero, len(res.Requests), res.Summary.Requests)
		}
		for i, rec := range res.Requests {
			if rec.Finished < rec.FirstToken || rec.FirstToken < rec.Arrival || rec.OutputTokens < 50 ||
				rec.Replica < 0 || !zero && rec.TTFT() <= 0 {
				t.Fatalf("zero latency %v: request %d did not run through: %+v", zero, i, rec)
			}
		}
		if zero && res.Summary.MaxTTFT != 0 {
			t.Fatalf("zero latency: max TTFT %v", res.Summary.MaxTTFT)
		}
		if res.End < res.Requests[299].Arrival {
			t.Fatalf("run ended at %v, before the last arrival", res.End)
		}
	}
}

// w1x32 is W1 over 32 system prompts, as in the reference sweep: 10,000
// blocks of system prompts, more than one replica's 4096 but fewer than
// four replicas hold.
func w1x32() Shared {
	w := W1()
	w.Label, w.Prompts = "W1x32", 32
	return w
}

func TestWorkloadShapes(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	count := func(w Workload, rate float64, n int) (reqs []Request) {
		g := w.Start(rng, rate)
		for range n {
			reqs = append(reqs, g.Next())
		}
		return reqs
	}

	// Poisson arrivals at the rate, in order.
	reqs := count(W6(), 50, 5000)
	for i := 1; i < len(reqs); i++ {
		if reqs[i].At < reqs[i-1].At {
			t.Fatal("arrivals out of order")
		}
	}
	if got := float64(len(reqs)) / reqs[len(reqs)-1].At.Seconds(); math.Abs(got-50) > 3 {
		t.Errorf("W6 arrives at %.1f req/s, want 50", got)
	}
	for _, r := range reqs {
		if len(r.Prompt) < 500 || len(r.Prompt) > 4000 || len(r.Output) < 50 || len(r.Output) > 300 || r.Class != "W6" {
			t.Fatalf("W6 request out of shape: %d prompt, %d output, class %q", len(r.Prompt), len(r.Output), r.Class)
		}
	}

	// W1: each prompt starts with one of 4 system prompts.
	systems := map[uint32]int{}
	for _, r := range count(W1(), 10, 2000) {
		if n := len(r.Prompt); n < 2050 || n > 8500 {
			t.Fatalf("W1 prompt of %d tokens", n)
		}
		systems[r.Prompt[0]]++
	}
	if len(systems) != 4 {
		t.Errorf("W1 used %d system prompts, want 4", len(systems))
	}
	for first, n := range systems {
		if n < 400 || n > 600 {
			t.Errorf("W1 system prompt %d drawn %d times of 2000, want about 500", first, n)
		}
	}

	// hot: the first system prompt takes k^-1.1 / sum of the 16 weights,
	// about 0.33.
	byFirst := map[uint32]int{}
	hot := count(Hot(), 10, 6000)
	for _, r := range hot {
		byFirst[r.Prompt[0]]++
	}
	top := 0
	for _, n := range byFirst {
		top = max(top, n)
	}
	want := 0.0
	for k := 1; k <= 16; k++ {
		want += math.Pow(float64(k), -1.1)
	}
	want = 1 / want
	if len(byFirst) != 16 || math.Abs(float64(top)/6000-want) > 0.03 {
		t.Errorf("hot: %d prompts, top share %.3f, want 16 and %.3f", len(byFirst), float64(top)/6000, want)
	}

	// mix: half each.
	classes := map[string]int{}
	for _, r := range count(MixW1W6(), 10, 4000) {
		classes[r.Class]++
	}
	if len(classes) != 2 || math.Abs(float64(classes["W1"])/4000-0.5) > 0.03 {
		t.Errorf("mix classes %v, want W1 and W6 half each", classes)
	}
}

// The oracle counts, for each prompt, the full blocks it shares with any
// earlier prompt, one token short of the whole prompt.
func TestOracle(t *testing.T) {
	r := &run{bs: 16, oracle: make(map[prefix.Hash]struct{})}
	root := prefix.Root("m", "", "")
	var h prefix.Hasher
	seq := func(from, n int) []uint32 {
		s := make([]uint32, n)
		for i := range s {
			s[i] = uint32(from + i)
		}
		return s
	}
	f := func(prompt []uint32, want int) {
		t.Helper()
		if got := r.shared(h.Chain(nil, root, prompt, 16), len(prompt)); got != want {
			t.Errorf("shared = %d, want %d", got, want)
		}
	}
	f(seq(0, 100), 0)                              // first: nothing earlier
	f(seq(0, 100), 96)                             // the same 6 full blocks
	f(seq(0, 64), 48)                              // block-aligned: the last block recomputes
	f(append(seq(0, 40), seq(900, 60)...), 32)     // shares 2 blocks, then diverges
	f(append(seq(0, 40), seq(900, 60)...), 96)     // now seen whole
	f(append(seq(1, 40), seq(900, 60)...), 0)      // a different first block shares nothing
	f(seq(0, 10), 0)                               // no full block
	f(append(seq(0, 100), seq(5000, 33)...), 96)   // extends the first prompt
	f(append(seq(0, 100), seq(5000, 100)...), 128) // and the extension
}

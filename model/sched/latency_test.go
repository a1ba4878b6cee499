package sched

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/inferrail/inferrail/model/cost"
	"github.com/inferrail/inferrail/model/policy"
	"github.com/inferrail/inferrail/model/prefix"
)

// produce runs predicted-latency-producer with params over c.
func produce(t *testing.T, params map[string]any, c *Cycle) {
	t.Helper()
	mustDecode(t, &predictedLatencyProducer, params).(Producer).Produce(c)
}

// TestPredictedLatency: the producer's predictions are cost_model's TTFT
// estimate and its TPOT estimate for the request's place, judged against
// the request's SLO as llm-d judges its sidecar's.
func TestPredictedLatency(t *testing.T) {
	m := cost.Default()
	req := &policy.Request{PromptTokens: 4000, SLO: policy.SLO{TTFT: 500 * time.Millisecond, TPOT: 25 * time.Millisecond}}
	cands := []policy.Candidate{
		{Replica: 0},
		{Replica: 1, CachedTokens: 3000, Running: 40, Pending: 2, QueuedPrefill: 100 * time.Millisecond},
		{Replica: 2, Running: 60, QueuedPrefill: time.Second},
		{Replica: 3, Running: 60, Labels: map[string]string{"role": "prefill"}},
	}
	c := cycle(req, cands...)
	produce(t, map[string]any{"streamingMode": true, "endpointRoleLabel": "role"}, c)
	if len(c.Latency) != len(cands) {
		t.Fatalf("%d predictions for %d candidates", len(c.Latency), len(cands))
	}
	for i, cd := range cands {
		p := c.Latency[i]
		ttft := m.Estimate(req.PromptTokens, cd.CachedTokens, cd.QueuedPrefill, cd.Running).Total()
		tpot := m.Step(cd.Running + cd.Pending + 1)
		if p.TTFT != ttft || p.TPOT != tpot {
			t.Errorf("candidate %d: predicted %v, %v; want cost_model's %v, %v", i, p.TTFT, p.TPOT, ttft, tpot)
		}
		if p.TTFTHeadroom != req.SLO.TTFT-ttft || p.TTFTValid != (ttft < req.SLO.TTFT) {
			t.Errorf("candidate %d: TTFT headroom %v valid %v", i, p.TTFTHeadroom, p.TTFTValid)
		}
	}
	// 0: idle, both within. 1: 42 decoding, 24.2ms < 25ms. 2: 61 decoding,
	// 26ms: TPOT missed, and a 1s queue misses TTFT. 3: a prefill replica's
	// TPOT is not judged.
	for i, want := range []bool{true, true, false, true} {
		if got := c.Latency[i].Valid(); got != want {
			t.Errorf("candidate %d: valid %v, want %v (%+v)", i, got, want, c.Latency[i])
		}
	}
	if p := c.Latency[3]; !p.TPOTValid || p.TPOTHeadroom != 0 {
		t.Errorf("prefill replica: %+v", p)
	}
	if p := c.Latency[2]; p.TPOTHeadroom != 25*time.Millisecond-p.TPOT || p.TPOTValid {
		t.Errorf("candidate 2: %+v", p)
	}

	// Outside streaming mode TPOT is always within; sloBufferFactor
	// scales the TPOT SLO.
	c = cycle(req, cands...)
	produce(t, nil, c)
	if p := c.Latency[2]; !p.TPOTValid || p.TPOTHeadroom != 0 {
		t.Errorf("not streaming: %+v", p)
	}
	c = cycle(req, cands...)
	produce(t, map[string]any{"streamingMode": true, "sloBufferFactor": 1.1}, c)
	if p := c.Latency[2]; !p.TPOTValid {
		t.Errorf("buffer 1.1 (27.5ms) should take 26ms: %+v", p)
	}
	// No SLO: TTFT headroom is negative and never valid.
	c = cycle(&policy.Request{PromptTokens: 10}, cands[0])
	produce(t, nil, c)
	if p := c.Latency[0]; p.TTFTValid || p.TTFTHeadroom >= 0 {
		t.Errorf("no SLO: %+v", p)
	}
	// predictInProduce false predicts nothing.
	c = cycle(req, cands...)
	produce(t, map[string]any{"predictInProduce": false}, c)
	if c.Latency != nil {
		t.Errorf("predictInProduce false predicted %v", c.Latency)
	}
	// A replica's own fitted model prices it.
	own := cost.Default()
	own.DecodeTokenSecs = 0.05
	c = cycle(req, policy.Candidate{Model: &own})
	produce(t, map[string]any{"streamingMode": true}, c)
	if p := c.Latency[0]; p.TPOT != 50*time.Millisecond || p.TPOTValid {
		t.Errorf("own model: %+v", p)
	}
}

// predicted is a cycle whose candidates have the given predictions.
func predicted(preds ...Prediction) *Cycle {
	cands := make([]policy.Candidate, len(preds))
	for i := range cands {
		cands[i] = policy.Candidate{Replica: i, InFlight: 1, Running: 1, Fresh: true, KVUsage: 0.5}
	}
	c := cycle(&policy.Request{SLO: policy.SLO{TTFT: time.Second}}, cands...)
	c.Latency = preds
	return c
}

// pred is a prediction with TTFT and TPOT headroom in ms, valid where
// strictly positive.
func pred(ttftMs, tpotMs int) Prediction {
	h, q := time.Duration(ttftMs)*time.Millisecond, time.Duration(tpotMs)*time.Millisecond
	return Prediction{TTFTHeadroom: h, TPOTHeadroom: q, TTFTValid: h > 0, TPOTValid: q > 0}
}

func TestSLOHeadroomTierFilter(t *testing.T) {
	f := func(params map[string]any, c *Cycle, want []int) {
		t.Helper()
		if got := filtered(t, &sloHeadroomTierFilter, params, c); !slices.Equal(got, want) {
			t.Errorf("%v keeps %v, want %v", params, got, want)
		}
	}
	mixed := predicted(pred(10, 0), pred(-1, 5), pred(5, 5), pred(5, -5))
	f(nil, mixed, []int{0, 2}) // headroom 0 is positive
	f(map[string]any{"epsilonExploreNeg": 1.0}, mixed, []int{1, 3})
	f(map[string]any{"epsilonExploreNeg": 1.0}, predicted(pred(1, 1), pred(2, 2)), []int{0, 1}) // one tier
	f(nil, predicted(pred(-1, 1), pred(-2, 2)), []int{0, 1})
	none := cycle(nil, policy.Candidate{}, policy.Candidate{Replica: 1})
	f(nil, none, []int{0, 1}) // no predictions
	// The exploration draws from the cycle's source: about 1% of the time.
	neg := 0
	for seed := range uint64(4000) {
		c := predicted(pred(10, 0), pred(-1, 5))
		c.Rng = rand.New(rand.NewPCG(seed, 9))
		if got := filtered(t, &sloHeadroomTierFilter, nil, c); got[0] == 1 {
			neg++
		}
	}
	if neg < 15 || neg > 70 {
		t.Errorf("explored the negative tier %d times in 4000, want about 40", neg)
	}
}

func TestLatencyScorer(t *testing.T) {
	f := func(params map[string]any, c *Cycle, want []float64) {
		t.Helper()
		got := scored(t, &latencyScorer, params, c)
		for k := range want {
			if d := got[k] - want[k]; d > 1e-12 || d < -1e-12 {
				t.Errorf("%v scores %v, want %v", params, got, want)
				return
			}
		}
	}
	lv := func(n int) float64 { return float64(n) / 101 }
	// Positive only: the negative one scores 0. TTFT headroom 100, 300
	// and 500ms normalize to 0, 0.5, 1; TPOT all 0 drops out. "least"
	// prefers the one closest to its SLO.
	c := predicted(pred(100, 0), pred(300, 0), pred(500, 0), pred(-5, 0))
	f(nil, c, []float64{lv(101), lv(51), lv(1), 0})
	f(map[string]any{"headroomSelectionStrategy": "most"}, c, []float64{lv(1), lv(51), lv(101), 0})
	// Both dimensions vary: 0.8·TTFT + 0.2·TPOT.
	c = predicted(pred(100, 10), pred(500, 20))
	f(nil, c, []float64{lv(101), lv(1)})
	c = predicted(pred(100, 20), pred(500, 10))
	f(nil, c, []float64{lv(81), lv(20)}) // int(100·(1−0.8)) is 19, as in llm-d
	// All negative: the idle ones only, closest to the SLO first even
	// under "most".
	c = predicted(pred(-100, 0), pred(-300, 0), pred(-500, 0))
	c.Cands[1].InFlight, c.Cands[2].InFlight = 0, 0
	f(map[string]any{"headroomSelectionStrategy": "most"}, c, []float64{0, lv(101), lv(1)})
	// None idle: only TPOT missed beats only TTFT missed beats both.
	c = predicted(pred(-100, -10), pred(-300, 0), pred(100, -20), pred(200, -10))
	f(nil, c, []float64{0, 0, lv(81), lv(20)})
	c = predicted(pred(-100, -10), pred(-300, 0), pred(-100, 0))
	f(nil, c, []float64{0, lv(1), lv(101)})
	// Without predictions: the composite of free KV cache, waiting and
	// prefix match, in hundredths.
	c = cycle(&policy.Request{PromptTokens: 64, BlockSize: 16, Blocks: make([]prefix.Hash, 4)},
		policy.Candidate{KVUsage: 0.5, Waiting: 4, CachedTokens: 64},
		policy.Candidate{Replica: 1, KVUsage: 0, Waiting: 0})
	f(nil, c, []float64{0.5, 0.67})
	f(map[string]any{"compositeKVWeight": 0.0, "compositeQueueWeight": 0.0, "compositePrefixWeight": 0.0}, c, []float64{0.5, 1})
}

func TestLatencySLOAdmitter(t *testing.T) {
	a := mustDecode(t, &latencySLOAdmitter, nil).(Admitter)
	f := func(c *Cycle, want bool) {
		t.Helper()
		if got := a.Admit(c); got != want {
			t.Errorf("Admit = %v, want %v", got, want)
		}
	}
	f(predicted(pred(-1, 0), pred(-5, 0)), false)
	f(predicted(pred(-1, 0), pred(5, 1)), true) // one valid
	c := predicted(pred(-1, 0), pred(-5, 0))
	c.Cands[1].Running = 0 // idle
	f(c, true)
	c = predicted(pred(-1, 0), pred(-5, 0))
	c.Cands[0].KVUsage = 0.01 // cold
	f(c, true)
	c = predicted(pred(-1, 0), pred(-5, 0))
	c.Cands[0].Fresh = false // usage unknown: cold
	f(c, true)
	c = predicted(pred(-1, 0), pred(-5, 0))
	c.Req.SLO = policy.SLO{} // no SLO
	f(c, true)
	c.Req.SLO.TPOT = time.Millisecond // a TPOT SLO alone is one
	f(c, false)
	c = predicted(pred(-1, 0))
	c.Latency = nil // no predictions: fail open
	f(c, true)
}

// latencySLODoc is the llm-d guide's composition with the admitter.
const latencySLODoc = `
plugins:
- type: predicted-latency-producer
  parameters: {streamingMode: true}
- type: slo-headroom-tier-filter
- type: latency-scorer
- type: weighted-random-picker
- type: latency-slo-admitter
schedulingProfiles:
- name: default
  plugins:
  - pluginRef: predicted-latency-producer
  - pluginRef: slo-headroom-tier-filter
  - pluginRef: latency-scorer
  - pluginRef: weighted-random-picker`

// TestAdmitterRefusesThePick: a refusing admitter makes Pick and Explain
// return an AdmitError, a policy.ErrNotAdmitted naming it, before any
// profile runs; a request it admits routes within the SLO.
func TestAdmitterRefusesThePick(t *testing.T) {
	s := build(t, document(latencySLODoc))
	busy := []policy.Candidate{
		{Replica: 0, InFlight: 30, Running: 30, Fresh: true, KVUsage: 0.4, QueuedPrefill: 2 * time.Second},
		{Replica: 1, InFlight: 20, Running: 20, Fresh: true, KVUsage: 0.3, QueuedPrefill: 100 * time.Millisecond},
	}
	rng := rand.New(rand.NewPCG(1, 2))
	req := &policy.Request{PromptTokens: 1000, SLO: policy.SLO{TTFT: time.Millisecond}}
	i, err := s.Pick(req, busy, rng)
	var ae *AdmitError
	if i != -1 || !errors.Is(err, policy.ErrNotAdmitted) || !errors.As(err, &ae) || ae.Admitter != "latency-slo-admitter" {
		t.Fatalf("impossible SLO: Pick = %d, %v", i, err)
	}
	if s.Last().Winner != -1 || len(s.Ranked(nil)) != 0 {
		t.Fatalf("a refusal left a pick: %+v", s.Last())
	}
	ex, err := s.Explain(req, busy, rng)
	if !errors.Is(err, policy.ErrNotAdmitted) || !errors.Is(ex.Err, policy.ErrNotAdmitted) || len(ex.Profiles) != 0 {
		t.Fatalf("Explain = %+v, %v", ex, err)
	}
	// 500ms: only replica 1 is within (its queue is 100ms); the tier
	// filter keeps it alone. In streaming mode a request without a TPOT
	// SLO is within none, as in llm-d, so it sets one.
	req.SLO = policy.SLO{TTFT: 500 * time.Millisecond, TPOT: 50 * time.Millisecond}
	for range 50 {
		if i, err := s.Pick(req, busy, rng); i != 1 || err != nil {
			t.Fatalf("500ms SLO: Pick = %d, %v", i, err)
		}
	}
}

// TestLLMDProfilesParse: each of llm-d's embedded profiles parses without
// a warning into the composition its document names; the latency one
// binds its admitter and producer and reads the engines' load, the
// precise one reads KV events.
func TestLLMDProfilesParse(t *testing.T) {
	want := map[string]string{
		"llmd-helm-default": "default: | queue-scorer×2 kv-cache-utilization-scorer×2 prefix-cache-scorer×3 | max-score-picker",
		"llmd-sticky":       "default: prefix-cache-affinity-filter | token-load-scorer×1 | max-score-picker",
		"llmd-latency":      "default: strict-affinity-filter slo-headroom-tier-filter loose-affinity-filter | latency-scorer×1 | weighted-random-picker",
		"llmd-precise":      "default: decode-filter | prefix-cache-scorer×2 kv-cache-utilization-scorer×1 queue-scorer×1 | max-score-picker",
	}
	for _, p := range LLMDProfiles() {
		var doc map[string]any
		if err := yaml.Unmarshal([]byte(p.YAML), &doc); err != nil {
			t.Fatalf("%s: %v", p.Name, err)
		}
		c, warns, err := Parse(p.Name, doc)
		if err != nil || len(warns) != 0 {
			t.Fatalf("%s: %v, warnings %v", p.Name, err, warns)
		}
		s, err := c.Build()
		if err != nil {
			t.Fatal(err)
		}
		if got := shape(s); got != want[p.Name] {
			t.Errorf("%s: %s, want %s", p.Name, got, want[p.Name])
		}
		switch p.Name {
		case "llmd-latency":
			if len(s.producers) != 1 || len(s.admitters) != 1 || c.Signals()&SignalLoad == 0 {
				t.Errorf("%s: %d producers, %d admitters, signals %s", p.Name, len(s.producers), len(s.admitters), c.Signals())
			}
		case "llmd-precise":
			if c.Signals()&SignalKVEvents == 0 {
				t.Errorf("%s: signals %s", p.Name, c.Signals())
			}
		}
	}
}

// TestCostModelAdmitter: the built-in cost_model profile refuses, through
// cost-model-admitter, a request no replica is predicted to serve within
// its SLO, routes it with routing.slo_admission off, and routes a request
// without an SLO either way.
func TestCostModelAdmitter(t *testing.T) {
	stuck := []policy.Candidate{
		{Replica: 0, InFlight: 12, Pending: 12, PendingTokens: 70000},
		{Replica: 1, InFlight: 12, Pending: 12, PendingTokens: 90000},
	}
	rng := rand.New(rand.NewPCG(3, 4))
	req := &policy.Request{PromptTokens: 1000, SLO: policy.SLO{TTFT: time.Second}}
	s, err := New(policy.Spec{Name: "cost_model"})
	if err != nil {
		t.Fatal(err)
	}
	var ae *AdmitError
	if i, err := s.Pick(req, stuck, rng); i != -1 || !errors.As(err, &ae) || ae.Admitter != "cost-model-admitter" {
		t.Fatalf("stuck replicas: Pick = %d, %v", i, err)
	}
	if i, err := s.Pick(&policy.Request{PromptTokens: 1000}, stuck, rng); i < 0 || err != nil {
		t.Fatalf("no SLO: Pick = %d, %v", i, err)
	}
	p := policy.DefaultCostModelParams()
	p.SLOAdmission = false
	off, err := New(policy.Spec{Name: "cost_model", CostModel: &p})
	if err != nil {
		t.Fatal(err)
	}
	if i, err := off.Pick(req, stuck, rng); i < 0 || err != nil {
		t.Fatalf("slo_admission off: Pick = %d, %v", i, err)
	}
}

package sched

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/inferrail/inferrail/model/policy"
)

// filterParams are parameters each registered filter is run with in the
// property tests; every filter must have an entry.
var filterParams = map[string][]map[string]any{
	decodeFilter.Name:  {nil},
	prefillFilter.Name: {nil},
	labelSelectorFilter.Name: {nil, {"matchLabels": map[string]any{"zone": "a"}},
		{"matchExpressions": []any{map[string]any{"key": RoleLabel, "operator": "NotIn", "values": []any{"prefill"}}}}},
	prefixCacheAffinityFilter.Name: {nil, {"affinityThreshold": 0.3, "maxTTFTPenaltyMs": 100, "explorationProbability": 0.1}},
	sessionAffinityFilter.Name:     {nil, {"strategy": "session_id"}},
	utilizationFilter.Name: {
		{"conditions": []any{map[string]any{"metric": "waiting-queue", "maxValue": 2}}},
		{"conditions": []any{map[string]any{"metric": "kv-cache-utilization", "maxValue": 0.9}, map[string]any{"metric": "active-requests", "maxValue": 3}}, "fallbackOnEmpty": true},
	},
	boundedLoadFilter.Name: {nil, {"epsilon": 0}},
	kvPressureFilter.Name:  {nil, {"kappa": 0.8, "shortPromptTokens": 0}},
	freshLoadFilter.Name:   {nil, {"fallbackOnEmpty": false}},
	// Without a producer it keeps everything; latency_test.go runs it on
	// predictions.
	sloHeadroomTierFilter.Name: {nil},
}

// TestFiltersKeepOnlyTheirInput runs every registered filter over random
// traffic and random subsets of the candidates: what it keeps is always
// an ordered subset of its input.
func TestFiltersKeepOnlyTheirInput(t *testing.T) {
	for _, typ := range Types() {
		if typ.Kind != KindFilter {
			continue
		}
		variants, ok := filterParams[typ.Name]
		if !ok {
			t.Errorf("%s: no parameters in filterParams", typ.Name)
			continue
		}
		for _, params := range variants {
			f := mustDecode(t, typ, params).(Filter)
			tr := newTraffic(uint64(len(typ.Name)))
			setAside := 0
			for step := range 3000 {
				if step%500 == 0 {
					tr = newTraffic(uint64(step))
				}
				req, cands := tr.next()
				c := cycle(req, cands...)
				var in []int
				for i := range cands {
					if tr.rng.IntN(4) > 0 {
						in = append(in, i)
					}
				}
				setAside += len(in) - len(f.Filter(c, slices.Clone(in), nil))
				out := f.Filter(c, slices.Clone(in), make([]int, 0, 2))
				j := 0
				for _, i := range out {
					for j < len(in) && in[j] != i {
						j++
					}
					if j == len(in) {
						t.Fatalf("%s %v step %d: kept %v of %v", typ.Name, params, step, out, in)
					}
					j++
				}
				if len(out) > 0 {
					if o, ok := f.(Observer); ok {
						o.Picked(c, out[0])
					}
					tr.routed(out[0])
				}
			}
			if setAside == 0 && params != nil {
				t.Errorf("%s %v never set a candidate aside", typ.Name, params)
			}
		}
	}
}

// TestFilteredOutIsNoCandidate checks that a profile whose filters leave
// nothing answers ErrFilteredOut, a policy.ErrNoCandidate naming the
// profile and filter, tells no observer, and that Explain says the same.
func TestFilteredOutIsNoCandidate(t *testing.T) {
	doc := document(`
plugins:
- type: round-robin-picker
- name: h100-only
  type: label-selector-filter
  parameters: {matchLabels: {tier: h100}}
schedulingProfiles:
- name: gpu
  plugins: [{pluginRef: h100-only}, {pluginRef: round-robin-picker}]`)
	s := build(t, doc)
	cands := []policy.Candidate{labeled("tier", "a100"), {Replica: 1}}
	rng := rand.New(rand.NewPCG(1, 1))
	i, err := s.Pick(&policy.Request{}, cands, rng)
	var fe *FilteredError
	if i != -1 || !errors.Is(err, policy.ErrNoCandidate) || !IsFilteredOut(err) || !errors.As(err, &fe) || fe.Filter != "h100-only" || fe.Profile != "gpu" {
		t.Fatalf("Pick = %d, %v", i, err)
	}
	if s.Last().Winner != -1 {
		t.Fatalf("Last = %+v", s.Last())
	}
	ex, err := s.Explain(&policy.Request{}, cands, rng)
	if !IsFilteredOut(err) || ex.Profiles[0].Replicas[0].Filter != "h100-only" || ex.Profiles[0].Winner != -1 {
		t.Fatalf("Explain = %+v, %v", ex, err)
	}
	if rr := s.profiles[0].picker.p.(*rotation); rr.rr != (policy.RoundRobin{}) {
		t.Fatalf("the rotation moved: %+v", rr.rr)
	}
	if _, err := s.Pick(&policy.Request{}, nil, rng); !errors.Is(err, policy.ErrNoCandidate) || IsFilteredOut(err) {
		t.Fatalf("no candidates: %v", err)
	}
}

// scorerParams are parameters a scorer needs in a random profile.
var scorerParams = map[string]map[string]any{
	sessionAffinityScorer.Name: {"strategy": "session_id"},
	prefixCacheScorer.Name:     {"matchLengthWeight": 0.3},
}

// randomProfile returns a document of a random profile: random scorers
// with weights scaled by scale, then a picker.
func randomProfile(rng *rand.Rand, scale float64, picker *Type) map[string]any {
	var plugins, refs []any
	for _, typ := range Types() {
		if typ.Kind != KindScorer || rng.IntN(2) == 0 {
			continue
		}
		plugins = append(plugins, map[string]any{"type": typ.Name, "parameters": scorerParams[typ.Name]})
		w := float64(1+rng.IntN(9)) / []float64{1, 3, 10}[rng.IntN(3)]
		refs = append(refs, map[string]any{"pluginRef": typ.Name, "weight": w * scale})
	}
	plugins = append(plugins, map[string]any{"type": picker.Name})
	refs = append(refs, map[string]any{"pluginRef": picker.Name})
	return map[string]any{"apiVersion": APIVersion, "kind": ConfigKind, "plugins": plugins,
		"schedulingProfiles": []any{map[string]any{"name": "p", "plugins": refs}}}
}

// TestScalingWeightsKeepsPicks routes the same traffic through random
// profiles and through the same profiles with every weight scaled by one
// factor: the picks are the same.
func TestScalingWeightsKeepsPicks(t *testing.T) {
	for seed := uint64(0); seed < 40; seed++ {
		rng := rand.New(rand.NewPCG(seed, 3))
		factor := []float64{1e-3, 0.1, 0.7, 3, math.Pi, 1e4}[seed%6] * (1 + rng.Float64())
		picker := []*Type{&maxScorePicker, &weightedRandomPicker, &p2cPicker}[seed%3]
		a := build(t, randomProfile(rand.New(rand.NewPCG(seed, 4)), 1, picker))
		b := build(t, randomProfile(rand.New(rand.NewPCG(seed, 4)), factor, picker))
		tr := newTraffic(seed)
		ra, rb := rand.New(rand.NewPCG(seed, 5)), rand.New(rand.NewPCG(seed, 5))
		for step := range 1500 {
			req, cands := tr.next()
			x, errX := a.Pick(req, cands, ra)
			y, errY := b.Pick(req, cands, rb)
			if x != y || (errX == nil) != (errY == nil) {
				t.Fatalf("seed %d step %d (×%v): %d, %d", seed, step, factor, x, y)
			}
			if errX == nil {
				tr.routed(x)
			}
		}
	}
}

// TestMaxScorePickerBreaksTiesUniformly checks, with a fixed seed, that
// max-score-picker picks each of the best-scored candidates equally often
// (chi-square) and never another.
func TestMaxScorePickerBreaksTiesUniformly(t *testing.T) {
	p := mustDecode(t, &maxScorePicker, nil).(Picker)
	c := cycle(nil, make([]policy.Candidate, 9)...)
	totals := []float64{0.5, 0.9, 0.2, 0.9, 0.9, 0.1, 0.9, 0.89, 0.9}
	best := []int{1, 3, 4, 6, 8}
	counts := make([]int, len(totals))
	const n = 50000
	for range n {
		counts[p.Pick(c, every(c), totals)]++
	}
	chi, e := 0.0, float64(n)/float64(len(best))
	for i, k := range counts {
		if !slices.Contains(best, i) {
			if k != 0 {
				t.Fatalf("candidate %d (score %v) picked %d times", i, totals[i], k)
			}
			continue
		}
		chi += (float64(k) - e) * (float64(k) - e) / e
	}
	if chi > 18.47 { // chi-square, 4 degrees of freedom, p = 0.001
		t.Fatalf("tie counts %v (chi-square %.1f)", counts, chi)
	}
}

// TestExplainNamesThePick runs two copies of a profile on the same
// traffic and explains every decision to one of them first, with a copy
// of its source: the explanation names the pick, and the copies never
// diverge (explaining changes no state).
func TestExplainNamesThePick(t *testing.T) {
	for _, name := range Policies() {
		for seed := uint64(0); seed < 4; seed++ {
			spec := specs(rand.New(rand.NewPCG(seed, 1)))[slices.Index(Policies(), name)]
			a, _ := New(spec)
			b, _ := New(spec)
			tr := newTraffic(seed)
			src := rand.NewPCG(seed, 9)
			ra, rb := rand.New(src), rand.New(rand.NewPCG(seed, 9))
			for step := range 1500 {
				req, cands := tr.next()
				peek := *src
				ex, errE := a.Explain(req, cands, rand.New(&peek))
				x, errX := a.Pick(req, cands, ra)
				y, _ := b.Pick(req, cands, rb)
				if x != y {
					t.Fatalf("%s seed %d step %d: the explained copy picks %d, the other %d", name, seed, step, x, y)
				}
				if errX != nil {
					if !errors.Is(errE, policy.ErrNoCandidate) {
						t.Fatalf("%s: Explain says %v, Pick %v", name, errE, errX)
					}
					continue
				}
				pe := ex.Profiles[ex.Primary]
				if pe.Winner != x || !pe.Replicas[x].Picked || pe.Replicas[x].Replica != cands[x].Replica {
					t.Fatalf("%s seed %d step %d: explained %d, picked %d", name, seed, step, pe.Winner, x)
				}
				tr.routed(x)
			}
		}
	}
}

// TestExplainShowsEachPlugin checks an explanation's workings on a Helm
// default profile: each scorer's raw and weighted score, the totals, the
// filter that set a replica aside.
func TestExplainShowsEachPlugin(t *testing.T) {
	s := build(t, document(`
plugins:
- type: decode-filter
- type: queue-scorer
- type: kv-cache-utilization-scorer
schedulingProfiles:
- name: default
  plugins:
  - pluginRef: decode-filter
  - pluginRef: queue-scorer
    weight: 3
  - pluginRef: kv-cache-utilization-scorer
    weight: 1`))
	cands := []policy.Candidate{
		{Replica: 7, Waiting: 0, KVUsage: 0.5, Fresh: true},
		{Replica: 8, Waiting: 4, KVUsage: 0, Fresh: true},
		{Replica: 9, Labels: map[string]string{RoleLabel: "prefill"}},
	}
	ex, err := s.Explain(&policy.Request{}, cands, rand.New(rand.NewPCG(1, 1)))
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprintf("%+v", ex.Profiles[0])
	none := " Workings:{Replica:0 InFlight:0 CachedTokens:0 QueuedPrefill:0s PricedTokens:0 Owner:false Session:false Estimate:{Queue:0s Prefill:0s Tier:0s} Recompute:0s MissesSLO:false Guard: Score:0 Weight:0}"
	want := "{Profile:default Picker:max-score-picker Winner:0 Err:<nil> " +
		"Decision:{Winner:0 Steer: Term: Cap:0 BoundedLoad:0 KVPressure:0 KVWaived:false Owners:0} Workings:0 Replicas:[" +
		"{Replica:7 Filter: Guard: Scores:[{Scorer:queue-scorer Raw:1 Weight:3 Weighted:0.75} {Scorer:kv-cache-utilization-scorer Raw:0.5 Weight:1 Weighted:0.125}] Total:0.875 Picked:true" + none + "} " +
		"{Replica:8 Filter: Guard: Scores:[{Scorer:queue-scorer Raw:0 Weight:3 Weighted:0} {Scorer:kv-cache-utilization-scorer Raw:1 Weight:1 Weighted:0.25}] Total:0.25 Picked:false" + none + "} " +
		"{Replica:9 Filter:decode-filter Guard: Scores:[] Total:0 Picked:false" + none + "}]}"
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

// TestPickDoesNotAllocate checks the built-in profiles and llm-d's Helm
// default route without allocating once warmed up.
func TestPickDoesNotAllocate(t *testing.T) {
	scheds := map[string]*Scheduler{"helm-default": build(t, readDocument(t, "testdata/helm-default.yaml"))}
	for _, name := range Policies() {
		s, err := New(policy.Spec{Name: name})
		if err != nil {
			t.Fatal(err)
		}
		scheds[name] = s
	}
	for name, s := range scheds {
		for _, n := range []int{8, 256} {
			req, cands := benchInputs(n)
			rng := rand.New(rand.NewPCG(1, 1))
			s.Pick(req, cands, rng)
			if a := testing.AllocsPerRun(100, func() { _, _ = s.Pick(req, cands, rng) }); a != 0 {
				t.Errorf("%s n=%d: %.1f allocs per Pick", name, n, a)
			}
		}
	}
}

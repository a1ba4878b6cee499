package sched

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/inferrail/inferrail/model/policy"
)

// specs returns the policy specs the equivalence runs: every policy, the
// cache-aware ones with params drawn from rng.
func specs(rng *rand.Rand) []policy.Spec {
	ph := policy.PrefixHashParams{Blocks: []int{1, 4, 16}[rng.IntN(3)]}
	kv := policy.KVAwareParams{CacheWeight: rng.Float64() * 2, LoadWeight: 0.1 + rng.Float64()}
	cm := policy.DefaultCostModelParams()
	cm.Epsilon = []float64{0, 0.25, 1, 2}[rng.IntN(4)]
	cm.Kappa = 0.8 + rng.Float64()/10
	cm.ShortPromptTokens = []int{0, 64, 256}[rng.IntN(3)]
	cm.SessionAffinity = rng.IntN(4) > 0
	cm.HotPrefix.Enabled = rng.IntN(4) > 0
	cm.HotPrefix.Window = time.Second
	cm.HotPrefix.Utilization = 0.02 + rng.Float64()/4
	return []policy.Spec{
		{Name: "round_robin"}, {Name: "random"}, {Name: "least_request"}, {Name: "p2c"},
		{Name: "prefix_hash", PrefixHash: &ph}, {Name: "kv_aware", KVAware: &kv}, {Name: "cost_model", CostModel: &cm},
	}
}

// TestBuiltinsDecideAsPolicies routes the same seeded traffic with each
// policy and with its built-in profile, each drawing from its own copy of
// the same source, and requires the same pick at every decision (and for
// cost_model the same decision summary), with state carried across
// decisions: the rotation, the conversation table, the hot-prefix sketch.
func TestBuiltinsDecideAsPolicies(t *testing.T) {
	var decisions int
	seen := map[string]int{}
	for seed := uint64(0); seed < 8; seed++ {
		for _, spec := range specs(rand.New(rand.NewPCG(seed, 1))) {
			old, err := spec.Build()
			if err != nil {
				t.Fatal(err)
			}
			s, err := New(spec)
			if err != nil {
				t.Fatalf("%s: %v", spec.Name, err)
			}
			if s.Name() != spec.Name {
				t.Fatalf("scheduler named %q for %s", s.Name(), spec.Name)
			}
			tr := newTraffic(seed)
			rngOld, rngNew := rand.New(rand.NewPCG(seed, 7)), rand.New(rand.NewPCG(seed, 7))
			for step := range 2500 {
				req, cands := tr.next()
				a, errA := old.Pick(req, cands, rngOld)
				b, errB := s.Pick(req, cands, rngNew)
				if a != b || !errors.Is(errA, errB) && !errors.Is(errB, errA) {
					t.Fatalf("seed %d step %d %s: the policy picks %d (%v), the profile %d (%v)", seed, step, spec.Name, a, errA, b, errB)
				}
				if cm, ok := old.(*policy.CostModel); ok && cm.Last() != s.Last() {
					t.Fatalf("seed %d step %d: the policy decided %+v, the profile %+v", seed, step, cm.Last(), s.Last())
				}
				decisions++
				if errA != nil {
					seen["none"]++
					continue
				}
				tr.routed(a)
				if d := s.Last(); spec.Name == "cost_model" {
					seen["steer "+string(d.Steer)]++
					if d.Owners > 1 {
						seen["hot"]++
					}
					if d.BoundedLoad > 0 {
						seen["bounded"]++
					}
					if d.KVPressure > 0 {
						seen["kv"]++
					}
					if d.KVWaived {
						seen["waived"]++
					}
				}
			}
			if x, y := rngOld.Uint64(), rngNew.Uint64(); x != y {
				t.Fatalf("seed %d %s: the sources drifted apart", seed, spec.Name)
			}
		}
	}
	for _, k := range []string{"none", "steer session", "steer hot_prefix", "hot", "bounded", "kv", "waived"} {
		if seen[k] == 0 {
			t.Errorf("never in play: %s (%v)", k, seen)
		}
	}
	t.Logf("%d decisions; %v", decisions, seen)
}

// TestBuiltinsExplainAsPolicies explains each decision of the same seeded
// traffic with each cache-aware policy (policy.Explainer, given the next
// draw of its source) and with its built-in profile (given a copy of the
// source): the decision summary, the workings shown and every candidate's
// workings (cost_model's estimates and guards, kv_aware's scores,
// prefix_hash's weights) are the policy's, as the routing actor's
// explanations and the decision log have always shown them.
func TestBuiltinsExplainAsPolicies(t *testing.T) {
	explained := 0
	for seed := uint64(0); seed < 6; seed++ {
		for _, spec := range specs(rand.New(rand.NewPCG(seed, 1))) {
			old, err := spec.Build()
			if err != nil {
				t.Fatal(err)
			}
			oe, ok := old.(policy.Explainer)
			if !ok {
				continue
			}
			s, err := New(spec)
			if err != nil {
				t.Fatal(err)
			}
			tr := newTraffic(seed)
			src := rand.NewPCG(seed, 3)
			rngOld, rngNew := rand.New(rand.NewPCG(seed, 3)), rand.New(src)
			for step := range 1500 {
				req, cands := tr.next()
				if len(cands) == 0 {
					continue
				}
				peek := *src
				draw := rand.New(&peek).Uint64()
				peek = *src
				want, err := oe.Explain(req, cands, draw)
				if err != nil {
					t.Fatal(err)
				}
				ex, err := s.Explain(req, cands, rand.New(&peek))
				if err != nil {
					t.Fatalf("%s step %d: %v", spec.Name, step, err)
				}
				pe := ex.Profiles[ex.Primary]
				if pe.Decision != want.Decision || pe.Workings != want.Workings || pe.Winner != want.Winner {
					t.Fatalf("%s seed %d step %d: the profile explains %+v (%d), the policy %+v (%d)",
						spec.Name, seed, step, pe.Decision, pe.Workings, want.Decision, want.Workings)
				}
				for i := range cands {
					if got := pe.Replicas[i].Workings; got != want.Cands[i] {
						t.Fatalf("%s seed %d step %d candidate %d: the profile explains %+v, the policy %+v", spec.Name, seed, step, i, got, want.Cands[i])
					}
				}
				explained++
				a, _ := old.Pick(req, cands, rngOld)
				b, _ := s.Pick(req, cands, rngNew)
				if a != b || a != want.Winner {
					t.Fatalf("%s step %d: picked %d and %d, explained %d", spec.Name, step, a, b, want.Winner)
				}
				tr.routed(a)
			}
		}
	}
	t.Logf("%d explanations", explained)
}

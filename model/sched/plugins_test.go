package sched

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/inferrail/inferrail/model/policy"
	"github.com/inferrail/inferrail/model/prefix"
)

// cycle is one decision over cands, its source seeded.
func cycle(req *policy.Request, cands ...policy.Candidate) *Cycle {
	if req == nil {
		req = &policy.Request{}
	}
	return &Cycle{Req: req, Cands: cands, Rng: rand.New(rand.NewPCG(1, 2))}
}

func every(c *Cycle) []int {
	in := make([]int, len(c.Cands))
	for i := range in {
		in[i] = i
	}
	return in
}

func filtered(t *testing.T, typ *Type, params map[string]any, c *Cycle) []int {
	t.Helper()
	return mustDecode(t, typ, params).(Filter).Filter(c, every(c), nil)
}

func scored(t *testing.T, typ *Type, params map[string]any, c *Cycle) []float64 {
	t.Helper()
	s := make([]float64, len(c.Cands))
	mustDecode(t, typ, params).(Scorer).Score(c, every(c), s)
	return s
}

func wantScores(t *testing.T, got []float64, want ...float64) {
	t.Helper()
	for i := range want {
		if math.Abs(got[i]-want[i]) > 1e-12 {
			t.Fatalf("scores %v, want %v", got, want)
		}
	}
}

func labeled(kv ...string) policy.Candidate {
	c := policy.Candidate{Labels: map[string]string{}}
	for i := 0; i+1 < len(kv); i += 2 {
		c.Labels[kv[i]] = kv[i+1]
	}
	return c
}

func TestRoleFilters(t *testing.T) {
	c := cycle(nil, labeled(RoleLabel, "decode"), labeled(RoleLabel, "prefill"), labeled(RoleLabel, "both"),
		labeled(RoleLabel, "encode-prefill"), labeled(RoleLabel, ""), policy.Candidate{}, labeled("zone", "a"))
	if got := filtered(t, &decodeFilter, nil, c); !slices.Equal(got, []int{0, 2, 5, 6}) {
		t.Errorf("decode-filter keeps %v", got)
	}
	if got := filtered(t, &prefillFilter, nil, c); !slices.Equal(got, []int{1, 2, 3}) {
		t.Errorf("prefill-filter keeps %v", got)
	}
}

func TestLabelSelector(t *testing.T) {
	c := cycle(nil, labeled("tier", "h100", "zone", "a"), labeled("tier", "a100", "zone", "b"), labeled("zone", "a"), policy.Candidate{})
	f := func(params map[string]any, want ...int) {
		t.Helper()
		if got := filtered(t, &labelSelectorFilter, params, c); !slices.Equal(got, want) {
			t.Errorf("%v keeps %v, want %v", params, got, want)
		}
	}
	expr := func(key, op string, values ...any) map[string]any {
		return map[string]any{"matchExpressions": []any{map[string]any{"key": key, "operator": op, "values": values}}}
	}
	f(nil, 0, 1, 2, 3)
	f(map[string]any{"matchLabels": map[string]any{"zone": "a"}}, 0, 2)
	f(map[string]any{"matchLabels": map[string]any{"zone": "a", "tier": "h100"}}, 0)
	f(expr("tier", "In", "h100", "a100"), 0, 1)
	f(expr("tier", "NotIn", "h100"), 1, 2, 3)
	f(expr("tier", "Exists"), 0, 1)
	f(expr("tier", "DoesNotExist"), 2, 3)
	for params, want := range map[*map[string]any]string{
		ptr(expr("tier", "In")):               "matchExpressions[0].values: In needs at least one value",
		ptr(expr("tier", "Exists", "x")):      "matchExpressions[0].values: Exists takes no values",
		ptr(expr("tier", "Gt", "1")):          `matchExpressions[0].operator: want In, NotIn, Exists or DoesNotExist, got "Gt"`,
		ptr(expr("", "Exists")):               "matchExpressions[0].key: required",
		ptr(map[string]any{"matchLabels": 1}): "matchLabels: want a mapping of strings, got the number 1",
	} {
		if _, d := decode(&labelSelectorFilter, *params); len(d.errs) != 1 || !strings.HasSuffix(d.errs[0].Error(), want) {
			t.Errorf("%v: %v, want %s", *params, d.errs, want)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// TestPrefixCacheScorer takes llm-d's own cases (scorer/prefix/plugin_test.go):
// 5 of 10 blocks of one token score 0.5; with matchLengthWeight 0.5 and
// matchLengthScaleTokens 100, 0.5·(5/100)² + 0.5·0.5 = 0.25125.
func TestPrefixCacheScorer(t *testing.T) {
	req := &policy.Request{Blocks: make([]prefix.Hash, 10), BlockSize: 1, PromptTokens: 10}
	c := cycle(req, policy.Candidate{CachedTokens: 5}, policy.Candidate{CachedTokens: 2}, policy.Candidate{CachedTokens: 40})
	wantScores(t, scored(t, &prefixCacheScorer, nil, c), 0.5, 0.2, 1)
	wantScores(t, scored(t, &prefixCacheScorer, map[string]any{"matchLengthWeight": 0.5, "matchLengthScaleTokens": 100}, c), 0.25125, 0.1002, 0.5+0.5*0.01)
	c.Req = &policy.Request{PromptTokens: 10} // no full block
	wantScores(t, scored(t, &prefixCacheScorer, nil, c), 0, 0, 0)
	if _, d := decode(&prefixCacheScorer, map[string]any{"matchLengthWeight": 0.5, "matchLengthScaleTokens": 0}); len(d.errs) != 1 {
		t.Fatalf("a length weight without a scale: %v", d.errs)
	}
}

func TestLoadScorers(t *testing.T) {
	fresh := func(waiting, running int, kv float64) policy.Candidate {
		return policy.Candidate{Waiting: waiting, Running: running, KVUsage: kv, Fresh: true}
	}
	c := cycle(nil, fresh(0, 4, 0.25), fresh(5, 2, 0.5), fresh(10, 0, 1), policy.Candidate{Waiting: 0, Running: 8})
	wantScores(t, scored(t, &queueScorer, nil, c), 1, 0.5, 0, 0)
	wantScores(t, scored(t, &kvCacheUtilizationScorer, nil, c), 0.75, 0.5, 0, 0)
	wantScores(t, scored(t, &runningRequestsSizeScorer, nil, c), 0.5, 0.75, 1, 0)
	wantScores(t, scored(t, &loadAwareScorer, map[string]any{"threshold": 8}, c), 0.5, 0.5*3/8, 0, 0.5)
	same := cycle(nil, fresh(3, 1, 0), fresh(3, 1, 0))
	wantScores(t, scored(t, &queueScorer, nil, same), 1, 1)
	wantScores(t, scored(t, &runningRequestsSizeScorer, nil, same), 1, 1)
}

func TestActiveRequestScorer(t *testing.T) {
	c := cycle(nil, policy.Candidate{InFlight: 0}, policy.Candidate{InFlight: 2}, policy.Candidate{InFlight: 3}, policy.Candidate{InFlight: 4})
	wantScores(t, scored(t, &activeRequestScorer, nil, c), 1, 0.5, 0.25, 0)
	wantScores(t, scored(t, &activeRequestScorer, map[string]any{"idleThreshold": 2, "maxBusyScore": 0.5}, c), 1, 1, 0.125, 0)
	if _, d := decode(&activeRequestScorer, map[string]any{"requestTimeout": "2m"}); len(d.errs) != 0 || len(d.warns) != 1 {
		t.Fatalf("the deprecated requestTimeout: %v %v", d.errs, d.warns)
	}
}

func TestTokenLoadScorer(t *testing.T) {
	req := &policy.Request{PromptTokens: 3000}
	c := cycle(req, policy.Candidate{PendingTokens: 1000, CachedTokens: 1000}, policy.Candidate{}, policy.Candidate{PendingTokens: 9000, CachedTokens: 5000})
	wantScores(t, scored(t, &tokenLoadScorer, map[string]any{"queueThresholdTokens": 6000}, c), 0.5, 0.5, 0)
	req.PromptTokens = 0
	wantScores(t, scored(t, &tokenLoadScorer, nil, c), 1-1000.0/4194304, 1, 1-9000.0/4194304)
}

// TestEstimatedTTFTScorer checks the score orders the candidates as
// cost_model's estimate does, exactly, ties included.
func TestEstimatedTTFTScorer(t *testing.T) {
	tr := newTraffic(3)
	s := mustDecode(t, &estimatedTTFTScorer, nil).(Scorer)
	m := policy.DefaultCostModelParams().Model
	for range 500 {
		req, cands := tr.next()
		c := cycle(req, cands...)
		scores := make([]float64, len(cands))
		s.Score(c, every(c), scores)
		for i := range cands {
			for j := range cands {
				ei := m.Estimate(req.PromptTokens, cands[i].CachedTokens, cands[i].QueuedPrefill, cands[i].Running).Total()
				ej := m.Estimate(req.PromptTokens, cands[j].CachedTokens, cands[j].QueuedPrefill, cands[j].Running).Total()
				if (ei < ej) != (scores[i] > scores[j]) || (ei == ej) != (scores[i] == scores[j]) {
					t.Fatalf("estimates %v, %v scored %v, %v", ei, ej, scores[i], scores[j])
				}
			}
			if scores[i] < 0 || scores[i] > 1 {
				t.Fatalf("score %v", scores[i])
			}
		}
		if len(cands) > 0 {
			tr.routed(0)
		}
	}
}

func TestNoHitLRUScorer(t *testing.T) {
	req := &policy.Request{Blocks: make([]prefix.Hash, 4), BlockSize: 16}
	cands := []policy.Candidate{{Key: 1}, {Key: 2}, {Key: 3}}
	s := mustDecode(t, &noHitLRUScorer, map[string]any{"lruSize": 2}).(*noHitLRU)
	step := func(winner int, want ...float64) {
		t.Helper()
		c := cycle(req, cands...)
		got := make([]float64, len(cands))
		s.Score(c, every(c), got)
		wantScores(t, got, want...)
		s.Picked(c, winner)
	}
	step(1, 1, 0.5, 0)         // none used: in order
	step(0, 1, 0, 0.5)         // 0 and 2 never used, then 1
	step(2, 0, 0.5, 1)         // 2 never used, then 1 (older), then 0; lruSize 2 forgets 1
	step(0, 0.5, 1, 0)         // 1 forgotten: never used; then 0, then 2
	cands[1].CachedTokens = 16 // a warm request: neutral, and no move
	step(1, 0.5, 0.5, 0.5)
	cands[1].CachedTokens = 0
	step(1, 0, 1, 0.5)
}

func TestSessionAffinity(t *testing.T) {
	now := time.Unix(1e6, 0)
	cands := []policy.Candidate{{Key: 1}, {Key: 2}, {Key: 3}}
	byID := map[string]any{"strategy": "session_id", "sessionIdConfig": map[string]any{"evictionTtlSeconds": 60}}
	f := mustDecode(t, &sessionAffinityFilter, byID).(*sessionFilter)
	s := mustDecode(t, &sessionAffinityScorer, byID).(*sessionScorer)
	req := &policy.Request{SessionKey: 42, Now: now}
	c := cycle(req, cands...)
	scores := make([]float64, 3)
	if got := f.Filter(c, every(c), nil); len(got) != 3 {
		t.Fatalf("an unbound conversation keeps %v", got)
	}
	f.Picked(c, 1)
	s.Picked(c, 2)
	if got := f.Filter(c, every(c), nil); !slices.Equal(got, []int{1}) {
		t.Fatalf("a bound conversation keeps %v", got)
	}
	s.Score(c, every(c), scores)
	wantScores(t, scores, 0, 0, 1)
	if got := f.Filter(c, []int{0, 2}, nil); !slices.Equal(got, []int{0, 2}) {
		t.Fatalf("without its replica it keeps %v", got)
	}
	req.Now = now.Add(61 * time.Second)
	if got := f.Filter(c, every(c), nil); len(got) != 3 {
		t.Fatalf("an expired binding keeps %v", got)
	}
	// encoded_endpoint_header: the front end marks the replica.
	enc := mustDecode(t, &sessionAffinityFilter, nil).(*sessionFilter)
	cands[0].Session = true
	if got := enc.Filter(cycle(req, cands...), []int{0, 1, 2}, nil); !slices.Equal(got, []int{0}) {
		t.Fatalf("encoded_endpoint_header keeps %v", got)
	}
	for _, bad := range []map[string]any{
		{"strategy": "sticky"},
		{"sessionIdConfig": map[string]any{"sources": []any{map[string]any{"header": "x-user"}}}},
		{"sessionIdConfig": map[string]any{"sources": []any{map[string]any{"attribute": "agent-identity"}}}},
		{"sessionIdConfig": map[string]any{"evictionTtlSeconds": 0}},
	} {
		if _, d := decode(&sessionAffinityFilter, bad); len(d.errs) != 1 {
			t.Errorf("%v: %v", bad, d.errs)
		}
	}
}

func TestUtilizationFilter(t *testing.T) {
	c := cycle(nil, policy.Candidate{InFlight: 1, Waiting: 1, KVUsage: 0.5, Fresh: true},
		policy.Candidate{InFlight: 9, Waiting: 0, KVUsage: 0.2, Fresh: true},
		policy.Candidate{InFlight: 2, Waiting: 7, KVUsage: 0.95}) // stale: waiting and KV count as 0
	cond := func(metric string, max float64) map[string]any {
		return map[string]any{"metric": metric, "maxValue": max}
	}
	f := func(params map[string]any, want ...int) {
		t.Helper()
		if got := filtered(t, &utilizationFilter, params, c); !slices.Equal(got, want) {
			t.Errorf("%v keeps %v, want %v", params, got, want)
		}
	}
	f(map[string]any{"conditions": []any{cond("kv-cache-utilization", 0.4)}}, 1, 2)
	f(map[string]any{"conditions": []any{cond("active-requests", 4), cond("waiting-queue", 0)}}, 2)
	f(map[string]any{"conditions": []any{cond("active-requests", 0)}})
	f(map[string]any{"conditions": []any{cond("active-requests", 0)}, "fallbackOnEmpty": true}, 0, 1, 2)
	for _, bad := range []map[string]any{nil, {"conditions": []any{cond("gpu", 1)}}, {"conditions": []any{map[string]any{"metric": "waiting-queue"}}}} {
		if _, d := decode(&utilizationFilter, bad); len(d.errs) != 1 {
			t.Errorf("%v: %v", bad, d.errs)
		}
	}
}

func TestPrefixCacheAffinityFilter(t *testing.T) {
	req := &policy.Request{Blocks: make([]prefix.Hash, 10), BlockSize: 16}
	c := cycle(req, policy.Candidate{CachedTokens: 160, PendingTokens: 40000}, policy.Candidate{CachedTokens: 128},
		policy.Candidate{CachedTokens: 16, PendingTokens: 0}, policy.Candidate{CachedTokens: 0, PendingTokens: 100})
	f := func(params map[string]any, want ...int) {
		t.Helper()
		if got := filtered(t, &prefixCacheAffinityFilter, params, c); !slices.Equal(got, want) {
			t.Errorf("%v keeps %v, want %v", params, got, want)
		}
	}
	f(nil, 0, 1)                                   // 100% and 80% are sticky
	f(map[string]any{"affinityThreshold": 0.9}, 0) // the gate: 40000/15928 s is 2.5 s behind, within 18 s
	f(map[string]any{"affinityThreshold": 0.9, "maxTTFTPenaltyMs": 2000}, 0, 1, 2, 3)
	f(map[string]any{"affinityThreshold": 0.9, "maxTTFTPenaltyMs": 0}, 0) // always stick
	f(map[string]any{"explorationProbability": 1}, 0, 1, 2, 3)
	c.Cands[0].CachedTokens, c.Cands[1].CachedTokens = 0, 0
	f(nil, 0, 1, 2, 3) // no sticky replica
	// latencyPredictor reads predicted-latency-producer's TTFT; without
	// predictions the signal is missing and every replica is kept, as in
	// llm-d, unless the gate is off.
	c.Cands[0].CachedTokens, c.Cands[1].CachedTokens = 160, 128
	pr := map[string]any{"affinityThreshold": 0.9, "ttftSource": "latencyPredictor", "maxTTFTPenaltyMs": 2000}
	f(pr, 0, 1, 2, 3)
	f(map[string]any{"affinityThreshold": 0.9, "ttftSource": "latencyPredictor", "maxTTFTPenaltyMs": 0}, 0)
	c.Latency = []Prediction{{TTFT: 3 * time.Second}, {TTFT: time.Second}, {TTFT: 500 * time.Millisecond}, {TTFT: 2 * time.Second}}
	f(pr, 0, 1, 2, 3) // 2.5 s behind
	c.Latency[0].TTFT = 2 * time.Second
	f(pr, 0) // 1.5 s behind
	for _, bad := range []map[string]any{{"ttftSource": "sidecar"}, {"affinityThreshold": 2}, {"prefillCalibrationFile": "/x"}} {
		if _, d := decode(&prefixCacheAffinityFilter, bad); len(d.errs) != 1 {
			t.Errorf("%v: %v", bad, d.errs)
		}
	}
}

// TestCostGuardFilters checks that bounded-load-filter then
// kv-pressure-filter keep exactly the candidates cost_model's guards let
// through, on random traffic.
func TestCostGuardFilters(t *testing.T) {
	tr := newTraffic(11)
	p := policy.DefaultCostModelParams()
	cm := policy.NewCostModel(p)
	bl := mustDecode(t, &boundedLoadFilter, map[string]any{"epsilon": p.Epsilon}).(Filter)
	kv := mustDecode(t, &kvPressureFilter, map[string]any{"kappa": p.Kappa, "shortPromptTokens": p.ShortPromptTokens}).(Filter)
	for step := range 3000 {
		req, cands := tr.next()
		if len(cands) == 0 {
			continue
		}
		ex, _ := cm.Explain(req, cands, 0)
		c := cycle(req, cands...)
		kept := kv.Filter(c, bl.Filter(c, every(c), nil), nil)
		var want []int
		for i, e := range ex.Cands {
			if e.Guard == policy.GuardNone {
				want = append(want, i)
			}
		}
		if !slices.Equal(kept, want) || c.Decision.Cap != ex.Cap || c.Decision.KVWaived != ex.KVWaived {
			t.Fatalf("step %d: the filters keep %v (%+v), cost_model %v (%+v)", step, kept, c.Decision, want, ex.Decision)
		}
		tr.routed(kept[0])
	}
}

func TestPickers(t *testing.T) {
	c := cycle(nil, make([]policy.Candidate, 4)...)
	in := every(c)
	totals := []float64{0.1, 0.4, 0, 0.2}
	counts := make([]int, 4)
	wr := mustDecode(t, &weightedRandomPicker, nil).(Picker)
	const n = 70000
	for range n {
		counts[wr.Pick(c, in, totals)]++
	}
	// A-Res picks in proportion to the scores: 1/7, 4/7, 0, 2/7.
	chi := 0.0
	for k, w := range []float64{1, 4, 0, 2} {
		if w == 0 {
			if counts[k] != 0 {
				t.Fatalf("a zero score was picked %d times", counts[k])
			}
			continue
		}
		e := n * w / 7
		chi += (float64(counts[k]) - e) * (float64(counts[k]) - e) / e
	}
	if chi > 13.82 { // chi-square, 2 degrees of freedom, p = 0.001
		t.Fatalf("weighted-random-picker counts %v (chi-square %.1f)", counts, chi)
	}
	clear(counts)
	for range 4000 {
		counts[wr.Pick(c, in, []float64{0, 0, 0, 0})]++
	}
	if slices.Min(counts) < 800 {
		t.Fatalf("with no score it picks %v", counts)
	}
	if _, d := decode(&maxScorePicker, map[string]any{"maxNumOfEndpoints": 3}); len(d.errs) != 0 || len(d.warns) != 1 {
		t.Fatalf("maxNumOfEndpoints 3: %v %v", d.errs, d.warns)
	}
}

// TestFreshLoadFilter tests the worked example of docs/plugins.md.
func TestFreshLoadFilter(t *testing.T) {
	c := cycle(nil, policy.Candidate{Fresh: true}, policy.Candidate{}, policy.Candidate{Fresh: true})
	if got := filtered(t, &freshLoadFilter, nil, c); !slices.Equal(got, []int{0, 2}) {
		t.Fatalf("keeps %v", got)
	}
	stale := cycle(nil, policy.Candidate{}, policy.Candidate{})
	if got := filtered(t, &freshLoadFilter, nil, stale); !slices.Equal(got, []int{0, 1}) {
		t.Fatalf("with none fresh keeps %v", got)
	}
	if got := filtered(t, &freshLoadFilter, map[string]any{"fallbackOnEmpty": false}, stale); len(got) != 0 {
		t.Fatalf("without the fallback keeps %v", got)
	}
}

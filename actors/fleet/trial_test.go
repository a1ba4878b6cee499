package fleet

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/inferrail/inferrail/config"
	"github.com/inferrail/inferrail/model/policy"
	"github.com/inferrail/inferrail/model/shadow"
)

// shadowConfig routes model m over n replicas with pol, shadowed by
// shadows, with the given seed. Hot-prefix credit is off, so that
// cost_model picks the lowest estimate whenever the load guards are idle.
func shadowConfig(n int, seed uint64, pol string, shadows ...string) *config.Config {
	return testConfig(n, func(c *config.Config) {
		c.Models[0].Policy = pol
		c.Models[0].Shadow = shadows
		c.Routing.Seed = seed
		c.Routing.EstimateDeadline = time.Second // every replica answers in these tests
		c.Routing.HotPrefix.Enabled = false
	})
}

// shadowReport returns the report of model m's shadow named name.
func shadowReport(t *testing.T, f *Fleet, name string) (shadow.Summary, uint64) {
	t.Helper()
	for _, r := range f.Trials() {
		for _, s := range r.Shadows {
			if r.Model == "m" && s.Policy == name {
				return s, r.Dropped
			}
		}
	}
	t.Fatalf("no shadow %s in %+v", name, f.Trials())
	return shadow.Summary{}, 0
}

// replayed waits until every shadow of m has replayed n decisions.
func replayed(t *testing.T, f *Fleet, n int64) {
	t.Helper()
	waitFor(t, "the shadows replayed", func() bool {
		for _, r := range f.Trials() {
			for _, s := range r.Shadows {
				if s.Decisions != n {
					return false
				}
			}
		}
		return true
	})
}

// A round_robin routing policy shadowed by cost_model and round_robin: the
// round_robin shadow rotates like the routing policy, so it agrees on every
// decision when its first draw starts it on the same replica and on none
// otherwise; cost_model disagrees exactly when a repeated prompt is cached
// on a replica the rotation passed over, and is then priced faster. The
// routing decisions are those of the same fleet without shadows.
func TestShadowsAgainstRoundRobin(t *testing.T) {
	const n = 3
	// Both round robins start at their first draw over the 3 candidates:
	// the routing policy from stream 0, the shadow (second in the list)
	// from its own stream. Pick a seed where the draws match and one where
	// they differ.
	start0 := func(seed, stream uint64) int { return rand.New(rand.NewPCG(seed, stream)).IntN(n) }
	seeds := map[bool]uint64{}
	for seed := uint64(1); len(seeds) < 2; seed++ {
		same := start0(seed, 0) == start0(seed, trialStream(0, 1))
		if _, ok := seeds[same]; !ok {
			seeds[same] = seed
		}
	}
	for _, agree := range []bool{true, false} {
		seed := seeds[agree]
		f := start(t, shadowConfig(n, seed, "round_robin", "cost_model", "round_robin"), Options{})
		plain := start(t, shadowConfig(n, seed, "round_robin"), Options{})
		if !f.UsesEstimates("m") || plain.UsesEstimates("m") {
			t.Fatal("a cache-aware shadow does not turn the estimate broadcast on")
		}
		if plain.Trials() != nil {
			t.Fatalf("a model without shadows reports %+v", plain.Trials())
		}
		// 4 prompts in turn over 3 replicas: each prompt's second and
		// third sends go to a replica that does not hold it yet, while
		// one that does is idle.
		const decisions = 24
		var prev shadow.Summary
		for j := range decisions {
			req := promptReq(uint32(j%4)*100000, 2000)
			d, dp := pickOK(t, f, req), pickOK(t, plain, req)
			if d.Replica != dp.Replica {
				t.Fatalf("seed %d decision %d: %s with shadows, %s without", seed, j, d.Replica, dp.Replica)
			}
			for _, x := range []struct {
				f *Fleet
				d Decision
			}{{f, d}, {plain, dp}} {
				x.f.FirstByte(x.d)
				x.f.Done(x.d, OutcomeOK)
				settle(t, x.f)
			}
			replayed(t, f, int64(j+1))
			cm, _ := shadowReport(t, f, "cost_model")
			agreed := cm.Agreement*float64(j+1) - prev.Agreement*float64(j)
			faster := cm.Faster*float64(j+1) - prev.Faster*float64(j)
			if 4 <= j && j < 12 && (agreed > 0.5 || faster < 0.5) {
				t.Fatalf("seed %d decision %d: a prompt cached elsewhere; cost_model agreed %.0f, faster %.0f", seed, j, agreed, faster)
			}
			if cm.Slower != 0 {
				t.Fatalf("seed %d decision %d: cost_model priced slower than the routing pick: %+v", seed, j, cm)
			}
			prev = cm
		}
		cm, dropped := shadowReport(t, f, "cost_model")
		rr, _ := shadowReport(t, f, "round_robin")
		t.Logf("seed %d: cost_model %+v, round_robin %+v", seed, cm, rr)
		if dropped != 0 || cm.Decisions != decisions || rr.Decisions != decisions {
			t.Fatalf("dropped %d, decisions %d and %d; want 0, %d", dropped, cm.Decisions, rr.Decisions, decisions)
		}
		switch {
		case agree && (rr.Agreement != 1 || rr.Faster != 0 || rr.Slower != 0 || rr.MeanGain != 0):
			t.Fatalf("seed %d: round_robin shadow %+v, want it to agree on every decision", seed, rr)
		case !agree && rr.Agreement != 0:
			t.Fatalf("seed %d: round_robin shadow %+v, want it to agree on none", seed, rr)
		}
		if cm.Faster < 8.0/decisions || cm.MeanGain <= 0 || cm.Agreement+cm.Faster > 1 {
			t.Fatalf("cost_model shadow %+v", cm)
		}
	}
}

// Whatever the shadows draw, the routing policy draws from its own stream:
// a randomized policy shadowed by randomized ones routes as it does alone,
// and every decision is replayed by every shadow.
func TestShadowsKeepRoutingDecisions(t *testing.T) {
	for _, pol := range []string{"random", "p2c", "least_request"} {
		set := metrics.NewSet()
		f := start(t, shadowConfig(4, 7, pol, "random", "p2c", "kv_aware", "cost_model"), Options{RoutingMetrics: set})
		plain := start(t, shadowConfig(4, 7, pol), Options{})
		const decisions = 60
		var held []Decision // some stay in flight, so that load differs
		for j := range decisions {
			req := promptReq(uint32(j%7)*100000, 300+j)
			d, dp := pickOK(t, f, req), pickOK(t, plain, req)
			if d.Replica != dp.Replica || d.Policy != pol {
				t.Fatalf("%s decision %d: %s with shadows, %s without", pol, j, d.Replica, dp.Replica)
			}
			if j%3 == 0 {
				held = append(held, d, dp)
				continue
			}
			f.Done(d, OutcomeOK)
			plain.Done(dp, OutcomeOK)
		}
		for i := 0; i < len(held); i += 2 {
			f.Done(held[i], OutcomeOK)
			plain.Done(held[i+1], OutcomeOK)
		}
		replayed(t, f, decisions)
		for _, r := range f.Trials() {
			for _, s := range r.Shadows {
				l := `{model="m",policy="` + s.Policy + `"`
				agreed := set.GetOrCreateCounter(`inferrail_shadow_decisions_total` + l + `,agreed="true"}`).Get()
				other := set.GetOrCreateCounter(`inferrail_shadow_decisions_total` + l + `,agreed="false"}`).Get()
				faster := set.GetOrCreateCounter(`inferrail_shadow_faster_total` + l + `}`).Get()
				slower := set.GetOrCreateCounter(`inferrail_shadow_slower_total` + l + `}`).Get()
				if agreed+other != decisions || faster+slower > other || float64(agreed) != s.Agreement*decisions {
					t.Fatalf("%s shadowed by %s: %d agreed, %d not, %d faster, %d slower; report %+v", pol, s.Policy, agreed, other, faster, slower, s)
				}
				active := set.GetOrCreateFloatCounter(`inferrail_shadow_estimated_ttft_seconds_total` + l + `,pick="active"}`).Get()
				shad := set.GetOrCreateFloatCounter(`inferrail_shadow_estimated_ttft_seconds_total` + l + `,pick="shadow"}`).Get()
				if gain := (active - shad) / decisions; gain-s.MeanGain.Seconds() > 1e-6 || s.MeanGain.Seconds()-gain > 1e-6 {
					t.Fatalf("%s shadowed by %s: metrics give a mean gain of %v s, the report %v", pol, s.Policy, gain, s.MeanGain)
				}
			}
			if r.Dropped != 0 {
				t.Fatalf("dropped %d", r.Dropped)
			}
		}
	}
}

// stall is a shadow policy that blocks until released.
type stall struct{ release chan struct{} }

func (stall) Name() string { return "stall" }

func (s stall) Pick(_ *policy.Request, _ []policy.Candidate, _ *rand.Rand) (int, error) {
	<-s.release
	return 0, nil
}

// A shadow that falls behind never delays a decision: once its queue is
// full, decisions are left out of the shadow and counted.
func TestShadowDropsWhenBehind(t *testing.T) {
	set := metrics.NewSet()
	st := stall{release: make(chan struct{})}
	f := start(t, shadowConfig(3, 1, "round_robin", "least_request"), Options{RoutingMetrics: set, TrialQueue: 2,
		extraTrial: func() policy.Policy { return st }})
	var once sync.Once
	release := func() { once.Do(func() { close(st.release) }) }
	t.Cleanup(release) // before Stop, which joins the worker
	const decisions = 20
	for j := range decisions {
		t0 := time.Now()
		d := pickOK(t, f, promptReq(uint32(j), 100))
		if el := time.Since(t0); el > time.Second {
			t.Fatalf("decision %d took %v behind a stalled shadow", j, el)
		}
		f.Done(d, OutcomeOK)
	}
	// The worker holds one decision in the stalled Pick, or is about to;
	// the queue holds 2 more.
	_, dropped := shadowReport(t, f, "least_request")
	if dropped < decisions-3 || dropped > decisions-2 {
		t.Fatalf("dropped %d of %d with a queue of 2", dropped, decisions)
	}
	if c := set.GetOrCreateCounter(`inferrail_shadow_dropped_total{model="m"}`).Get(); c != dropped {
		t.Fatalf("inferrail_shadow_dropped_total %d, report %d", c, dropped)
	}
	release()
	replayed(t, f, int64(decisions-int(dropped)))
	lr, _ := shadowReport(t, f, "least_request")
	t.Logf("dropped %d; least_request %+v", dropped, lr)
}

// memLog is a shadow log in memory whose decision lines wait for gate.
type memLog struct {
	gate  chan struct{}
	mu    sync.Mutex
	lines [][]byte
}

func (l *memLog) Put(ctx context.Context, v any) error {
	if v.(*shadow.Line).Kind == shadow.KindDecision {
		select {
		case <-l.gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	l.mu.Lock()
	l.lines = append(l.lines, b)
	l.mu.Unlock()
	return nil
}

// A shadow log that falls behind holds the shadows back, and the
// decisions they are too slow for are dropped before any shadow sees
// them: the log still replays to every pick, the stateful policies'
// included.
func TestShadowLogReplaysAcrossDrops(t *testing.T) {
	log := &memLog{gate: make(chan struct{})}
	f := start(t, shadowConfig(3, 9, "least_request", "round_robin", "random", "p2c", "cost_model"),
		Options{TrialQueue: 2, TrialLog: log})
	const decisions = 40
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(log.gate) }) })
	for j := range decisions {
		if j == decisions/2 {
			once.Do(func() { close(log.gate) })
			w := f.table.Load().byName["m"].trials
			waitFor(t, "the worker caught up", func() bool { return len(w.queue) == 0 })
		}
		d := pickOK(t, f, promptReq(uint32(j%5), 100))
		f.Done(d, OutcomeOK)
	}
	_, dropped := shadowReport(t, f, "round_robin")
	replayed(t, f, int64(decisions-int(dropped)))
	if dropped == 0 {
		t.Fatal("nothing dropped behind a stalled log")
	}
	var lines [][]byte
	waitFor(t, "the decisions logged", func() bool { // each is logged after it is counted
		log.mu.Lock()
		defer log.mu.Unlock()
		lines = slices.Clone(log.lines)
		return len(lines) == 1+decisions-int(dropped)
	})
	var r shadow.Replay
	for i, b := range lines {
		l, err := shadow.ParseLine(b)
		if err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		if i == 0 && (l.Kind != shadow.KindConfig || l.Gen != 1) {
			t.Fatalf("line 1 is %s of generation %d", l.Kind, l.Gen)
		}
		mis, err := r.Add(l)
		if err != nil || len(mis) > 0 {
			t.Fatalf("line %d: %v %q", i+1, err, mis)
		}
	}
	if r.Decisions != decisions-int(dropped) || r.Checked != 4*r.Decisions {
		t.Fatalf("replayed %d decisions, %d picks; %d dropped of %d", r.Decisions, r.Checked, dropped, decisions)
	}
	t.Logf("%d dropped, %d decisions replayed to %d picks", dropped, r.Decisions, r.Checked)
}

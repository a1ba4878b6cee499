package fleet

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/inferrail/inferrail/config"
	"github.com/inferrail/inferrail/model/policy"
)

// armPID returns the id of the routing actor of model m's arm pol, or "".
func armPID(f *Fleet, pol string) string {
	if a, ok := f.table.Load().byName["m"].armNamed(pol); ok {
		return a.routing.Id
	}
	return ""
}

// A reload that leaves round_robin's settings alone keeps its routing
// actor, so the rotation continues where it was; one that changes epsilon
// replaces cost_model's actor but not round_robin's.
func TestReconfigureKeepsUnchangedPolicies(t *testing.T) {
	rr := func(c *config.Config) { c.Models[0].Policy = "round_robin" }
	fresh := start(t, testConfig(4, rr), Options{})
	var want []string
	for range 8 {
		want = append(want, pick(t, fresh).Replica)
	}

	f := start(t, testConfig(4, rr), Options{})
	var got []string
	for range 5 {
		got = append(got, pick(t, f).Replica)
	}
	before := armPID(f, "round_robin")
	if err := f.Reconfigure(testConfig(4, func(c *config.Config) { rr(c); c.Routing.Epsilon = 3 })); err != nil {
		t.Fatal(err)
	}
	if after := armPID(f, "round_robin"); after != before {
		t.Fatalf("round_robin routing actor replaced (%s → %s) though its settings did not change", before, after)
	}
	for range 3 {
		got = append(got, pick(t, f).Replica)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("rotation across the reload %v, want %v (as without it)", got, want)
	}

	// A split: percents move, both arms keep their actors; epsilon moves,
	// cost_model's actor is replaced (a new session table), round_robin's is
	// kept.
	split := func(cm, r int, eps float64) *config.Config {
		return testConfig(4, func(c *config.Config) {
			c.Models[0].Split = map[string]int{"cost_model": cm, "round_robin": r}
			c.Routing.SessionAffinity = true
			c.Routing.Epsilon = eps
		})
	}
	g := start(t, split(75, 25, 1), Options{})
	cm0, rr0 := armPID(g, "cost_model"), armPID(g, "round_robin")
	if err := g.Reconfigure(split(50, 50, 1)); err != nil {
		t.Fatal(err)
	}
	if armPID(g, "cost_model") != cm0 || armPID(g, "round_robin") != rr0 {
		t.Fatal("a split's percents changed and an arm lost its routing actor")
	}
	if a := g.Arms("m"); a[0].Percent != 50 || a[1].Percent != 50 {
		t.Fatalf("arms after the reload %v", a)
	}
	if err := g.Reconfigure(split(50, 50, 2)); err != nil {
		t.Fatal(err)
	}
	if armPID(g, "cost_model") == cm0 || armPID(g, "round_robin") != rr0 {
		t.Fatalf("epsilon changed: cost_model %s → %s, round_robin %s → %s", cm0, armPID(g, "cost_model"), rr0, armPID(g, "round_robin"))
	}
	// The replaced actor still answers during the grace period, then stops.
	waitFor(t, "the replaced routing actor to stop", func() bool {
		_, alive := g.sys.ProcessRegistry.GetLocal(cm0)
		return !alive
	})
	for i := range 20 {
		req := promptReq(uint32(i)*1000, 64)
		pickOK(t, g, req)
	}
}

// A replica removed while a request runs on it leaves the fleet at once,
// and the request's decision still completes: its lease is released and
// its outcome reported without error.
func TestReconfigureRemovedReplicaFinishes(t *testing.T) {
	cfg := testConfig(3, func(c *config.Config) { c.Models[0].Policy = "cost_model"; c.Routing.EstimateDeadline = time.Second })
	f := start(t, cfg, Options{})
	d, err := f.Pick(PickRequest{Model: "m", Policy: promptReq(7, 256), Exclude: []string{"r0", "r1"}, Deadline: time.Now().Add(5 * time.Second)})
	if err != nil || d.Replica != "r2" {
		t.Fatalf("pick %+v, %v", d, err)
	}
	snap, _ := f.Snapshot("r2")
	if snap.Counters.InFlight() != 1 {
		t.Fatalf("in flight on r2 %d, want 1", snap.Counters.InFlight())
	}
	next := testConfig(3, func(c *config.Config) {
		c.Models[0].Policy = "cost_model"
		c.Routing.EstimateDeadline = time.Second
		c.Replicas = c.Replicas[:2]
		c.Replicas = append(c.Replicas, config.Replica{ID: "r9", URL: "http://10.0.0.9:8000", Models: []string{"m"}, MaxConcurrency: 1024})
	})
	if err := f.Reconfigure(next); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.Snapshot("r2"); ok {
		t.Fatal("r2 is still a member")
	}
	if _, ok := f.Snapshot("r9"); !ok {
		t.Fatal("r9 did not join")
	}
	f.FirstByte(d)
	f.Done(d, OutcomeOK)
	if n := snap.Counters.InFlight(); n != 0 {
		t.Fatalf("in flight on the removed r2 after Done %d, want 0", n)
	}
	seen := map[string]int{}
	for i := range 30 {
		seen[pickOK(t, f, promptReq(uint32(i+1)*1000, 64)).Replica]++
	}
	if seen["r2"] > 0 || seen["r9"] == 0 {
		t.Fatalf("decisions after the reload %v: want none on r2, some on r9", seen)
	}
}

// A config whose model list differs is refused, and nothing changes.
func TestReconfigureRefusesModelList(t *testing.T) {
	f := start(t, testConfig(2, nil), Options{})
	before := f.table.Load()
	next := testConfig(2, func(c *config.Config) { c.Models = append(c.Models, config.Model{Name: "other", BlockSize: 16}) })
	if err := f.Reconfigure(next); !errors.Is(err, ErrRestartOnly) {
		t.Fatalf("err %v, want ErrRestartOnly", err)
	}
	if f.table.Load() != before {
		t.Fatal("a refused reload changed the table")
	}
}

// Picks run on several goroutines while the config changes under them:
// policy, split, epsilon, and a replica added and removed. No pick fails.
func TestReconfigureUnderLoad(t *testing.T) {
	configs := []func(*config.Config){
		func(c *config.Config) { c.Models[0].Policy = "least_request" },
		func(c *config.Config) { c.Models[0].Policy = "round_robin" },
		func(c *config.Config) { c.Models[0].Split = map[string]int{"cost_model": 60, "round_robin": 40} },
		func(c *config.Config) {
			c.Models[0].Split = map[string]int{"cost_model": 60, "round_robin": 40}
			c.Routing.Epsilon = 2
		},
		func(c *config.Config) {
			c.Models[0].Policy = "cost_model"
			c.Replicas = append(c.Replicas, config.Replica{ID: "r9", URL: "http://10.0.0.9:8000", Models: []string{"m"}, MaxConcurrency: 1024})
		},
		func(c *config.Config) { c.Models[0].Policy = "p2c"; c.Replicas = c.Replicas[1:] },
	}
	cfgAt := func(i int) *config.Config {
		return testConfig(3, func(c *config.Config) {
			c.Routing.EstimateDeadline = 50 * time.Millisecond
			configs[i%len(configs)](c)
		})
	}
	f := start(t, cfgAt(0), Options{})
	var picks, failures atomic.Int64
	var firstErr atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				req := promptReq(uint32(w*100000+i%50*1000), 64)
				req.Key = policy.Key(fmt.Sprint("conv-", w, "-", i%50))
				d, err := f.Pick(PickRequest{Model: "m", Policy: req, Deadline: time.Now().Add(5 * time.Second)})
				if err != nil {
					failures.Add(1)
					firstErr.CompareAndSwap(nil, err)
					continue
				}
				picks.Add(1)
				f.FirstByte(d)
				f.Done(d, OutcomeOK)
			}
		})
	}
	const reloads = 30
	// Each reload waits for picks made since the one before, so that
	// every configuration is routed by.
	advanced := func(what string) {
		t.Helper()
		before := picks.Load()
		waitFor(t, what, func() bool { return picks.Load() > before+8 })
	}
	for i := 1; i <= reloads; i++ {
		advanced("picks before the reload")
		if err := f.Reconfigure(cfgAt(i)); err != nil {
			t.Fatalf("reload %d: %v", i, err)
		}
	}
	advanced("picks after the last reload")
	close(stop)
	wg.Wait()
	t.Logf("%d picks on 8 goroutines during %d reloads, %d failed", picks.Load(), reloads, failures.Load())
	if failures.Load() > 0 {
		t.Fatalf("%d picks failed during reloads, first: %v", failures.Load(), firstErr.Load())
	}
	if picks.Load() < reloads {
		t.Fatalf("only %d picks", picks.Load())
	}
	if a := f.Arms("m"); len(a) != 1 || a[0].Policy != "least_request" { // reload 30 is configs[0]
		t.Fatalf("arms after the last reload %v, want least_request", a)
	}
}

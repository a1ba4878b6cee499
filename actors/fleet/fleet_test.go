package fleet

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/asynkron/protoactor-go/actor"

	"github.com/inferrail/inferrail/config"
	"github.com/inferrail/inferrail/model/route"
)

func TestPickAndDone(t *testing.T) {
	p := newFakeProber()
	p.cards = map[string][]byte{"m": []byte(`{"id":"m","object":"model","max_model_len":4096}`)}
	f := start(t, testConfig(3, func(c *config.Config) {
		c.Models[0].Policy = "round_robin"
		c.Health.Interval = 5 * time.Millisecond
	}), Options{Prober: p})

	seen := map[string]int{}
	for range 9 {
		d := pick(t, f)
		if d.Policy != "round_robin" || d.Lease == nil {
			t.Fatalf("decision %+v", d)
		}
		if want := fmt.Sprintf("http://10.0.0.%c:8000", d.Replica[1]+1); d.URL != want {
			t.Fatalf("%s at %s, want %s", d.Replica, d.URL, want)
		}
		seen[d.Replica]++
		s, ok := f.Snapshot(d.Replica)
		if !ok || s.Counters.InFlight() != 1 || s.Counters.Pending() != 1 {
			t.Fatalf("snapshot of %s after pick: %+v", d.Replica, s)
		}
		d.Lease.FirstByte()
		f.Done(d, OutcomeOK)
		f.Done(d, OutcomeOK) // a second Done does not release twice
		if s.Counters.InFlight() != 0 || s.Counters.Pending() != 0 {
			t.Fatalf("%s after Done: %d in flight", d.Replica, s.Counters.InFlight())
		}
	}
	if len(seen) != 3 || seen["r0"] != 3 || seen["r1"] != 3 || seen["r2"] != 3 {
		t.Fatalf("round robin over 3 replicas gave %v", seen)
	}

	resolve := func(name, want string, wantOK bool) {
		t.Helper()
		if got, ok := f.Resolve(name); got != want || ok != wantOK {
			t.Fatalf("Resolve(%q) = %q, %v; want %q, %v", name, got, ok, want, wantOK)
		}
	}
	resolve("m", "m", true)
	resolve("sim", "m", true)
	resolve("", "m", true)
	resolve("gpt-4", "", false)

	waitFor(t, "cards fetched", func() bool { return f.Models()[0].Card != nil })
	ms := f.Models()
	if len(ms) != 2 || ms[0].ID != "m" || ms[1].ID != "sim" || ms[1].Model != "m" || string(ms[1].Card) != string(p.cards["m"]) {
		t.Fatalf("Models() = %+v", ms)
	}
	if rs := f.Replicas(); len(rs) != 3 || rs[0].ID != "r0" || rs[2].ID != "r2" || !rs[1].Healthy {
		t.Fatalf("Replicas() = %+v", rs)
	}
	if _, ok := f.Snapshot("nope"); ok {
		t.Fatal("Snapshot of an unknown replica")
	}
}

func TestPickErrors(t *testing.T) {
	cfg := testConfig(2, func(c *config.Config) {
		c.Models = append(c.Models, config.Model{Name: "n", BlockSize: 16})
	})
	f := start(t, cfg, Options{})
	if _, ok := f.Resolve(""); ok {
		t.Fatal("the empty name resolved with two models")
	}
	try := func(req PickRequest, want error) {
		t.Helper()
		d, err := f.Pick(req)
		if !errors.Is(err, want) {
			t.Fatalf("Pick(%+v) = %+v, %v; want %v", req, d, err, want)
		}
	}
	soon := time.Now().Add(5 * time.Second)
	try(PickRequest{Model: "gpt-4", Deadline: soon}, ErrUnknownModel)
	try(PickRequest{Model: "n", Deadline: soon}, route.ErrNoReplica) // nobody serves n
	try(PickRequest{Model: "m", Exclude: []string{"r0", "r1"}, Deadline: soon}, route.ErrNoReplica)
	try(PickRequest{Model: "m", Deadline: time.Now().Add(-time.Second)}, route.ErrDeadline)
	try(PickRequest{Model: "m"}, route.ErrDeadline) // zero deadline
	d := pick(t, f, "r0")
	if d.Replica != "r1" {
		t.Fatalf("picked %s with r0 excluded", d.Replica)
	}
	f.Done(d, OutcomeCancelled)
	// An alias is accepted too.
	d, err := f.Pick(PickRequest{Model: "sim", Deadline: soon})
	if err != nil {
		t.Fatal(err)
	}
	f.Done(d, OutcomeOK)

	f.Stop()
	try(PickRequest{Model: "m", Deadline: soon}, ErrStopped)
	f.Done(d, OutcomeFailed) // harmless after Stop
}

// TestNoHerding releases 200 picks at the same instant onto 4 idle replicas
// under least_request, holding every lease: each replica gets 50 ± 5.
func TestNoHerding(t *testing.T) {
	f := start(t, testConfig(4, nil), Options{})
	const n = 200
	start := make(chan struct{})
	var wg sync.WaitGroup
	ds := make([]Decision, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			<-start
			ds[i], errs[i] = f.Pick(PickRequest{Model: "m", Deadline: time.Now().Add(10 * time.Second)})
		})
	}
	close(start)
	wg.Wait()
	counts := map[string]int{}
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("pick %d: %v", i, errs[i])
		}
		counts[ds[i].Replica]++
	}
	t.Logf("spread: %v", counts)
	for _, id := range []string{"r0", "r1", "r2", "r3"} {
		if c := counts[id]; c < 45 || c > 55 {
			t.Fatalf("%s got %d of %d (%v), want 50 ± 5", id, c, n, counts)
		}
	}
	for _, d := range ds {
		f.Done(d, OutcomeOK)
	}
}

// TestBreakers: concurrent bursts never overshoot max_concurrency or
// max_pending, a full fleet answers route.ErrOverloaded at once, and response
// heads and releases make room again.
func TestBreakers(t *testing.T) {
	const maxConc, maxPend = 4, 2
	f := start(t, testConfig(3, func(c *config.Config) {
		for i := range c.Replicas {
			c.Replicas[i].MaxConcurrency, c.Replicas[i].MaxPending = maxConc, maxPend
		}
	}), Options{})
	var maxIn, maxPen atomic.Int64
	raise := func(m *atomic.Int64, v int64) {
		for old := m.Load(); v > old && !m.CompareAndSwap(old, v); old = m.Load() {
		}
	}
	burst := func() (got []Decision, overloaded int) {
		t.Helper()
		start := make(chan struct{})
		var wg sync.WaitGroup
		var mu sync.Mutex
		for range 40 {
			wg.Go(func() {
				<-start
				d, err := f.Pick(PickRequest{Model: "m", Deadline: time.Now().Add(5 * time.Second)})
				for _, s := range f.Replicas() {
					raise(&maxIn, int64(s.Counters.InFlight()))
					raise(&maxPen, int64(s.Counters.Pending()))
				}
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					got = append(got, d)
				case errors.Is(err, route.ErrOverloaded):
					overloaded++
				default:
					t.Errorf("pick: %v", err)
				}
			})
		}
		close(start)
		wg.Wait()
		return got, overloaded
	}
	first, over := burst()
	if len(first) != 3*maxPend || over != 40-3*maxPend {
		t.Fatalf("first burst: %d decisions, %d overloaded; want %d (max_pending)", len(first), over, 3*maxPend)
	}
	for _, d := range first {
		d.Lease.FirstByte()
	}
	second, _ := burst()
	if len(second) != 3*(maxConc-maxPend) {
		t.Fatalf("second burst: %d decisions, want %d (max_concurrency)", len(second), 3*(maxConc-maxPend))
	}
	for _, d := range second {
		d.Lease.FirstByte()
	}
	if third, over := burst(); len(third) != 0 || over != 40 {
		t.Fatalf("full fleet: %d decisions, %d overloaded", len(third), over)
	}
	if maxIn.Load() > maxConc || maxPen.Load() > maxPend {
		t.Fatalf("caps overshot: %d in flight, %d pending", maxIn.Load(), maxPen.Load())
	}
	for _, d := range append(first, second...) {
		f.Done(d, OutcomeOK)
	}
	for _, s := range f.Replicas() {
		if s.Counters.InFlight() != 0 || s.Counters.Pending() != 0 {
			t.Fatalf("%s: %d in flight after every Done", s.ID, s.Counters.InFlight())
		}
	}
	d := pick(t, f)
	f.Done(d, OutcomeOK)
}

// TestNeverRoutesToUnhealthy: a replica failing its probes leaves rotation
// after health.unhealthy_threshold probes and comes back after one pass.
func TestNeverRoutesToUnhealthy(t *testing.T) {
	p := newFakeProber()
	f := start(t, testConfig(3, func(c *config.Config) {
		c.Health.Interval = time.Millisecond
		c.Models[0].Policy = "random"
	}), Options{Prober: p})
	p.setDown("http://10.0.0.2:8000", true) // r1
	waitFor(t, "r1 unhealthy", func() bool { s, _ := f.Snapshot("r1"); return !s.Healthy })
	for range 200 {
		d := pick(t, f)
		if d.Replica == "r1" {
			t.Fatal("routed to the unhealthy r1")
		}
		f.Done(d, OutcomeOK)
	}
	p.setDown("http://10.0.0.2:8000", false)
	waitFor(t, "r1 healthy again", func() bool { s, _ := f.Snapshot("r1"); return s.Healthy })
	waitFor(t, "r1 back in rotation", func() bool {
		d := pick(t, f)
		f.Done(d, OutcomeOK)
		return d.Replica == "r1"
	})
}

// TestEjectionAndReadmission drives passive ejection through Done with a
// controlled clock: three failures eject for ejection_backoff, a repeat
// doubles it up to max_ejection_backoff, and a success after readmission
// resets it.
func TestEjectionAndReadmission(t *testing.T) {
	clk := newClock()
	set := metrics.NewSet()
	f := start(t, testConfig(4, func(c *config.Config) {
		c.Models[0].Policy = "round_robin"
		c.Health.UnhealthyThreshold = 3
		c.Health.EjectionBackoff = 5 * time.Second
		c.Health.MaxEjectionBackoff = 12 * time.Second
	}), Options{Now: clk.Now, Metrics: set})
	fail := func(n int) {
		t.Helper()
		for range n {
			f.Done(pick(t, f, others(f, "r0")...), OutcomeFailed)
		}
	}
	ejected := func(what string, n int, d time.Duration) {
		t.Helper()
		waitFor(t, what, func() bool { s, _ := f.Snapshot("r0"); return s.Ejections == n })
		s, _ := f.Snapshot("r0")
		if got := s.EjectedUntil.Sub(clk.Now()); got != d {
			t.Fatalf("%s: ejected for %v, want %v", what, got, d)
		}
		for range 40 {
			dd := pick(t, f)
			if dd.Replica == "r0" {
				t.Fatalf("%s: routed to the ejected r0", what)
			}
			f.Done(dd, OutcomeOK)
		}
		// Excluding everyone else leaves nobody: r0 is not offered.
		if _, err := f.Pick(PickRequest{Model: "m", Exclude: others(f, "r0"), Deadline: time.Now().Add(time.Second)}); !errors.Is(err, route.ErrNoReplica) {
			t.Fatalf("%s: pick with only r0 left: %v, want route.ErrNoReplica", what, err)
		}
	}
	readmitted := func(d time.Duration) {
		t.Helper()
		clk.Advance(d)
		f.Done(pick(t, f, others(f, "r0")...), OutcomeCancelled) // offered again
	}

	fail(3)
	ejected("first ejection", 1, 5*time.Second)
	readmitted(5 * time.Second)
	fail(3)
	ejected("second ejection doubles", 2, 10*time.Second)
	readmitted(10 * time.Second)
	fail(3)
	ejected("third ejection capped", 3, 12*time.Second)
	readmitted(12 * time.Second)
	f.Done(pick(t, f, others(f, "r0")...), OutcomeOK) // success after readmission
	fail(3)
	ejected("backoff reset by a success", 4, 5*time.Second)
	if got := set.GetOrCreateCounter("inferrail_ejections_total").Get(); got != 4 {
		t.Fatalf("inferrail_ejections_total = %d", got)
	}
}

// TestBudgetKnowsEveryReplicaAtStart: once Start returns, every replica
// counts as healthy in the ejection budget, whether or not its actor has
// run yet, so the first failures of the first replica to start can eject it.
func TestBudgetKnowsEveryReplicaAtStart(t *testing.T) {
	for range 20 {
		f := start(t, testConfig(8, nil), Options{})
		if healthy, ejected := f.st.replicaCfg.Budget.Count("m", time.Now()); healthy != 8 || ejected != 0 {
			t.Fatalf("budget at start: %d healthy, %d ejected; want 8 and 0", healthy, ejected)
		}
		f.Stop()
	}
}

// TestEjectionNeverEmptiesPool: requests that make every engine fail eject
// at most max_ejection_percent (half) of the replicas, and every pick still
// finds one.
func TestEjectionNeverEmptiesPool(t *testing.T) {
	clk := newClock()
	f := start(t, testConfig(4, func(c *config.Config) {
		c.Models[0].Policy = "round_robin"
	}), Options{Now: clk.Now})
	countEjected := func() int {
		n := 0
		for _, s := range f.Replicas() {
			if s.Ejected(clk.Now()) {
				n++
			}
		}
		return n
	}
	for i := range 400 {
		d, err := f.Pick(PickRequest{Model: "m", Deadline: time.Now().Add(5 * time.Second)})
		if err != nil {
			t.Fatalf("pick %d with failing engines: %v", i, err)
		}
		f.Done(d, OutcomeFailed)
		if n := countEjected(); n > 2 {
			t.Fatalf("after %d failures: %d of 4 ejected, max_ejection_percent is 50", i+1, n)
		}
	}
	waitFor(t, "two ejected", func() bool { return countEjected() == 2 })
	// The two left keep failing without being ejected.
	for range 40 {
		d := pick(t, f)
		f.Done(d, OutcomeFailed)
	}
	settle(t, f)
	for _, s := range f.Replicas() {
		if !s.Ejected(clk.Now()) && s.RequestFailures < 3 {
			t.Fatalf("%s: %d consecutive failures counted", s.ID, s.RequestFailures)
		}
	}
	if n := countEjected(); n != 2 {
		t.Fatalf("%d of 4 ejected, want 2", n)
	}
}

// TestPickNeverLate: under many concurrent picks with tight deadlines, no
// decision comes back after its deadline, errors are route.ErrDeadline only, and
// no lease is lost to a timed-out future.
func TestPickNeverLate(t *testing.T) {
	f := start(t, testConfig(8, nil), Options{})
	var late, ok, missed atomic.Int64
	var worst atomic.Int64
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for i := range 400 {
				budget := time.Duration((g*400+i)%300) * time.Microsecond
				dl := time.Now().Add(budget)
				d, err := f.Pick(PickRequest{Model: "m", Deadline: dl})
				back := time.Now()
				switch {
				case err == nil:
					ok.Add(1)
					if back.After(dl) {
						late.Add(1)
						if l := int64(back.Sub(dl)); l > worst.Load() {
							worst.Store(l)
						}
					}
					f.Done(d, OutcomeOK)
				case errors.Is(err, route.ErrDeadline):
					missed.Add(1)
				default:
					t.Errorf("pick: %v", err)
				}
			}
		})
	}
	wg.Wait()
	t.Logf("%d decisions, %d deadline misses, %d decisions observed after their deadline (worst %v)",
		ok.Load(), missed.Load(), late.Load(), time.Duration(worst.Load()))
	// Pick checks the clock after the answer arrives and releases a late
	// one, so a decision is never handed over after its deadline. What the
	// caller observes afterwards can only be off by the few instructions
	// between that check and its own clock read, plus any preemption there:
	// with 16 callers on two busy cores that is several 10 ms scheduler
	// slices at worst, while a Pick that did not check would be late by up
	// to the routing actor's whole queue.
	if time.Duration(worst.Load()) > 50*time.Millisecond {
		t.Fatalf("a decision came back %v after its deadline", time.Duration(worst.Load()))
	}
	if ok.Load() == 0 || missed.Load() == 0 {
		t.Fatalf("%d decisions and %d misses: the deadlines were not tight enough to show anything", ok.Load(), missed.Load())
	}
	for _, s := range f.Replicas() {
		waitFor(t, "leases released", func() bool { return s.Counters.InFlight() == 0 && s.Counters.Pending() == 0 })
	}
}

func TestStopJoinsAndLeasesSurvive(t *testing.T) {
	p := newFakeProber()
	f, err := Start(testConfig(2, func(c *config.Config) { c.Health.Interval = time.Millisecond }), Options{Prober: p})
	if err != nil {
		t.Fatal(err)
	}
	d := pick(t, f)
	f.Stop()
	f.Stop()
	s, _ := f.Snapshot(d.Replica)
	if s.Healthy {
		t.Fatal("a stopped fleet's replica says healthy")
	}
	d.Lease.FirstByte()
	f.Done(d, OutcomeOK)
	if s.Counters.InFlight() != 0 {
		t.Fatal("lease not released after Stop")
	}
	if _, err := f.Pick(PickRequest{Model: "m", Deadline: time.Now().Add(time.Second)}); !errors.Is(err, ErrStopped) {
		t.Fatalf("Pick after Stop: %v", err)
	}
	// goleak in TestMain checks that the probers were joined.
}

// TestFleetActorRestart: the fleet actor panicking respawns every routing
// and replica actor with the same handles, so counters survive.
func TestFleetActorRestart(t *testing.T) {
	f := start(t, testConfig(2, nil), Options{})
	d := pick(t, f)
	s0, _ := f.Snapshot(d.Replica)
	f.sys.Root.Send(f.pid, &crash{})
	// protoactor answers Touch once the restarted incarnation processes it.
	if err := f.sys.Root.RequestFuture(f.pid, &actor.Touch{}, 5*time.Second).Wait(); err != nil {
		t.Fatalf("fleet actor not back: %v", err)
	}
	waitFor(t, "picks after the restart", func() bool {
		d2, err := f.Pick(PickRequest{Model: "m", Deadline: time.Now().Add(time.Second)})
		if err != nil {
			return false
		}
		f.Done(d2, OutcomeOK)
		s, _ := f.Snapshot(d.Replica)
		return s.Counters == s0.Counters
	})
	if s, _ := f.Snapshot(d.Replica); s.Counters.InFlight() != 1 {
		t.Fatalf("%s: %d in flight after the restart, want the 1 lease held", d.Replica, s.Counters.InFlight())
	}
	f.Done(d, OutcomeOK)
}

func TestStartErrors(t *testing.T) {
	f := func(what string, edit func(*config.Config), opts Options, want error) {
		t.Helper()
		fl, err := Start(testConfig(1, edit), opts)
		if err == nil {
			fl.Stop()
			t.Fatalf("%s: started", what)
		}
		if want != nil && !errors.Is(err, want) {
			t.Fatalf("%s: %v, want %v", what, err, want)
		}
		t.Logf("%s: %v", what, err)
	}
	f("split with an unknown policy", func(c *config.Config) { c.Models[0].Split = map[string]int{"random": 50, "fastest": 50} }, Options{}, nil)
	f("split not summing to 100", func(c *config.Config) { c.Models[0].Split = map[string]int{"random": 50, "p2c": 60} }, Options{}, nil)
	f("unknown policy", func(c *config.Config) { c.Routing.DefaultPolicy = "fastest" }, Options{}, nil)
	f("dns without resolver", func(c *config.Config) {
		c.Discovery.DNS = []config.DNSGroup{{Name: "g", URL: "http://vllm:8000", Models: []string{"m"}, Refresh: time.Second}}
	}, Options{}, nil)
	f("no models", func(c *config.Config) { c.Models = nil }, Options{}, nil)

	// A single-arm split is that policy.
	fl := start(t, testConfig(1, func(c *config.Config) { c.Routing.Split = map[string]int{"p2c": 100} }), Options{})
	if d := pick(t, fl); d.Policy != "p2c" {
		t.Fatalf("policy %q", d.Policy)
	} else {
		fl.Done(d, OutcomeOK)
	}
}

// TestSnapshotsShareCounters checks the published snapshot's contract: the
// Counters are the live ones, the rest does not change.
func TestSnapshotsShareCounters(t *testing.T) {
	f := start(t, testConfig(1, nil), Options{})
	before, _ := f.Snapshot("r0")
	d := pick(t, f)
	after, _ := f.Snapshot("r0")
	if before.Counters != after.Counters || before.Counters.InFlight() != 1 {
		t.Fatal("snapshots do not share the live counters")
	}
	f.Done(d, OutcomeOK)
}

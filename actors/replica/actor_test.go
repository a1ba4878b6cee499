package replica

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
)

var errDown = errors.New("connection refused")

func TestProbesDecideHealth(t *testing.T) {
	h := newHarness(t)
	p := newScriptProber()
	hd := NewHandle("r0", "http://10.0.0.1:8000", []string{"m"}, NewCounters(0, 0))
	h.spawn(hd, Config{Health: testHealth(), Prober: p})

	snap := func() *Snapshot { return hd.Snapshot() }
	if !snap().Healthy {
		t.Fatal("a new replica starts unhealthy")
	}
	p.next(t, nil)
	for i := 1; i <= 2; i++ {
		p.next(t, errDown)
		waitFor(t, fmt.Sprintf("failure %d counted", i), func() bool { return snap().ProbeFailures == i })
		if !snap().Healthy {
			t.Fatalf("unhealthy after %d failed probes; threshold is 3", i)
		}
	}
	p.next(t, errDown)
	waitFor(t, "unhealthy after 3 failed probes", func() bool { return !snap().Healthy })
	p.next(t, errDown)
	p.next(t, nil)
	waitFor(t, "healthy after one passing probe", func() bool { return snap().Healthy && snap().ProbeFailures == 0 })

	// A passing probe in the middle resets the streak.
	p.next(t, errDown)
	p.next(t, errDown)
	p.next(t, nil)
	p.next(t, errDown)
	p.next(t, errDown)
	waitFor(t, "two failures counted", func() bool { return snap().ProbeFailures == 2 })
	if !snap().Healthy {
		t.Fatal("unhealthy without 3 consecutive failures")
	}
}

func TestProbesFetchCards(t *testing.T) {
	h := newHarness(t)
	p := newScriptProber()
	hd := NewHandle("r0", "http://10.0.0.1:8000", []string{"m"}, NewCounters(0, 0))
	h.spawn(hd, Config{Health: testHealth(), Prober: p})

	// Cards are asked for until a passing probe brings them.
	for range 2 {
		if !p.next(t, errDown) {
			t.Fatal("cards not asked for before any passing probe")
		}
	}
	if !p.next(t, nil) {
		t.Fatal("cards not asked for on the first passing probe")
	}
	waitFor(t, "cards published", func() bool { return hd.Snapshot().Cards["m"] != nil })
	if got := string(hd.Snapshot().Cards["m"]); got != `{"id":"m","object":"model"}` {
		t.Fatalf("card %s", got)
	}
	var asked []int
	for i := 1; i <= 25; i++ {
		if p.next(t, nil) {
			asked = append(asked, i)
		}
	}
	if fmt.Sprint(asked) != "[10 20]" {
		t.Fatalf("cards asked for on passing probes %v after the first fetch, want [10 20]", asked)
	}
}

func TestEjectionBackoffDoubles(t *testing.T) {
	h := newHarness(t)
	clk := newClock()
	budget := NewBudget(50)
	set := metrics.NewSet()
	m := NewMetrics(set)
	// A second healthy member lets the budget spare this one.
	budget.Join("other", []string{"m"})
	hd := NewHandle("r0", "http://10.0.0.1:8000", []string{"m"}, NewCounters(0, 0))
	pid := h.spawn(hd, Config{Health: testHealth(), Budget: budget, Now: clk.Now, Metrics: m})

	fail := func(n int) {
		for range n {
			h.send(pid, &RequestDone{Outcome: OutcomeFailed})
		}
	}
	ejectedFor := func(what string, n int, d time.Duration) {
		t.Helper()
		waitFor(t, what, func() bool { return hd.Snapshot().Ejections == n })
		s := hd.Snapshot()
		if got := s.EjectedUntil.Sub(clk.Now()); got != d {
			t.Fatalf("%s: ejected for %v, want %v", what, got, d)
		}
		if !s.Ejected(clk.Now()) || s.Ejected(clk.Now().Add(d)) {
			t.Fatalf("%s: Ejected wrong around %v", what, s.EjectedUntil)
		}
	}

	fail(2)
	h.sync(t, pid)
	if n := hd.Snapshot().RequestFailures; n != 2 {
		t.Fatalf("%d failures counted, want 2", n)
	}
	if hd.Snapshot().Ejections != 0 {
		t.Fatal("ejected below the threshold")
	}
	h.send(pid, &RequestDone{Outcome: OutcomeCancelled}) // says nothing
	fail(1)
	ejectedFor("first ejection", 1, 5*time.Second)

	// Failures of attempts made before the ejection do not count.
	fail(5)
	h.sync(t, pid)
	if hd.Snapshot().RequestFailures != 0 {
		t.Fatal("failures counted while ejected")
	}
	clk.Advance(5 * time.Second)
	fail(3)
	ejectedFor("second ejection doubles", 2, 10*time.Second)
	clk.Advance(10 * time.Second)
	fail(3)
	ejectedFor("third ejection doubles", 3, 20*time.Second)
	clk.Advance(20 * time.Second)
	fail(3)
	ejectedFor("capped at max_ejection_backoff", 4, 20*time.Second)

	// A success after readmission resets the backoff.
	clk.Advance(20 * time.Second)
	h.send(pid, &RequestDone{Outcome: OutcomeOK})
	h.sync(t, pid)
	fail(3)
	ejectedFor("backoff reset by a success", 5, 5*time.Second)

	// A success during an ejection does not.
	h.send(pid, &RequestDone{Outcome: OutcomeOK})
	h.sync(t, pid)
	clk.Advance(5 * time.Second)
	fail(3)
	ejectedFor("success while ejected does not reset", 6, 10*time.Second)

	if got := m.Ejections.Get(); got != 6 {
		t.Fatalf("inferrail_ejections_total = %d, want 6", got)
	}
}

// TestEjectionBudgetSharedByActors has every replica of a model fail every
// request: at most half are ejected at once, and the ones left keep serving.
func TestEjectionBudgetSharedByActors(t *testing.T) {
	h := newHarness(t)
	clk := newClock()
	budget := NewBudget(50)
	cfg := Config{Health: testHealth(), Budget: budget, Now: clk.Now}
	var hds []*Handle
	for i := range 5 {
		hd := NewHandle(fmt.Sprint("r", i), "http://10.0.0.1:8000", []string{"m"}, NewCounters(0, 0))
		pid := h.spawn(hd, cfg)
		hds = append(hds, hd)
		for range 10 {
			h.send(pid, &RequestDone{Outcome: OutcomeFailed})
		}
	}
	ejected := func() int {
		n := 0
		for _, hd := range hds {
			if hd.Snapshot().Ejected(clk.Now()) {
				n++
			}
		}
		return n
	}
	waitFor(t, "two ejected", func() bool { return ejected() == 2 })
	waitFor(t, "the other failures counted", func() bool {
		n := 0
		for _, hd := range hds {
			if hd.Snapshot().RequestFailures > 0 {
				n++
			}
		}
		return n == 3
	})
	if n := ejected(); n != 2 {
		t.Fatalf("%d of 5 ejected at 50%%, want 2", n)
	}
	if hl, e := budget.Count("m", clk.Now()); hl != 5 || e != 2 {
		t.Fatalf("budget: %d healthy, %d ejected", hl, e)
	}
}

func TestRestartAfterPanicKeepsCounters(t *testing.T) {
	h := newHarness(t)
	clk := newClock()
	budget := NewBudget(100)
	set := metrics.NewSet()
	m := NewMetrics(set)
	p := newScriptProber()
	c := NewCounters(10, 0)
	hd := NewHandle("r0", "http://10.0.0.1:8000", []string{"m"}, c)
	pid := h.spawn(hd, Config{Health: testHealth(), Prober: p, Budget: budget, Now: clk.Now, Metrics: m})

	p.next(t, nil) // cards
	waitFor(t, "cards", func() bool { return hd.Snapshot().Cards != nil })
	lease, ok := c.TryAcquire()
	if !ok {
		t.Fatal("no room")
	}
	for range 3 {
		h.send(pid, &RequestDone{Outcome: OutcomeFailed})
	}
	waitFor(t, "ejected", func() bool { return hd.Snapshot().Ejected(clk.Now()) })

	h.send(pid, &crash{})
	waitFor(t, "restart counted", func() bool { return hd.Snapshot().Restarts == 1 })
	waitFor(t, "fresh after restart", func() bool {
		s := hd.Snapshot()
		return s.Healthy && !s.Ejected(clk.Now()) && s.Ejections == 0 && s.RequestFailures == 0
	})
	s := hd.Snapshot()
	if s.Counters != c || c.InFlight() != 1 || c.Pending() != 1 {
		t.Fatalf("counters not kept: same %v, %d in flight, %d pending", s.Counters == c, c.InFlight(), c.Pending())
	}
	if s.Cards == nil {
		t.Fatal("cards dropped by the restart")
	}
	if got := m.Restarts.Get(); got != 1 {
		t.Fatalf("inferrail_replica_restarts_total = %d", got)
	}
	if _, e := budget.Count("m", clk.Now()); e != 0 {
		t.Fatalf("budget still counts %d ejected after the restart", e)
	}

	// The new incarnation probes with a new prober; the old one is gone
	// (goleak checks at the end), and the new one works.
	p.next(t, errDown)
	waitFor(t, "new prober's result counted", func() bool { return hd.Snapshot().ProbeFailures == 1 })

	// The lease taken before the panic still gives its slots back.
	lease.Release()
	if c.InFlight() != 0 || c.Pending() != 0 {
		t.Fatalf("%d in flight, %d pending after release", c.InFlight(), c.Pending())
	}

	// And the actor still counts outcomes.
	h.send(pid, &RequestDone{Outcome: OutcomeFailed})
	waitFor(t, "outcome counted after restart", func() bool { return hd.Snapshot().RequestFailures == 1 })
}

func TestStoppedReplica(t *testing.T) {
	h := newHarness(t)
	budget := NewBudget(50)
	c := NewCounters(0, 0)
	hd := NewHandle("r0", "http://10.0.0.1:8000", []string{"m"}, c)
	pid := h.spawn(hd, Config{Health: testHealth(), Prober: newScriptProber(), Budget: budget})
	lease, _ := c.TryAcquire()
	waitFor(t, "joined the budget", func() bool { hl, _ := budget.Count("m", time.Now()); return hl == 1 })

	if err := h.sys.Root.StopFuture(pid).Wait(); err != nil {
		t.Fatal(err)
	}
	if hd.Snapshot().Healthy {
		t.Fatal("a stopped replica still says healthy")
	}
	if hl, _ := budget.Count("m", time.Now()); hl != 0 {
		t.Fatal("a stopped replica is still in the budget")
	}
	// Late messages go nowhere, quietly; leases still work.
	h.send(pid, &RequestDone{Outcome: OutcomeFailed})
	lease.FirstByte()
	lease.Release()
	if c.InFlight() != 0 || c.Pending() != 0 {
		t.Fatalf("%d in flight, %d pending", c.InFlight(), c.Pending())
	}
}

// TestWarningsSurvivePublish: a warning raised from outside the actor (the
// request path raises the tokenizer's) stays on every snapshot the actor
// publishes afterwards.
func TestWarningsSurvivePublish(t *testing.T) {
	h := newHarness(t)
	p := newScriptProber()
	hd := NewHandle("r0", "http://10.0.0.1:8000", []string{"m"}, NewCounters(0, 0))
	h.spawn(hd, Config{Health: testHealth(), Prober: p})
	hd.Snapshot().Warnings.Raise(nil, time.Now(), WarnTokenizerMismatch, "counts differ")
	for i := 1; i <= 2; i++ {
		p.next(t, errDown)
		waitFor(t, fmt.Sprintf("failure %d published", i), func() bool { return hd.Snapshot().ProbeFailures == i })
	}
	if !hd.Snapshot().Warnings.Active(WarnTokenizerMismatch) {
		t.Fatalf("the actor's snapshot lost the warning: %+v", hd.Snapshot().Warnings.List())
	}
}

// The index capacity is kv_capacity_blocks, else the engine's reported
// capacity (bounded), else index.default_capacity_blocks; only the second
// is in the engine's tokens, which CapacityFromEngine tells.
func TestIndexCapacity(t *testing.T) {
	f := func(configured, reported, fallback, want int, fromEngine bool) {
		t.Helper()
		got, engine := indexCapacity(configured, reported, fallback)
		if got != want || engine != fromEngine {
			t.Errorf("indexCapacity(%d, %d, %d) = %d, %v", configured, reported, fallback, got, engine)
		}
		s := &Snapshot{Shadow: &Shadow{}}
		s.Shadow.SetConfiguredCapacity(configured)
		s.Load.KVCapacityBlocks = reported
		if s.CapacityFromEngine() != fromEngine {
			t.Errorf("CapacityFromEngine with %d configured, %d reported: %v", configured, reported, !fromEngine)
		}
	}
	f(100, 5000, 16384, 100, false)
	f(0, 5000, 16384, 5000, true)
	f(0, 1<<30, 16384, maxReportedCapacity, true)
	f(0, 0, 16384, 16384, false)
	f(0, 0, 0, 1, false)
	if (&Snapshot{}).CapacityFromEngine() {
		t.Error("a snapshot without shadow state sized by the engine")
	}
}

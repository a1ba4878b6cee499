package routing

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/inferrail/inferrail/actors/replica"
	"github.com/inferrail/inferrail/model/route"
)

var policies = []string{"round_robin", "random", "least_request", "p2c"}

// TestNeverRoutesToUnavailable builds random fleets, flips health, ejection
// and room at random between picks, and checks every answer: the replica
// serves the model, passes its health checks, is not ejected, was not
// excluded, had room, and the answer is an error only when no replica
// qualified.
func TestNeverRoutesToUnavailable(t *testing.T) {
	sys := newSystem(t)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	rng := rand.New(rand.NewPCG(11, 11))
	for _, name := range policies {
		for fleet := 0; fleet < 15; fleet++ {
			n := 1 + rng.IntN(12)
			fakes := make([]*fakeReplica, n)
			reps := make([]Replica, n)
			for i := range fakes {
				models := []string{"m"}
				switch rng.IntN(4) {
				case 0:
					models = []string{"other"}
				case 1:
					models = []string{"other", "m"}
				}
				fakes[i] = newFake(fmt.Sprint("r", i), models, replica.NewCounters(1+rng.IntN(3), 0))
				reps[i] = fakes[i]
			}
			pid := spawn(t, sys, "m", name, rng.Uint64(), clock, reps...)
			var leases []*replica.Lease
			for pick := 0; pick < 60; pick++ {
				// Flip state between picks: the actor decides on a stable view.
				for _, f := range fakes {
					if rng.IntN(3) == 0 {
						f.set(func(s *replica.Snapshot) {
							s.Healthy = rng.IntN(4) != 0
							s.EjectedUntil = time.Time{}
							if rng.IntN(4) == 0 {
								s.EjectedUntil = now.Add(time.Second)
							}
						})
					}
				}
				if len(leases) > 0 && rng.IntN(2) == 0 {
					k := rng.IntN(len(leases))
					leases[k].Release()
					leases = append(leases[:k], leases[k+1:]...)
				}
				var exclude []string
				for _, f := range fakes {
					if rng.IntN(6) == 0 {
						exclude = append(exclude, f.Snapshot().ID)
					}
				}
				// What qualifies, ejected or not.
				ok := func(s *replica.Snapshot, ejected bool) bool {
					excluded := false
					for _, x := range exclude {
						excluded = excluded || x == s.ID
					}
					return s.Healthy && s.Serves("m") && !excluded && s.Ejected(now) == ejected
				}
				var live, liveRoom, ejectedLive, liveAll int
				for _, f := range fakes {
					s := f.Snapshot()
					if s.Healthy && s.Serves("m") && !s.Ejected(now) {
						liveAll++ // tried or not
					}
					if ok(s, false) {
						live++
						if s.Counters.HasRoom() {
							liveRoom++
						}
					}
					if ok(s, true) {
						ejectedLive++
					}
				}
				got := ask(t, sys, pid, &Pick{Exclude: exclude})
				if got.Policy != name {
					t.Fatalf("policy %q, want %q", got.Policy, name)
				}
				if got.Err != nil {
					switch {
					case live > 0 && liveRoom > 0:
						t.Fatalf("%s: %v with %d available replicas", name, got.Err, liveRoom)
					case live == 0 && (liveAll > 0 || ejectedLive == 0) && !errors.Is(got.Err, route.ErrNoReplica):
						t.Fatalf("%s: %v with no qualifying replica, want route.ErrNoReplica", name, got.Err)
					case live > 0 && !errors.Is(got.Err, route.ErrOverloaded):
						t.Fatalf("%s: %v with every qualifying replica full, want route.ErrOverloaded", name, got.Err)
					}
					continue
				}
				s := got.Replica
				// The pool-never-empties fallback may pick an ejected replica,
				// but only when every healthy one is ejected.
				if !ok(s, false) && !(liveAll == 0 && ok(s, true)) {
					t.Fatalf("%s: routed to %+v (exclude %v, live %d)", name, s, exclude, live)
				}
				leases = append(leases, got.Lease)
			}
			for _, l := range leases {
				l.Release()
			}
			for _, f := range fakes {
				if c := f.Snapshot().Counters; c.InFlight() != 0 || c.Pending() != 0 {
					t.Fatalf("%s: leases not given back: %d in flight", name, c.InFlight())
				}
			}
		}
	}
}

func TestPickErrors(t *testing.T) {
	sys := newSystem(t)
	a := newFake("a", []string{"m"}, replica.NewCounters(1, 0))
	b := newFake("b", []string{"m"}, replica.NewCounters(1, 0))
	c := newFake("c", []string{"n"}, replica.NewCounters(0, 0))
	pid := spawn(t, sys, "m", "least_request", 1, nil, a, b, c)

	want := func(what string, m *Pick, err error) *Picked {
		t.Helper()
		got := ask(t, sys, pid, m)
		if !errors.Is(got.Err, err) {
			t.Fatalf("%s: %v, want %v", what, got.Err, err)
		}
		return got
	}
	want("all excluded", &Pick{Exclude: []string{"a", "b"}}, route.ErrNoReplica)
	l1 := want("first", &Pick{}, nil).Lease
	l2 := want("second", &Pick{}, nil).Lease
	want("both full", &Pick{}, route.ErrOverloaded)
	want("full or tried", &Pick{Exclude: []string{"a"}}, route.ErrOverloaded)
	l1.Release()
	l2.Release()
	a.set(func(s *replica.Snapshot) { s.Healthy = false })
	b.set(func(s *replica.Snapshot) { s.Healthy = false })
	want("none healthy", &Pick{}, route.ErrNoReplica)
	want("deadline passed", &Pick{Deadline: time.Now().Add(-time.Millisecond)}, route.ErrDeadline)
}

// TestAbandonedPickReleasesLease: an asker that gave up before the actor
// answered never gets an answer, and the actor gives the lease back.
func TestAbandonedPickReleasesLease(t *testing.T) {
	sys := newSystem(t)
	c := replica.NewCounters(0, 0)
	pid := spawn(t, sys, "m", "random", 1, nil, newFake("a", []string{"m"}, c))
	m := &Pick{Deadline: time.Now().Add(time.Minute)}
	if !m.Abandon() {
		t.Fatal("Abandon before sending reported an answer")
	}
	fut := sys.Root.RequestFuture(pid, m, 100*time.Millisecond)
	barrier(t, sys, pid)
	if c.InFlight() != 0 || c.Pending() != 0 {
		t.Fatalf("abandoned pick kept a lease: %d in flight", c.InFlight())
	}
	if m.Answer() != nil {
		t.Fatal("abandoned pick has an answer")
	}
	if err := fut.Wait(); err == nil {
		t.Fatal("abandoned pick was answered")
	}

	// Answered first: Abandon reports false and Answer holds the lease.
	m = &Pick{Deadline: time.Now().Add(time.Minute)}
	if err := sys.Root.RequestFuture(pid, m, 5*time.Second).Wait(); err != nil {
		t.Fatal(err)
	}
	if m.Abandon() {
		t.Fatal("Abandon after the answer reported none")
	}
	got := m.Answer()
	if got == nil || got.Lease == nil || c.InFlight() != 1 {
		t.Fatalf("answer %+v, %d in flight", got, c.InFlight())
	}
	got.Lease.Release()
}

// TestPanicFallback: when health changes leave every healthy replica
// ejected, the ejected ones are offered rather than nothing.
func TestPanicFallback(t *testing.T) {
	sys := newSystem(t)
	now := time.Now()
	a := newFake("a", []string{"m"}, replica.NewCounters(0, 0))
	b := newFake("b", []string{"m"}, replica.NewCounters(0, 0))
	a.set(func(s *replica.Snapshot) { s.EjectedUntil = now.Add(time.Hour) })
	pid := spawn(t, sys, "m", "random", 1, func() time.Time { return now }, a, b)
	for range 20 {
		got := ask(t, sys, pid, &Pick{})
		if got.Err != nil || got.Replica.ID != "b" {
			t.Fatalf("got %+v, want b while it is in rotation", got)
		}
		got.Lease.Release()
	}
	// Having tried b is not a reason to go to the ejected a.
	b.set(func(s *replica.Snapshot) { s.Healthy = true })
	if got := ask(t, sys, pid, &Pick{Exclude: []string{"b"}}); !errors.Is(got.Err, route.ErrNoReplica) {
		t.Fatalf("got %+v with b tried, want route.ErrNoReplica", got)
	}
	b.set(func(s *replica.Snapshot) { s.Healthy = false })
	got := ask(t, sys, pid, &Pick{})
	if got.Err != nil || got.Replica.ID != "a" {
		t.Fatalf("got %+v, want the ejected a rather than nothing", got)
	}
	got.Lease.Release()
}

// TestModelsRaceForSharedReplicas runs two models' routing actors over the
// same capped replicas from many goroutines at once, holding leases: the
// caps are never overshot, and a full fleet answers route.ErrOverloaded.
// Each goroutine first takes three leases and waits for every other to
// have taken theirs (48 asks for 24 slots), so the fleet fills whatever the
// scheduler does: a decision is handled on its caller's goroutine
// (mailbox.Inline) and never blocks, so without that step a goroutine
// could run its whole loop before the next one started.
func TestModelsRaceForSharedReplicas(t *testing.T) {
	sys := newSystem(t)
	const reps, maxConc, maxPend = 4, 6, 4
	var shared []Replica
	var counters []*replica.Counters
	for i := range reps {
		c := replica.NewCounters(maxConc, maxPend)
		counters = append(counters, c)
		shared = append(shared, newFake(fmt.Sprint("r", i), []string{"m", "n"}, c))
	}
	pm := spawn(t, sys, "m", "least_request", 1, nil, shared...)
	pn := spawn(t, sys, "n", "p2c", 2, nil, shared...)

	var maxIn, maxPen, overloaded atomic.Int64
	raise := func(m *atomic.Int64, v int64) {
		for old := m.Load(); v > old && !m.CompareAndSwap(old, v); old = m.Load() {
		}
	}
	start := make(chan struct{})
	var wg, filled sync.WaitGroup
	const goroutines, first = 16, 3
	filled.Add(goroutines)
	for g := range goroutines {
		wg.Go(func() {
			took := sync.OnceFunc(filled.Done)
			defer took() // a goroutine that fails early holds no one up
			<-start
			rng := rand.New(rand.NewPCG(uint64(g), 3))
			var held []*replica.Lease
			for i := range 200 {
				if i == first {
					took()
					filled.Wait()
				}
				pid := pm
				if g%2 == 1 {
					pid = pn
				}
				got := ask(t, sys, pid, &Pick{})
				switch {
				case errors.Is(got.Err, route.ErrOverloaded):
					overloaded.Add(1)
				case got.Err != nil:
					t.Errorf("pick: %v", got.Err)
					return
				default:
					if rng.IntN(3) == 0 {
						got.Lease.FirstByte()
					}
					held = append(held, got.Lease)
				}
				for _, c := range counters {
					raise(&maxIn, int64(c.InFlight()))
					raise(&maxPen, int64(c.Pending()))
				}
				if i >= first && (len(held) > 4 || (len(held) > 0 && rng.IntN(3) == 0)) {
					held[0].Release()
					held = held[1:]
				}
			}
			for _, l := range held {
				l.Release()
			}
		})
	}
	close(start)
	wg.Wait()
	t.Logf("max in flight %d, max pending %d, %d overloaded answers", maxIn.Load(), maxPen.Load(), overloaded.Load())
	if maxIn.Load() > maxConc || maxPen.Load() > maxPend {
		t.Fatalf("caps overshot: %d in flight (cap %d), %d pending (cap %d)", maxIn.Load(), maxConc, maxPen.Load(), maxPend)
	}
	if overloaded.Load() == 0 {
		t.Fatal("the fleet never filled; the test shows nothing")
	}
	for i, c := range counters {
		if c.InFlight() != 0 || c.Pending() != 0 {
			t.Fatalf("r%d: %d in flight, %d pending after every release", i, c.InFlight(), c.Pending())
		}
	}
}

// TestRestartKeepsReplicas: a routing actor that panics is restarted with
// its replicas, policy and random source.
func TestRestartKeepsReplicas(t *testing.T) {
	sys := newSystem(t)
	pid := spawn(t, sys, "m", "round_robin", 1, nil, newFake("a", []string{"m"}, replica.NewCounters(0, 0)))
	sys.Root.Send(pid, &crash{})
	got := ask(t, sys, pid, &Pick{})
	if got.Err != nil || got.Replica.ID != "a" {
		t.Fatalf("after restart: %+v", got)
	}
	got.Lease.Release()
}

// TestConcurrentFlips races health, ejection and membership flips against
// picks: whatever the interleaving, a pick goes to a replica serving the
// model, and the race detector sees no shared state outside the snapshots.
func TestConcurrentFlips(t *testing.T) {
	sys := newSystem(t)
	now := time.Now()
	var fakes []*fakeReplica
	var reps []Replica
	for i := range 8 {
		models := []string{"m"}
		if i%3 == 0 {
			models = []string{"n"}
		}
		f := newFake(fmt.Sprint("r", i), models, replica.NewCounters(4, 0))
		fakes = append(fakes, f)
		reps = append(reps, f)
	}
	pid := spawn(t, sys, "m", "p2c", 5, func() time.Time { return now }, reps...)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		rng := rand.New(rand.NewPCG(9, 9))
		for {
			select {
			case <-stop:
				return
			default:
			}
			f := fakes[rng.IntN(len(fakes))]
			f.set(func(s *replica.Snapshot) {
				s.Healthy = rng.IntN(3) != 0
				s.EjectedUntil = time.Time{}
				if rng.IntN(5) == 0 {
					s.EjectedUntil = now.Add(time.Second)
				}
			})
			if rng.IntN(50) == 0 {
				k := 1 + rng.IntN(len(reps))
				sys.Root.Send(pid, &ReplicasChanged{Replicas: append([]Replica(nil), reps[:k]...)})
			}
		}
	})
	for range 2000 {
		got := ask(t, sys, pid, &Pick{})
		if got.Err != nil {
			continue
		}
		if !got.Replica.Serves("m") || !got.Replica.Healthy {
			t.Fatalf("routed to %+v", got.Replica)
		}
		got.Lease.Release()
	}
	close(stop)
	wg.Wait()
}

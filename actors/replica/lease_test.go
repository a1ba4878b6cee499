package replica

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
)

func TestTryAcquireCaps(t *testing.T) {
	f := func(maxConc, maxPend, firstBytes, want int) {
		t.Helper()
		c := NewCounters(maxConc, maxPend)
		got := 0
		for range 100 {
			l, ok := c.TryAcquire()
			if !ok {
				continue
			}
			got++
			if got <= firstBytes {
				l.FirstByte()
			}
		}
		if got != want {
			t.Fatalf("caps %d/%d with %d first bytes: acquired %d, want %d", maxConc, maxPend, firstBytes, got, want)
		}
	}
	f(0, 0, 0, 100) // no caps
	f(5, 0, 0, 5)
	f(5, 3, 0, 3)   // pending caps first
	f(5, 3, 2, 5)   // two heads arrived: room up to max_concurrency
	f(5, 3, 5, 5)   //
	f(0, 4, 10, 14) // only pending capped: 10 answered plus 4 waiting
}

func TestLeaseGivesBackOnce(t *testing.T) {
	c := NewCounters(0, 0)
	l, _ := c.TryAcquire()
	if c.InFlight() != 1 || c.Pending() != 1 {
		t.Fatalf("after acquire: %d in flight, %d pending", c.InFlight(), c.Pending())
	}
	l.FirstByte()
	l.FirstByte()
	if c.InFlight() != 1 || c.Pending() != 0 {
		t.Fatalf("after first byte: %d in flight, %d pending", c.InFlight(), c.Pending())
	}
	l.Release()
	l.Release()
	l.FirstByte()
	if c.InFlight() != 0 || c.Pending() != 0 {
		t.Fatalf("after release: %d in flight, %d pending", c.InFlight(), c.Pending())
	}

	// Released without a response head: both slots come back.
	l, _ = c.TryAcquire()
	l.Release()
	l.FirstByte()
	if c.InFlight() != 0 || c.Pending() != 0 {
		t.Fatalf("release without head: %d in flight, %d pending", c.InFlight(), c.Pending())
	}
}

// TestLeaseRacingCalls races FirstByte and Release on the same leases from
// many goroutines: each slot must come back exactly once.
func TestLeaseRacingCalls(t *testing.T) {
	c := NewCounters(0, 0)
	const leases = 2000
	ls := make([]*Lease, leases)
	for i := range ls {
		ls[i], _ = c.TryAcquire()
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i, l := range ls {
				if (i+g)%2 == 0 {
					l.FirstByte()
				} else {
					l.Release()
				}
			}
		})
	}
	wg.Wait()
	if c.InFlight() != 0 || c.Pending() != 0 {
		t.Fatalf("after racing calls: %d in flight, %d pending", c.InFlight(), c.Pending())
	}
}

// TestCountersNeverOvershoot hammers one replica's counters from many
// goroutines: acquire, sometimes a response head, release. Every count any
// goroutine observes stays within its cap, pending never exceeds in flight,
// and the counts end at zero.
func TestCountersNeverOvershoot(t *testing.T) {
	for _, caps := range [][2]int64{{8, 5}, {8, 0}, {0, 5}} {
		t.Run(fmt.Sprintf("max_concurrency=%d,max_pending=%d", caps[0], caps[1]), func(t *testing.T) {
			testOvershoot(t, caps[0], caps[1])
		})
	}
}

func testOvershoot(t *testing.T, maxConc, maxPend int64) {
	c := NewCounters(int(maxConc), int(maxPend))
	var maxIn, maxPen, acquired, refused atomic.Int64
	raise := func(m *atomic.Int64, v int64) {
		for {
			old := m.Load()
			if v <= old || m.CompareAndSwap(old, v) {
				return
			}
		}
	}
	var wg sync.WaitGroup
	for g := range 32 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			var held []*Lease // each goroutine holds up to 10 leases at a time, past either cap
			for range 3000 {
				if len(held) == 10 || (len(held) > 0 && rng.IntN(2) == 0) {
					k := rng.IntN(len(held))
					l := held[k]
					held = append(held[:k], held[k+1:]...)
					if rng.IntN(2) == 0 {
						l.FirstByte()
					}
					l.Release()
					continue
				}
				l, ok := c.TryAcquire()
				if !ok {
					refused.Add(1)
					continue
				}
				acquired.Add(1)
				raise(&maxIn, int64(c.InFlight()))
				raise(&maxPen, int64(c.Pending()))
				if rng.IntN(3) == 0 {
					l.FirstByte()
				}
				held = append(held, l)
			}
			for _, l := range held {
				l.Release()
			}
		})
	}
	wg.Wait()
	t.Logf("acquired %d, refused %d, max in flight %d, max pending %d", acquired.Load(), refused.Load(), maxIn.Load(), maxPen.Load())
	if (maxConc > 0 && maxIn.Load() > maxConc) || (maxPend > 0 && maxPen.Load() > maxPend) {
		t.Fatalf("overshoot: max in flight %d (cap %d), max pending %d (cap %d)", maxIn.Load(), maxConc, maxPen.Load(), maxPend)
	}
	if c.InFlight() != 0 || c.Pending() != 0 {
		t.Fatalf("counts did not return to zero: %d in flight, %d pending", c.InFlight(), c.Pending())
	}
	if refused.Load() == 0 {
		t.Fatal("the caps were never reached; the test shows nothing")
	}
}

// TestCountersExactUnderLoad holds leases across goroutines: thousands of
// acquisitions, each released by another goroutine, leave the counts exact.
func TestCountersExactUnderLoad(t *testing.T) {
	c := NewCounters(0, 0)
	leases := make(chan *Lease, 256)
	var wg, rel sync.WaitGroup
	for range 4 {
		rel.Go(func() {
			for l := range leases {
				l.FirstByte()
				l.Release()
			}
		})
	}
	for range 8 {
		wg.Go(func() {
			for range 2500 {
				l, ok := c.TryAcquire()
				if !ok {
					t.Error("uncapped counters refused")
					return
				}
				leases <- l
			}
		})
	}
	wg.Wait()
	close(leases)
	rel.Wait()
	if c.InFlight() != 0 || c.Pending() != 0 {
		t.Fatalf("%d in flight, %d pending after every release", c.InFlight(), c.Pending())
	}
}

// Sink keeps benchmark results alive.
var Sink bool

func BenchmarkTryAcquireRelease(b *testing.B) {
	c := NewCounters(1024, 0)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			l, ok := c.TryAcquire()
			if ok {
				l.FirstByte()
				l.Release()
			}
			Sink = ok
		}
	})
}

package flow_test

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/inferrail/inferrail/model/flow"
)

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func drain(q *flow.Bands[int]) []int {
	var out []int
	for {
		v, ok := q.Pop()
		if !ok {
			return out
		}
		out = append(out, v)
	}
}

func push(t *testing.T, q *flow.Bands[int], p int, key uint64, v int) {
	t.Helper()
	if _, _, ok := q.Push(p, key, v, t0); !ok {
		t.Fatalf("push %d refused", v)
	}
}

func TestStrictFIFO(t *testing.T) {
	q := flow.NewBands[int](flow.Options{Max: 10})
	for i := range 5 {
		// One logical queue across flows: arrival order.
		push(t, q, 0, uint64(i%2), i)
	}
	if got, want := drain(q), []int{0, 1, 2, 3, 4}; !slices.Equal(got, want) {
		t.Errorf("order = %v, want %v", got, want)
	}
}

func TestBounded(t *testing.T) {
	q := flow.NewBands[int](flow.Options{Max: 3, Fair: true})
	for i := range 3 {
		push(t, q, 0, uint64(i), i)
	}
	if _, _, ok := q.Push(0, 9, 9, t0); ok || q.Len() != 3 {
		t.Fatalf("a full queue took an item: len %d", q.Len())
	}
	q.Pop()
	push(t, q, 0, 9, 9)
	if _, _, ok := flow.NewBands[int](flow.Options{}).Push(0, 1, 1, t0); !ok {
		t.Error("a queue of Max 0 holds 1")
	}
}

// TestRoundRobin: flows of a band take turns, a new flow joining at the
// end of the round.
func TestRoundRobin(t *testing.T) {
	q := flow.NewBands[int](flow.Options{Max: 100, Fair: true})
	for i := range 6 {
		push(t, q, 0, 1, 10+i)
	}
	push(t, q, 0, 2, 20)
	push(t, q, 0, 2, 21)
	push(t, q, 0, 3, 30)
	want := []int{10, 20, 30, 11, 21, 12, 13, 14, 15}
	if got := drain(q); !slices.Equal(got, want) {
		t.Errorf("order = %v, want %v", got, want)
	}
}

// TestPriority: a higher band always leaves first, whatever arrived
// earlier in a lower one.
func TestPriority(t *testing.T) {
	q := flow.NewBands[int](flow.Options{Max: 100, Fair: true})
	push(t, q, -1, 1, -10)
	push(t, q, 0, 1, 0)
	push(t, q, 5, 2, 50)
	push(t, q, 0, 2, 1)
	push(t, q, 5, 1, 51)
	if q.BandLen(0) != 2 || q.BandLen(5) != 2 || q.BandLen(-1) != 1 || q.BandLen(7) != 0 {
		t.Errorf("band lengths %d %d %d", q.BandLen(5), q.BandLen(0), q.BandLen(-1))
	}
	if got, want := drain(q), []int{50, 51, 0, 1, -10}; !slices.Equal(got, want) {
		t.Errorf("order = %v, want %v", got, want)
	}
}

// TestEDF: earliest deadline first, within a flow and, when strict,
// across flows; equal deadlines by arrival.
func TestEDF(t *testing.T) {
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	q := flow.NewBands[int](flow.Options{Max: 100, EDF: true})
	q.Push(0, 1, 1, at(30))
	q.Push(0, 2, 2, at(10))
	q.Push(0, 1, 3, at(20))
	q.Push(0, 2, 4, at(20))
	if got, want := drain(q), []int{2, 3, 4, 1}; !slices.Equal(got, want) {
		t.Errorf("strict EDF = %v, want %v", got, want)
	}
	q = flow.NewBands[int](flow.Options{Max: 100, EDF: true, Fair: true})
	q.Push(0, 1, 1, at(30))
	q.Push(0, 1, 3, at(20))
	q.Push(0, 2, 2, at(10))
	q.Push(0, 2, 4, at(5))
	// Flows alternate; each flow's earliest leaves on its turn.
	if got, want := drain(q), []int{3, 4, 1, 2}; !slices.Equal(got, want) {
		t.Errorf("fair EDF = %v, want %v", got, want)
	}
}

// TestEvict: a full queue makes room for higher-priority work by evicting
// the newest item of the lowest sheddable band; never a non-negative one,
// never one at or above the newcomer's priority.
func TestEvict(t *testing.T) {
	q := flow.NewBands[int](flow.Options{Max: 3, Evict: true, Fair: true})
	push(t, q, -2, 1, -21)
	push(t, q, -1, 1, -11)
	push(t, q, -2, 2, -22)
	ev, did, ok := q.Push(0, 3, 1, t0)
	if !ok || !did || ev != -22 {
		t.Fatalf("push 0 into a full queue: evicted %d %v %v; want -22, the newest of band -2", ev, did, ok)
	}
	if _, _, ok := q.Push(-2, 1, -23, t0); ok {
		t.Error("band -2 evicted its own peer")
	}
	if ev, _, _ := q.Push(-1, 1, -12, t0); ev != -21 {
		t.Errorf("band -1 evicted %d, want -21", ev)
	}
	if ev, did, ok := q.Push(5, 1, 5, t0); !ok || !did || ev != -12 {
		t.Errorf("band 5 evicted %d %v, want -12", ev, did)
	}
	if ev, did, ok := q.Push(5, 1, 6, t0); !ok || !did || ev != -11 {
		t.Errorf("band 5 evicted %d %v, want -11", ev, did)
	}
	if _, _, ok := q.Push(5, 1, 7, t0); ok {
		t.Error("evicted a non-negative band")
	}
	if got, want := drain(q), []int{5, 6, 1}; !slices.Equal(got, want) {
		t.Errorf("left %v, want %v", got, want)
	}
	nq := flow.NewBands[int](flow.Options{Max: 1})
	push(t, nq, -1, 1, 1)
	if _, _, ok := nq.Push(5, 1, 2, t0); ok {
		t.Error("evicted with Evict off")
	}
}

func TestRemove(t *testing.T) {
	q := flow.NewBands[int](flow.Options{Max: 100, Fair: true})
	push(t, q, 0, 1, 10)
	push(t, q, 0, 1, 11)
	push(t, q, 0, 2, 20)
	if q.Remove(0, 2, 10, false) || q.Remove(1, 1, 10, false) {
		t.Error("removed an item under the wrong key or band")
	}
	if !q.Remove(0, 2, 20, false) || q.Remove(0, 2, 20, false) {
		t.Error("remove 20: want true once")
	}
	// Serving the head whose turn it is passes the turn on.
	push(t, q, 0, 3, 30)
	if !q.Remove(0, 1, 10, true) {
		t.Fatal("remove 10")
	}
	if got, want := drain(q), []int{30, 11}; !slices.Equal(got, want) {
		t.Errorf("order = %v, want %v", got, want)
	}
}

// TestRemoveUnservedKeepsTurn: a head that leaves without being served
// (its wait ended) takes no turn from its flow: the flow's next item is
// still next.
func TestRemoveUnservedKeepsTurn(t *testing.T) {
	q := flow.NewBands[int](flow.Options{Max: 100, Fair: true})
	push(t, q, 0, 1, 10)
	push(t, q, 0, 1, 11)
	push(t, q, 0, 2, 20)
	if v, _ := q.Peek(); v != 10 {
		t.Fatalf("head %d, want 10", v)
	}
	if !q.Remove(0, 1, 10, false) {
		t.Fatal("remove 10")
	}
	if got, want := drain(q), []int{11, 20}; !slices.Equal(got, want) {
		t.Errorf("order = %v, want %v: the expired head took its flow's turn", got, want)
	}
}

// TestProperty checks random pushes, pops and removals in random bands
// and under random options: the bound, the length, strict priority, and
// arrival order within a flow under FCFS (across a band, when strict).
func TestProperty(t *testing.T) {
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 7))
		o := flow.Options{Max: 1 + rng.IntN(8), Fair: seed%2 == 0, Evict: seed%3 == 0}
		q := flow.NewBands[int](o)
		type where struct {
			p   int
			key uint64
		}
		at := map[int]where{}
		var order []int // arrival order of items present
		gone := func(v int) {
			delete(at, v)
			order = slices.DeleteFunc(order, func(x int) bool { return x == v })
		}
		for step := range 300 {
			switch op := rng.IntN(10); {
			case op < 5:
				w := where{p: rng.IntN(4) - 2, key: uint64(rng.IntN(3))}
				ev, did, ok := q.Push(w.p, w.key, step, t0)
				if !ok && len(at) < o.Max || ok && !did && len(at) >= o.Max {
					t.Fatalf("seed %d: push with %d of %d: ok %v evicted %v", seed, len(at), o.Max, ok, did)
				}
				if did {
					if e, in := at[ev]; !in || e.p >= 0 || e.p >= w.p {
						t.Fatalf("seed %d: evicted %d from band %d for band %d", seed, ev, e.p, w.p)
					}
					gone(ev)
				}
				if ok {
					at[step] = w
					order = append(order, step)
				}
			case op < 8:
				v, ok := q.Pop()
				if ok != (len(at) > 0) {
					t.Fatalf("seed %d: pop on %d items: %v", seed, len(at), ok)
				}
				if !ok {
					continue
				}
				w, in := at[v]
				if !in {
					t.Fatalf("seed %d: popped %d, never pushed or gone", seed, v)
				}
				for _, o := range order {
					if at[o].p > w.p {
						t.Fatalf("seed %d: popped %d of band %d while %d of band %d waits", seed, v, w.p, o, at[o].p)
					}
				}
				for _, x := range order {
					if at[x].p == w.p && (at[x].key == w.key || !o.Fair) {
						if x != v {
							t.Fatalf("seed %d: popped %d before %d", seed, v, x)
						}
						break
					}
				}
				gone(v)
			default:
				if len(order) == 0 {
					continue
				}
				v := order[rng.IntN(len(order))]
				if !q.Remove(at[v].p, at[v].key, v, rng.IntN(2) == 0) {
					t.Fatalf("seed %d: remove %d failed", seed, v)
				}
				gone(v)
			}
			if q.Len() != len(at) {
				t.Fatalf("seed %d: len %d, want %d", seed, q.Len(), len(at))
			}
		}
	}
}

// TestFairShare: two backlogged flows of one band, one sending five times
// as much, each get half the dispatches.
func TestFairShare(t *testing.T) {
	q := flow.NewBands[int](flow.Options{Max: 10000, Fair: true})
	served := map[int]int{}
	for range 200 {
		for range 5 {
			q.Push(0, 1, 1, t0)
		}
		q.Push(0, 2, 2, t0)
		for range 2 {
			v, _ := q.Pop()
			served[v]++
		}
	}
	if served[1] != 200 || served[2] != 200 {
		t.Errorf("dispatches %v, want 200 each", served)
	}
}

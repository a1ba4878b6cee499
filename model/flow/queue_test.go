package flow_test

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/inferrail/inferrail/model/flow"
)

func drain(q *flow.Queue[int]) []int {
	var out []int
	for {
		v, ok := q.Pop()
		if !ok {
			return out
		}
		out = append(out, v)
	}
}

func TestFIFO(t *testing.T) {
	q := flow.New[int](10, false)
	for i := range 5 {
		// Keys are ignored when not fair.
		if !q.Push(uint64(i%2), i) {
			t.Fatalf("push %d refused", i)
		}
	}
	if got, want := drain(q), []int{0, 1, 2, 3, 4}; !slices.Equal(got, want) {
		t.Errorf("order = %v, want %v", got, want)
	}
}

func TestBounded(t *testing.T) {
	q := flow.New[int](3, true)
	for i := range 3 {
		if !q.Push(uint64(i), i) {
			t.Fatalf("push %d refused", i)
		}
	}
	if q.Push(9, 9) || q.Len() != 3 {
		t.Fatalf("a full queue took an item: len %d", q.Len())
	}
	q.Pop()
	if !q.Push(9, 9) {
		t.Fatal("a freed place was refused")
	}
	if flow.New[int](0, false).Push(1, 1) != true {
		t.Error("a queue of limit 0 holds 1")
	}
}

func TestFair(t *testing.T) {
	q := flow.New[int](100, true)
	// Tenant 1 floods first; tenants 2 and 3 come later.
	for i := range 6 {
		q.Push(1, 10+i)
	}
	q.Push(2, 20)
	q.Push(2, 21)
	q.Push(3, 30)
	want := []int{10, 20, 30, 11, 21, 12, 13, 14, 15}
	if got := drain(q); !slices.Equal(got, want) {
		t.Errorf("order = %v, want %v", got, want)
	}
	if q.Len() != 0 {
		t.Errorf("len = %d after draining", q.Len())
	}
}

func TestRemove(t *testing.T) {
	q := flow.New[int](100, true)
	q.Push(1, 10)
	q.Push(1, 11)
	q.Push(2, 20)
	if q.Remove(2, 10) {
		t.Error("removed an item under the wrong key")
	}
	if !q.Remove(2, 20) || q.Remove(2, 20) {
		t.Error("remove 20: want true once")
	}
	// Removing the head whose turn it is serves it: the turn passes on.
	q.Push(3, 30)
	if !q.Remove(1, 10) {
		t.Fatal("remove 10")
	}
	if got, want := drain(q), []int{30, 11}; !slices.Equal(got, want) {
		t.Errorf("order = %v, want %v", got, want)
	}
}

// TestProperty checks random pushes, pops and removals: the bound, the
// length, and arrival order within a key (across all, when not fair).
func TestProperty(t *testing.T) {
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 7))
		fair := seed%2 == 0
		limit := 1 + rng.IntN(8)
		q := flow.New[int](limit, fair)
		where := map[int]uint64{} // item → key
		var order []int           // arrival order of items present
		for step := range 300 {
			switch op := rng.IntN(10); {
			case op < 5:
				k := uint64(rng.IntN(3))
				ok := q.Push(k, step)
				if ok != (len(where) < limit) {
					t.Fatalf("seed %d: push with %d of %d: %v", seed, len(where), limit, ok)
				}
				if ok {
					where[step] = k
					order = append(order, step)
				}
			case op < 8:
				v, ok := q.Pop()
				if ok != (len(where) > 0) {
					t.Fatalf("seed %d: pop on %d items: %v", seed, len(where), ok)
				}
				if !ok {
					continue
				}
				k, in := where[v]
				if !in {
					t.Fatalf("seed %d: popped %d, never pushed or gone", seed, v)
				}
				// Within a key, arrival order.
				for _, o := range order {
					if where[o] == k || !fair {
						if o != v {
							t.Fatalf("seed %d: popped %d before %d", seed, v, o)
						}
						break
					}
				}
				delete(where, v)
				order = slices.DeleteFunc(order, func(x int) bool { return x == v })
			default:
				if len(order) == 0 {
					continue
				}
				v := order[rng.IntN(len(order))]
				if !q.Remove(where[v], v) {
					t.Fatalf("seed %d: remove %d failed", seed, v)
				}
				delete(where, v)
				order = slices.DeleteFunc(order, func(x int) bool { return x == v })
			}
			if q.Len() != len(where) {
				t.Fatalf("seed %d: len %d, want %d", seed, q.Len(), len(where))
			}
		}
	}
}

// TestNoStarvation: while another key keeps the queue full of its items,
// a key with one waiting item is served within one round.
func TestNoStarvation(t *testing.T) {
	q := flow.New[int](1000, true)
	for i := range 100 {
		q.Push(1, i)
	}
	q.Push(2, -1)
	for i := range 3 {
		v, _ := q.Pop()
		if v == -1 {
			if i > 1 {
				t.Errorf("tenant 2 waited %d turns", i)
			}
			return
		}
		q.Push(1, 100+i) // tenant 1 keeps coming
	}
	t.Error("tenant 2 was never served")
}

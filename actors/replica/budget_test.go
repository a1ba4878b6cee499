package replica

import (
	"fmt"
	"testing"
	"time"
)

func TestBudget(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	later := now.Add(time.Minute)

	t.Run("half of four", func(t *testing.T) {
		b := NewBudget(50)
		for i := range 4 {
			b.Join(fmt.Sprint("r", i), []string{"m"})
		}
		got := 0
		for i := range 4 {
			if b.TryEject(fmt.Sprint("r", i), later, now) {
				got++
			}
		}
		if got != 2 {
			t.Fatalf("ejected %d of 4 at 50%%, want 2", got)
		}
		if h, e := b.Count("m", now); h != 4 || e != 2 {
			t.Fatalf("Count = %d healthy, %d ejected", h, e)
		}
		// Ejections end by time: the budget frees up.
		if h, e := b.Count("m", later); h != 4 || e != 0 {
			t.Fatalf("after the ejections: %d healthy, %d ejected", h, e)
		}
		if !b.TryEject("r3", later.Add(time.Minute), later) {
			t.Fatal("budget not freed once the ejections ended")
		}
	})

	t.Run("never the only one", func(t *testing.T) {
		b := NewBudget(50)
		b.Join("a", []string{"m"})
		if b.TryEject("a", later, now) {
			t.Fatal("ejected the only replica")
		}
		b.Join("b", []string{"m"})
		b.SetHealthy("b", false)
		if b.TryEject("a", later, now) {
			t.Fatal("ejected the only healthy replica")
		}
		// An unhealthy replica is out of rotation anyway: free to eject.
		if !b.TryEject("b", later, now) {
			t.Fatal("refused to eject an unhealthy replica")
		}
	})

	t.Run("every model must spare it", func(t *testing.T) {
		b := NewBudget(50)
		b.Join("a", []string{"m", "n"})
		b.Join("b", []string{"m"})
		b.Join("c", []string{"n"})
		b.Join("d", []string{"n"})
		b.Join("e", []string{"n"})
		if !b.TryEject("b", later, now) {
			t.Fatal("m can spare b")
		}
		if b.TryEject("a", later, now) {
			t.Fatal("m cannot spare a too, whatever n says")
		}
		if !b.TryEject("c", later, now) {
			t.Fatal("n can spare c")
		}
	})

	t.Run("percent bounds", func(t *testing.T) {
		for _, tc := range []struct{ percent, n, want int }{
			{0, 10, 0}, {10, 10, 1}, {10, 9, 0}, {50, 3, 1}, {50, 2, 1}, {100, 3, 3}, {34, 3, 1}, {67, 3, 2},
		} {
			b := NewBudget(tc.percent)
			for i := range tc.n {
				b.Join(fmt.Sprint("r", i), []string{"m"})
			}
			got := 0
			for i := range tc.n {
				if b.TryEject(fmt.Sprint("r", i), later, now) {
					got++
				}
			}
			if got != tc.want {
				t.Errorf("%d%% of %d: ejected %d, want %d", tc.percent, tc.n, got, tc.want)
			}
		}
	})

	t.Run("join resets, leave frees", func(t *testing.T) {
		b := NewBudget(50)
		b.Join("a", []string{"m"})
		b.Join("b", []string{"m"})
		if !b.TryEject("a", later, now) {
			t.Fatal("a not ejected")
		}
		b.Join("a", []string{"m"}) // a restarted actor starts fresh
		if _, e := b.Count("m", now); e != 0 {
			t.Fatalf("a restarted, still %d ejected", e)
		}
		b.TryEject("a", later, now)
		b.LeaveAs("a", nil)
		if h, e := b.Count("m", now); h != 1 || e != 0 {
			t.Fatalf("after a left: %d healthy, %d ejected", h, e)
		}
		if b.TryEject("a", later, now) {
			t.Fatal("ejected a replica that left")
		}
	})
}

// TestBudgetReplacedMember: a member replaced by one with its id (a
// relabelled pod: the new actor joins before the old one stops) stays in
// the budget when the old one leaves; the last owner's leave removes it.
func TestBudgetReplacedMember(t *testing.T) {
	now := time.Unix(1000, 0)
	b := NewBudget(50)
	oldOwner, newOwner := new(Handle), new(Handle)
	b.JoinAs("a", []string{"m"}, oldOwner)
	b.JoinAs("b", []string{"m"}, nil)
	b.JoinAs("a", []string{"m"}, newOwner)
	b.LeaveAs("a", oldOwner)
	if h, _ := b.Count("m", now); h != 2 {
		t.Fatalf("after the old a left: %d healthy, want 2", h)
	}
	if !b.TryEject("a", now.Add(time.Minute), now) {
		t.Fatal("the new a cannot be ejected: it left the budget with the old one")
	}
	b.LeaveAs("a", newOwner)
	if h, _ := b.Count("m", now); h != 1 {
		t.Fatalf("after the new a left: %d healthy, want 1", h)
	}
}

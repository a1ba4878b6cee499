package sched_test

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/inferrail/inferrail/model/policy"
	"github.com/inferrail/inferrail/model/sched"
)

// TestRanked: the ranking leads with the pick, then orders the rest by
// their weighted totals (least_request: fewer in flight scores higher),
// and a profile without scorers (random) orders the rest by the load; a
// failed Pick ranks nothing.
func TestRanked(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 0))
	f := func(name string, cands []policy.Candidate, want []int) {
		t.Helper()
		s, err := sched.New(policy.Spec{Name: name})
		if err != nil {
			t.Fatal(err)
		}
		k, err := s.Pick(&policy.Request{}, cands, rng)
		if err != nil {
			t.Fatal(err)
		}
		got := s.Ranked(nil)
		if got[0] != k {
			t.Fatalf("%s: ranking %v does not lead with the pick %d", name, got, k)
		}
		if want != nil && !slices.Equal(got, want) {
			t.Fatalf("%s: ranking %v, want %v", name, got, want)
		}
		if len(got) != len(cands) {
			t.Fatalf("%s: ranking %v of %d candidates", name, got, len(cands))
		}
	}
	f("least_request", []policy.Candidate{{Replica: 0, InFlight: 5}, {Replica: 1, InFlight: 0}, {Replica: 2, InFlight: 3}, {Replica: 3, InFlight: 1}}, []int{1, 3, 2, 0})
	cands := []policy.Candidate{{Replica: 0, InFlight: 4}, {Replica: 1, InFlight: 2}, {Replica: 2, InFlight: 9}}
	s, _ := sched.New(policy.Spec{Name: "random"})
	k, _ := s.Pick(&policy.Request{}, cands, rng)
	got := s.Ranked(nil)
	rest := slices.DeleteFunc([]int{1, 0, 2}, func(i int) bool { return i == k })
	if !slices.Equal(got, append([]int{k}, rest...)) {
		t.Fatalf("random picked %d: ranking %v, want the pick then by load", k, got)
	}
	if _, err := s.Pick(&policy.Request{}, nil, rng); err == nil {
		t.Fatal("a Pick of nothing succeeded")
	}
	if got := s.Ranked(nil); len(got) != 0 {
		t.Fatalf("after a failed Pick: %v", got)
	}
}

package policy

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// Over many keys each arm's share is its percent, within statistical
// bounds; a key always falls in the same arm.
func TestSplitShares(t *testing.T) {
	const n = 20000
	for _, percents := range []map[string]int{
		{"cost_model": 75, "round_robin": 25},
		{"kv_aware": 10, "cost_model": 90},
		{"p2c": 34, "random": 33, "least_request": 33},
		{"p2c": 50, "random": 0, "round_robin": 50},
	} {
		s, err := NewSplit(percents)
		if err != nil {
			t.Fatal(err)
		}
		// Random 64-bit keys, and keys as the front end makes them from
		// session ids, which differ in a few bytes only.
		keys := map[string]func(i int, rng *rand.Rand) uint64{
			"random":   func(_ int, rng *rand.Rand) uint64 { return rng.Uint64() },
			"sessions": func(i int, _ *rand.Rand) uint64 { return Key(fmt.Sprint("session-", i)) },
		}
		for kind, key := range keys {
			rng := rand.New(rand.NewPCG(7, 11))
			count := make([]int, len(s.Arms()))
			for i := range n {
				k := key(i, rng)
				a := s.Arm(k)
				if again := s.Arm(k); again != a {
					t.Fatalf("key %x: arm %d, then %d", k, a, again)
				}
				count[a]++
			}
			for i, a := range s.Arms() {
				p := float64(a.Percent) / 100
				sd := math.Sqrt(n * p * (1 - p))
				share := float64(count[i]) / n
				t.Logf("%v %s: %s %.2f%% (want %d%%, sd %.2f%%)", percents, kind, a.Policy, 100*share, a.Percent, 100*sd/n)
				if d := math.Abs(float64(count[i]) - n*p); d > 5*sd || (a.Percent == 0 && count[i] > 0) {
					t.Errorf("%v %s: %s got %d of %d keys, want %.0f ± %.0f", percents, kind, a.Policy, count[i], n, n*p, 5*sd)
				}
			}
		}
	}
}

// The arms are in policy-name order whatever the map's order, and a key's
// arm is a fixed function of the key: the same in every process.
func TestSplitStable(t *testing.T) {
	s, err := NewSplit(map[string]int{"round_robin": 25, "cost_model": 75})
	if err != nil {
		t.Fatal(err)
	}
	if a := s.Arms(); len(a) != 2 || a[0] != (Arm{"cost_model", 75}) || a[1] != (Arm{"round_robin", 25}) {
		t.Fatalf("arms %v", a)
	}
	// Pinned: these change only if the remix changes, which would move
	// running conversations to other arms, and gateways of two versions
	// side by side would disagree.
	if got := []int{SplitPoint(0), SplitPoint(1), SplitPoint(Key("session-1")), SplitPoint(Key("session-2"))}; fmt.Sprint(got) != "[64 70 71 51]" {
		t.Fatalf("split points %v changed", got)
	}
	if a := s.Arm(Key("session-1")); a != 0 { // 71 < 75
		t.Fatalf("session-1 in arm %d", a)
	}
	if a := s.Arm(Key("session-2")); a != 0 {
		t.Fatalf("session-2 in arm %d", a)
	}
}

// A split of one policy sends every key to it; bad splits are refused.
func TestSplitOfOne(t *testing.T) {
	s, err := NewSplit(map[string]int{"p2c": 100})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 1000 {
		if a := s.Arm(rng.Uint64()); a != 0 {
			t.Fatalf("arm %d", a)
		}
	}
	for _, bad := range []map[string]int{nil, {"p2c": 50}, {"p2c": 150, "random": -50}, {"p2c": 60, "random": 60}} {
		if _, err := NewSplit(bad); err == nil {
			t.Errorf("%v: accepted", bad)
		}
	}
}

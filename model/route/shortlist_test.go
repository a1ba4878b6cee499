package route

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/inferrail/inferrail/model/cost"
	"github.com/inferrail/inferrail/model/policy"
)

// The shortlist holds every hinted candidate (up to k) and then exactly the
// least loaded others, as a sort of all of them would choose.
func TestShortlistAgainstSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	m := cost.Default()
	for range 2000 {
		n := 1 + rng.IntN(80)
		k := rng.IntN(20)
		cands := make([]policy.Candidate, n)
		hinted := make([]bool, n)
		for i := range cands {
			cands[i] = policy.Candidate{Replica: i, InFlight: rng.IntN(4), Running: rng.IntN(3),
				QueuedPrefill: time.Duration(rng.IntN(4)) * time.Millisecond}
			hinted[i] = rng.IntN(10) == 0
		}
		got := Shortlist(nil, cands, hinted, k, m)
		if k <= 0 || n <= k {
			if len(got) != n {
				t.Fatalf("n=%d k=%d: %d listed, want all", n, k, len(got))
			}
			continue
		}
		var want []int
		for i := range cands {
			if hinted[i] && len(want) < k {
				want = append(want, i)
			}
		}
		var rest []int
		for i := range cands {
			if !hinted[i] {
				rest = append(rest, i)
			}
		}
		load := func(i int) time.Duration { return m.Queue(cands[i].QueuedPrefill, cands[i].Running) }
		slices.SortStableFunc(rest, func(a, b int) int {
			if la, lb := load(a), load(b); la != lb {
				return int(la - lb)
			}
			return cands[a].InFlight - cands[b].InFlight
		})
		want = append(want, rest[:min(len(rest), k-len(want))]...)
		if !slices.Equal(got, want) {
			t.Fatalf("n=%d k=%d:\n got %v\nwant %v", n, k, got, want)
		}
	}
}

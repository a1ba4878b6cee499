package policy

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// Sink keeps benchmark results alive.
var Sink int

func BenchmarkPick(b *testing.B) {
	for _, n := range []int{8, 64, 256} {
		rng := rand.New(rand.NewPCG(7, uint64(n)))
		cands := make([]Candidate, n)
		for i := range cands {
			cands[i] = Candidate{Replica: i, InFlight: rng.IntN(8)}
		}
		for _, p := range baselines() {
			b.Run(fmt.Sprintf("%s/n=%d", p.Name(), n), func(b *testing.B) {
				b.ReportAllocs()
				req := &Request{}
				for b.Loop() {
					i, _ := p.Pick(req, cands, rng)
					Sink += i
				}
			})
		}
	}
}

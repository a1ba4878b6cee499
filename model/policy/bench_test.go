package policy

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/inferrail/inferrail/model/cost"
	"github.com/inferrail/inferrail/model/prefix"
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

// benchPolicies returns the cache-aware policies as the benchmarks run
// them: cost_model with session affinity and hot prefixes in play.
func benchPolicies() []Policy {
	cm := DefaultCostModelParams()
	cm.SessionAffinity = true
	cm.HotPrefix.Utilization = 0.01 // the benchmark's root is hot
	return []Policy{NewPrefixHash(DefaultPrefixHashParams()), NewKVAware(DefaultKVAwareParams()), NewCostModel(cm)}
}

// benchInputs returns an 8,000 token prompt (500 blocks) of a conversation
// over n loaded replicas holding various parts of it.
func benchInputs(n int) (*Request, []Candidate) {
	rng := rand.New(rand.NewPCG(8, uint64(n)))
	blocks := make([]prefix.Hash, 500)
	for i := range blocks {
		blocks[i] = prefix.Hash{Hi: rng.Uint64(), Lo: rng.Uint64()}
	}
	cands := make([]Candidate, n)
	for i := range cands {
		cands[i] = Candidate{
			Replica:       i,
			Key:           rng.Uint64() | 1,
			InFlight:      rng.IntN(8),
			CachedTokens:  16 * rng.IntN(500),
			QueuedPrefill: time.Duration(rng.IntN(2000)) * time.Millisecond,
			Running:       rng.IntN(64),
			KVUsage:       rng.Float64(),
			Fresh:         true,
		}
	}
	return &Request{PromptTokens: 8000, Blocks: blocks, BlockSize: 16, SessionKey: 42, Now: time.Unix(0, 0)}, cands
}

func BenchmarkPickCacheAware(b *testing.B) {
	for _, n := range []int{8, 64, 256} {
		for _, p := range benchPolicies() {
			req, cands := benchInputs(n)
			rng := rand.New(rand.NewPCG(7, uint64(n)))
			b.Run(fmt.Sprintf("%s/n=%d", p.Name(), n), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					req.Now = req.Now.Add(time.Millisecond)
					i, _ := p.Pick(req, cands, rng)
					Sink += i
				}
			})
		}
	}
}

// BenchmarkPickCostModelFitted is BenchmarkPickCacheAware's cost_model with
// every candidate priced by a cost model of its own (Candidate.Model, the
// online fit of routing.cost_model: auto), each a different speed.
func BenchmarkPickCostModelFitted(b *testing.B) {
	for _, n := range []int{8, 64, 256} {
		p := benchPolicies()[2]
		req, cands := benchInputs(n)
		models := make([]cost.Model, n)
		for i := range cands {
			models[i] = cost.Default()
			models[i].PrefillTokenSecs *= 0.5 + float64(i%4)/2
			models[i].DecodeStepSecs = 0.02
			cands[i].Model = &models[i]
		}
		rng := rand.New(rand.NewPCG(7, uint64(n)))
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				req.Now = req.Now.Add(time.Millisecond)
				i, _ := p.Pick(req, cands, rng)
				Sink += i
			}
		})
	}
}

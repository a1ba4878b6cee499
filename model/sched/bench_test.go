package sched

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/inferrail/inferrail/model/policy"
	"github.com/inferrail/inferrail/model/prefix"
)

// Sink keeps benchmark results alive.
var Sink int

// benchInputs returns an 8,000-token prompt (500 blocks) of a conversation
// over n loaded replicas holding various parts of it, as model/policy's
// benchmarks do.
func benchInputs(n int) (*policy.Request, []policy.Candidate) {
	rng := rand.New(rand.NewPCG(8, uint64(n)))
	blocks := make([]prefix.Hash, 500)
	for i := range blocks {
		blocks[i] = prefix.Hash{Hi: rng.Uint64(), Lo: rng.Uint64()}
	}
	cands := make([]policy.Candidate, n)
	for i := range cands {
		cands[i] = policy.Candidate{
			Replica: i, Key: rng.Uint64() | 1, InFlight: rng.IntN(8),
			CachedTokens:  16 * rng.IntN(500),
			QueuedPrefill: time.Duration(rng.IntN(2000)) * time.Millisecond,
			Running:       rng.IntN(64), Waiting: rng.IntN(8), PendingTokens: rng.IntN(20000),
			KVUsage: rng.Float64(), Fresh: true,
		}
	}
	return &policy.Request{PromptTokens: 8000, Blocks: blocks, BlockSize: 16, SessionKey: 42, Now: time.Unix(0, 0)}, cands
}

// benchCostModel is cost_model as the benchmarks run it: session affinity
// and hot prefixes in play.
func benchCostModel() policy.Spec {
	p := policy.DefaultCostModelParams()
	p.SessionAffinity = true
	p.HotPrefix.Utilization = 0.01 // the benchmark's root is hot
	return policy.Spec{Name: "cost_model", CostModel: &p}
}

// BenchmarkCostModel times model/policy's cost_model Pick and the built-in
// cost_model profile's Pick on the same inputs, alternating in one run,
// and reports both and their ratio (profile over policy).
func BenchmarkCostModel(b *testing.B) {
	for _, n := range []int{8, 64, 256} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			old, err := benchCostModel().Build()
			if err != nil {
				b.Fatal(err)
			}
			s, err := New(benchCostModel())
			if err != nil {
				b.Fatal(err)
			}
			req, cands := benchInputs(n)
			ra, rb := rand.New(rand.NewPCG(7, 7)), rand.New(rand.NewPCG(7, 7))
			var tOld, tNew time.Duration
			b.ReportAllocs()
			first := false
			for b.Loop() {
				// Each goes first every other time, so neither is always
				// the one that finds the inputs in cache.
				req.Now = req.Now.Add(time.Millisecond)
				if first = !first; first {
					t0 := time.Now()
					Sink, _ = old.Pick(req, cands, ra)
					tOld += time.Since(t0)
				}
				t1 := time.Now()
				Sink, _ = s.Pick(req, cands, rb)
				tNew += time.Since(t1)
				if !first {
					t0 := time.Now()
					Sink, _ = old.Pick(req, cands, ra)
					tOld += time.Since(t0)
				}
			}
			b.ReportMetric(float64(tOld.Nanoseconds())/float64(b.N), "policy-ns/op")
			b.ReportMetric(float64(tNew.Nanoseconds())/float64(b.N), "profile-ns/op")
			b.ReportMetric(float64(tNew)/float64(tOld), "ratio")
		})
	}
}

// BenchmarkPick times each built-in profile, llm-d's Helm default and its
// predicted-latency composition (with an SLO, so that its plugins judge
// every candidate).
func BenchmarkPick(b *testing.B) {
	latency := build(b, readDocument(b, "testdata/latency-slo.yaml"))
	scheds := []*Scheduler{build(b, readDocument(b, "testdata/helm-default.yaml")), latency}
	for _, name := range Policies() {
		s, err := New(policy.Spec{Name: name})
		if err != nil {
			b.Fatal(err)
		}
		scheds = append(scheds, s)
	}
	for _, n := range []int{8, 64, 256} {
		for k, s := range scheds {
			name := s.Name()
			switch k {
			case 0:
				name = "helm-default"
			case 1:
				name = "latency-slo"
			}
			b.Run(fmt.Sprintf("%s/n=%d", name, n), func(b *testing.B) {
				req, cands := benchInputs(n)
				if s == latency {
					req.SLO = policy.SLO{TTFT: 2 * time.Second, TPOT: 50 * time.Millisecond}
				}
				rng := rand.New(rand.NewPCG(7, uint64(n)))
				b.ReportAllocs()
				for b.Loop() {
					req.Now = req.Now.Add(time.Millisecond)
					i, _ := s.Pick(req, cands, rng)
					Sink += i
				}
			})
		}
	}
}

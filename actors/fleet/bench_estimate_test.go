package fleet

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/inferrail/inferrail/actors/replica"
	"github.com/inferrail/inferrail/config"
	"github.com/inferrail/inferrail/model/estimate"
	"github.com/inferrail/inferrail/model/policy"
	"github.com/inferrail/inferrail/model/prefix"
)

// benchFill is how many unrelated blocks each replica's index holds besides
// the benchmark prompt.
const benchFill = 8192

// benchState returns the 8,000-token benchmark prompt and, per replica, the
// block chains its index holds: benchFill unrelated blocks in chains of 512,
// plus the prompt on even replicas.
func benchState(n int) (policy.Request, [][][]prefix.Hash) {
	req := promptReq(1, 8000)
	rng := rand.New(rand.NewPCG(7, 7))
	var h prefix.Hasher
	held := make([][][]prefix.Hash, n)
	for i := range held {
		for range benchFill / 512 {
			ids := make([]uint32, 512*16)
			for k := range ids {
				ids[k] = rng.Uint32()
			}
			held[i] = append(held[i], h.Chain(nil, prefix.Root("m", "", ""), ids, 16))
		}
		if i%2 == 0 {
			held[i] = append(held[i], req.Blocks)
		}
	}
	return req, held
}

// BenchmarkCostModelActor is a full cost_model decision for an 8,000-token
// prompt through the actors: Fleet.Pick to the routing actor, the estimate
// broadcast to every replica actor (each a binary-search lookup in its
// shadow index), the gather under routing.estimate_deadline (2ms), the
// policy and the lease. late-% is the share of decisions that took longer
// than the deadline; misses/op the replicas priced from published state;
// goroutines/op the goroutines started per decision (protoactor's default
// dispatcher starts one each time an idle mailbox gets a message, the
// Assign, FirstByte and RequestDone after the decision included).
func BenchmarkCostModelActor(b *testing.B) {
	byFanout(b, func(b *testing.B, n, fanout int) { benchCostModelActor(b, n, fanout, false) })
}

// byFanout runs bench at each of benchSizes replicas with every replica
// asked for an estimate, then with the default shortlist of 16 where there
// are more.
func byFanout(b *testing.B, bench func(b *testing.B, n, fanout int)) {
	for _, fanout := range []int{0, 16} {
		for _, n := range benchSizes {
			if fanout > 0 && n <= fanout {
				continue
			}
			b.Run(fmt.Sprintf("fanout=%d/replicas=%d", fanout, n), func(b *testing.B) { bench(b, n, fanout) })
		}
	}
}

// BenchmarkCostModelActorLogged is BenchmarkCostModelActor for a request
// the decision log samples: the policy explains its choice too.
func BenchmarkCostModelActorLogged(b *testing.B) {
	for _, n := range []int{8, 64} {
		for _, log := range []bool{false, true} {
			b.Run(fmt.Sprintf("replicas=%d/log=%v", n, log), func(b *testing.B) { benchCostModelActor(b, n, 16, log) })
		}
	}
}

func benchCostModelActor(b *testing.B, n, fanout int, log bool) {
	{
		{
			set := metrics.NewSet()
			cfg := testConfig(n, func(c *config.Config) {
				c.Models[0].Policy = "cost_model"
				c.Routing.EstimateFanout = fanout
			})
			f := start(b, cfg, Options{Logger: discard(), RoutingMetrics: set})
			req := fillIndexes(b, f, n)
			misses := set.GetOrCreateCounter(`inferrail_estimate_deadline_misses_total{model="m"}`)
			deadline := cfg.Routing.EstimateDeadline
			lat := make([]time.Duration, 0, b.N)
			late := 0
			m0 := misses.Get()
			g0 := goroutinesCreated()
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				t0 := time.Now()
				d, err := f.Pick(PickRequest{Model: "m", Policy: req, Deadline: t0.Add(time.Second), Log: log})
				el := time.Since(t0)
				lat = append(lat, el)
				if err != nil {
					b.Fatal(err)
				}
				if el > deadline {
					late++
				}
				f.FirstByte(d)
				f.Done(d, OutcomeOK)
				Sink = d.Replica
			}
			b.StopTimer()
			b.ReportMetric(float64(goroutinesCreated()-g0)/float64(b.N), "goroutines/op")
			reportLatency(b, lat)
			b.ReportMetric(100*float64(late)/float64(b.N), "late-%")
			b.ReportMetric(float64(misses.Get()-m0)/float64(b.N), "misses/op")
		}
	}
}

// fillIndexes fills the n replicas' indexes of f with benchState's chains
// and returns the benchmark prompt.
func fillIndexes(b testing.TB, f *Fleet, n int) policy.Request {
	req, held := benchState(n)
	v := f.view.Load()
	for i, m := range v.order {
		for _, chain := range held[i] {
			at := &replica.Attempt{Blocks: chain}
			f.sys.Root.Send(m.pid, &replica.Assign{Attempt: at})
			f.sys.Root.Send(m.pid, &replica.RequestDone{Outcome: replica.OutcomeOK, Attempt: at})
		}
	}
	waitFor(b, "indexes filled", func() bool {
		for i, m := range v.order {
			if blocks, _, _ := m.h.Shadow().Index(); blocks < len(held[i])*500 {
				return false
			}
		}
		return true
	})
	return req
}

// BenchmarkCostModelDirect is the same decision on the same state without
// messaging, in the caller's goroutine: every replica's lookup, the
// candidates, cost_model and the lease. It is the lower bound for
// BenchmarkCostModelActor.
func BenchmarkCostModelDirect(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("replicas=%d", n), func(b *testing.B) {
			req, held := benchState(n)
			reps := make([]*estimate.Replica, n)
			counters := make([]*replica.Counters, n)
			t0 := time.Now()
			for i := range reps {
				reps[i] = estimate.New(16384)
				for _, chain := range held[i] {
					reps[i].Assign(chain, 0, t0)
					reps[i].FirstByte(t0)
				}
				counters[i] = replica.NewCounters(1024, 0)
			}
			p := policy.NewCostModel(policy.DefaultCostModelParams())
			rng := rand.New(rand.NewPCG(1, 0))
			cands := make([]policy.Candidate, n)
			q := estimate.Query{Blocks: req.Blocks, PromptTokens: req.PromptTokens, BlockSize: 16}
			lat := make([]time.Duration, 0, b.N)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				start := time.Now()
				for i, r := range reps {
					c := counters[i]
					cands[i] = policy.Candidate{Replica: i, InFlight: c.InFlight(), Pending: c.Pending(), Key: uint64(i + 1)}
					r.Estimate(&q, start).Fill(&cands[i])
				}
				req.Now = start
				k, err := p.Pick(&req, cands, rng)
				if err != nil {
					b.Fatal(err)
				}
				l, ok := counters[k].TryAcquire()
				lat = append(lat, time.Since(start))
				if !ok {
					b.Fatal("full")
				}
				l.Release()
			}
			b.StopTimer()
			reportLatency(b, lat)
		})
	}
}

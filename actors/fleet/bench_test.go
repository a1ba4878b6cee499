package fleet

import (
	"fmt"
	"math/rand/v2"
	"runtime/metrics"
	"slices"
	"testing"
	"time"

	"github.com/inferrail/inferrail/actors/replica"
	"github.com/inferrail/inferrail/model/policy"
)

// Sink keeps benchmark results alive.
var Sink string

var benchSizes = []int{8, 64, 256}

// reportLatency adds p50, p99 and max of the per-decision latencies.
func reportLatency(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	q := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Nanoseconds()) }
	b.ReportMetric(q(0.50), "p50-ns")
	b.ReportMetric(q(0.99), "p99-ns")
	b.ReportMetric(float64(lat[len(lat)-1].Nanoseconds()), "max-ns")
}

// goroutinesCreated is how many goroutines the process has started so far.
func goroutinesCreated() uint64 {
	s := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// BenchmarkPickActor is a decision through the actor path: Fleet.Pick's
// message and future to the model's routing actor, which reads the
// snapshots, runs least_request and takes a lease. The lease is released
// directly, so the benchmark measures the decision alone.
func BenchmarkPickActor(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("replicas=%d", n), func(b *testing.B) {
			f := start(b, testConfig(n, nil), Options{Logger: discard()})
			settle(b, f) // the replica actors have started: none allocates its index while the clock runs
			lat := make([]time.Duration, 0, b.N)
			g0 := goroutinesCreated()
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				t0 := time.Now()
				d, err := f.Pick(PickRequest{Model: "m", Deadline: t0.Add(time.Second)})
				lat = append(lat, time.Since(t0))
				if err != nil {
					b.Fatal(err)
				}
				d.Lease.Release()
				Sink = d.Replica
			}
			b.StopTimer()
			b.ReportMetric(float64(goroutinesCreated()-g0)/float64(b.N), "goroutines/op")
			reportLatency(b, lat)
		})
	}
}

// BenchmarkPickActorParallel is BenchmarkPickActor from concurrent callers.
func BenchmarkPickActorParallel(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("replicas=%d", n), func(b *testing.B) {
			f := start(b, testConfig(n, nil), Options{Logger: discard()})
			settle(b, f) // the replica actors have started: none allocates its index while the clock runs
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					d, err := f.Pick(PickRequest{Model: "m", Deadline: time.Now().Add(time.Second)})
					if err != nil {
						b.Error(err)
						return
					}
					d.Lease.Release()
				}
			})
		})
	}
}

// BenchmarkPickDirect computes the same decision without messaging: the
// same snapshot reads, candidate filter, least_request and lease, in the
// caller's goroutine. The difference to BenchmarkPickActor is what the
// actor hop costs.
func BenchmarkPickDirect(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("replicas=%d", n), func(b *testing.B) {
			hs := make([]*replica.Handle, n)
			for i := range hs {
				hs[i] = replica.NewHandle(fmt.Sprint("r", i), "http://x", []string{"m"}, replica.NewCounters(1024, 0))
			}
			var p policy.LeastRequest
			rng := rand.New(rand.NewPCG(1, 0))
			cands := make([]policy.Candidate, 0, n)
			snaps := make([]*replica.Snapshot, 0, n)
			req := &policy.Request{}
			lat := make([]time.Duration, 0, b.N)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				t0 := time.Now()
				now := time.Now()
				cands, snaps = cands[:0], snaps[:0]
				for i, h := range hs {
					s := h.Snapshot()
					if !s.Healthy || s.Ejected(now) || !s.Serves("m") {
						continue
					}
					c := s.Counters
					if !c.HasRoom() {
						continue
					}
					cands = append(cands, policy.Candidate{Replica: i, InFlight: c.InFlight(), Pending: c.Pending()})
					snaps = append(snaps, s)
				}
				k, err := p.Pick(req, cands, rng)
				if err != nil {
					b.Fatal(err)
				}
				l, ok := snaps[k].Counters.TryAcquire()
				lat = append(lat, time.Since(t0))
				if !ok {
					b.Fatal("full")
				}
				l.Release()
				Sink = snaps[k].ID
			}
			b.StopTimer()
			reportLatency(b, lat)
		})
	}
}

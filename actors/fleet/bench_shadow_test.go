package fleet

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/inferrail/inferrail/config"
	"github.com/inferrail/inferrail/model/cost"
	"github.com/inferrail/inferrail/model/policy"
	"github.com/inferrail/inferrail/model/shadow"
)

// BenchmarkShadowActor is what shadow policies cost a routing decision:
// the same decision as BenchmarkCostModelActor at 8 replicas, through the
// actors, without shadows and with two. For cost_model the shadows add the
// copy of the candidates and a queue send; for least_request a cache-aware
// shadow also turns the estimate broadcast on. dropped/op is the share of
// decisions the trial worker was too far behind to replay.
func BenchmarkShadowActor(b *testing.B) {
	const n = 8
	for _, c := range []struct{ policy, shadows string }{
		{"cost_model", ""},
		{"cost_model", "least_request,kv_aware"},
		{"least_request", ""},
		{"least_request", "round_robin,p2c"},
		{"least_request", "cost_model,kv_aware"},
	} {
		b.Run(fmt.Sprintf("policy=%s/shadows=%s", c.policy, c.shadows), func(b *testing.B) {
			set := metrics.NewSet()
			cfg := testConfig(n, func(cf *config.Config) {
				cf.Models[0].Policy = c.policy
				if c.shadows != "" {
					cf.Models[0].Shadow = strings.Split(c.shadows, ",")
				}
			})
			f := start(b, cfg, Options{Logger: discard(), RoutingMetrics: set})
			req := fillIndexes(b, f, n)
			dropped := set.GetOrCreateCounter(`inferrail_shadow_dropped_total{model="m"}`)
			lat := make([]time.Duration, 0, b.N)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				t0 := time.Now()
				d, err := f.Pick(PickRequest{Model: "m", Policy: req, Deadline: t0.Add(time.Second)})
				lat = append(lat, time.Since(t0))
				if err != nil {
					b.Fatal(err)
				}
				f.FirstByte(d)
				f.Done(d, OutcomeOK)
				Sink = d.Replica
			}
			b.StopTimer()
			reportLatency(b, lat)
			b.ReportMetric(float64(dropped.Get())/float64(b.N), "dropped/op")
		})
	}
}

// BenchmarkShadowWorker is the trial worker's throughput: decisions at 8
// candidates replayed by two shadows, cost_model and kv_aware, counted and
// summed, fed as fast as the worker takes them. Its inverse is the decision
// rate past which a model's shadows start dropping.
func BenchmarkShadowWorker(b *testing.B) {
	cfg := testConfig(8, nil)
	var ps []policy.Policy
	var rngs []*rand.Rand
	for k, name := range []string{"cost_model", "kv_aware"} {
		pr, err := profileOf(cfg, &cfg.Models[0], name)
		if err != nil {
			b.Fatal(err)
		}
		p, err := pr.build()
		if err != nil {
			b.Fatal(err)
		}
		ps, rngs = append(ps, p), append(rngs, rand.New(rand.NewPCG(1, trialStream(0, k))))
	}
	w := newTrialWorker("m", 1, ps, rngs, nil, cost.Default(), 0, nil, metrics.NewSet(), discard())
	req := promptReq(1, 8000)
	req.Now = time.Now()
	d := &shadow.Decision{Policy: "least_request", Request: req, Routed: 3}
	for i := range 8 {
		d.Cands = append(d.Cands, policy.Candidate{Replica: i, Key: uint64(i + 1), InFlight: i % 3, CachedTokens: 1024 * (i % 4),
			QueuedPrefill: time.Duration(i) * 10 * time.Millisecond, Running: i % 5})
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { w.run(ctx) })
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		w.queue <- d // a test may wait; the routing actors never do
	}
	for w.report().Shadows[1].Decisions < int64(b.N) {
		runtime.Gosched()
	}
	b.StopTimer()
	cancel()
	wg.Wait()
}

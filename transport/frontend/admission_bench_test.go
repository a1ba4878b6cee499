package frontend

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/inferrail/inferrail/config"
	"github.com/inferrail/inferrail/model/flow"
	"github.com/inferrail/inferrail/transport/auth"
)

// BenchmarkAdmission is what API keys (1,000 of them), rate limits and
// flow control add to a request before it is routed, with nothing queued
// and no limit reached: the key check, the tenant's buckets (reserve, and
// settle to usage), and flow control's priority and saturation check over
// four replicas. The pick and the proxying are the same with or without
// them and are left out. It reports the 99th percentile of single
// admissions beside ns/op.
func BenchmarkAdmission(b *testing.B) {
	keys := make([]config.APIKey, 1000)
	for i := range keys {
		keys[i] = config.APIKey{ID: fmt.Sprintf("k%d", i), Tenant: fmt.Sprintf("t%d", i%10),
			SHA256: config.HashKey(fmt.Sprintf("sk-bench-%032d", i))}
	}
	for _, bc := range []struct {
		name             string
		keys, limits, fc bool
	}{
		{"off", false, false, false},
		{"keys", true, false, false},
		{"limits", false, true, false},
		{"flow_control", false, false, true},
		{"all", true, true, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			_, urls := startSims(b, 4, nil)
			g := startOpts(b, urls, func(c *config.Config) {
				if bc.keys {
					c.Auth.APIKeys.Keys = keys
				}
				if bc.limits {
					c.RateLimits.Default = config.RateLimit{RequestsPerSecond: 1e9, TokensPerMinute: 1e15}
				}
				c.FlowControl.Enabled = bc.fc
				c.FlowControl.SaturationDetector.MetricsStalenessThreshold = time.Hour
			}, func(o *Options) {
				if !bc.keys {
					return
				}
				var err error
				if o.Auth, err = auth.New(o.Config, auth.Options{}); err != nil {
					b.Fatal(err)
				}
			})
			reported(b, g)
			s := g.fe
			ctx := &fasthttp.RequestCtx{}
			ctx.Request.SetRequestURI("/v1/chat/completions")
			ctx.Request.Header.SetMethod("POST")
			ctx.Request.Header.Set("Authorization", "Bearer sk-bench-00000000000000000000000000000500")
			ctx.Request.Header.Set(flow.HeaderObjective, "none")
			body := []byte(chat("What is the capital of France? Answer in one word.", 16, false))
			met := s.met.Model(model)
			fq := s.gate.models[model]
			admit := func() {
				ctx.Response.Reset()
				who, ok := s.authorize(ctx)
				if !ok {
					b.Fatalf("refused: %s", ctx.Response.Body())
				}
				r := request{ctx: ctx, model: model, body: body, met: met, who: who}
				if !s.admitLimits(&r) {
					b.Fatalf("limited: %s", ctx.Response.Body())
				}
				if gc := s.gate.cfg.Load(); gc.on {
					t := r.ticket(1)
					if _, wait, err := s.gate.hold(&t, gc, fq); wait || err != nil {
						b.Fatalf("held: %v %v", wait, err)
					}
				}
				r.lim.used = 40
				s.settleLimits(&r)
			}
			took := make([]time.Duration, 0, 1<<16)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				t0 := time.Now()
				admit()
				if len(took) < cap(took) {
					took = append(took, time.Since(t0))
				}
			}
			b.StopTimer()
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)*99/100].Nanoseconds()), "p99-ns")
		})
	}
}

package frontend

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/inferrail/inferrail/sim"
	"github.com/inferrail/inferrail/transport/tracing"
)

// BenchmarkTracing: one request at a time through a gateway to a
// zero-latency simulator, with tracing off, and on with a collector that
// refuses connections: every trace sampled, and none (ratio 0). Compare the
// cases side by side; bench/results/tracing-2026-11-29.md has numbers.
func BenchmarkTracing(b *testing.B) {
	dead := httptest.NewServer(nil)
	endpoint := dead.URL
	dead.Close() // nothing listens there: every export fails
	for _, bc := range []struct {
		name  string
		ratio float64 // < 0: tracing off
	}{{"off", -1}, {"unsampled", 0}, {"sampled", 1}} {
		b.Run(bc.name, func(b *testing.B) {
			var p *tracing.Provider
			if bc.ratio >= 0 {
				var err error
				if p, err = tracing.Start(tracing.Options{Endpoint: endpoint, SampleRatio: bc.ratio}); err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() {
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					defer cancel()
					p.Shutdown(ctx)
				})
			}
			so := sim.DefaultOptions()
			so.Engine.Latency.Zero = true
			sims, err := sim.StartN(1, so)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { sims[0].Close() })
			g := startOpts(b, []string{sims[0].URL()}, nil, func(o *Options) {
				if p != nil {
					o.Tracer = p.Tracer()
				}
			})
			c := &fasthttp.Client{}
			defer c.CloseIdleConnections()
			req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
			defer fasthttp.ReleaseRequest(req)
			defer fasthttp.ReleaseResponse(resp)
			req.SetRequestURI(g.url("/v1/completions"))
			req.Header.SetMethod("POST")
			req.Header.SetContentType("application/json")
			req.SetBodyString(`{"prompt":"hi","max_tokens":1}`)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if err := c.Do(req, resp); err != nil || resp.StatusCode() != 200 {
					b.Fatalf("%v %d %s", err, resp.StatusCode(), resp.Body())
				}
			}
		})
	}
}

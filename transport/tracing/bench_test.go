package tracing

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"go.opentelemetry.io/otel/propagation"
)

// Sink keeps benchmark results alive.
var Sink Span

// BenchmarkRequestSpans: the span work of one request with one attempt
// (server, route and upstream spans, an event, trace context injected into
// the engine's headers), with tracing off, and with a Provider whose
// collector refuses connections: nothing sampled, and everything.
func BenchmarkRequestSpans(b *testing.B) {
	dead := httptest.NewServer(nil)
	endpoint := dead.URL
	dead.Close()
	path := []byte("/v1/chat/completions")
	for _, bc := range []struct {
		name  string
		ratio float64 // < 0: off
	}{{"off", -1}, {"unsampled", 0}, {"sampled", 1}} {
		b.Run(bc.name, func(b *testing.B) {
			var tr *Tracer
			if bc.ratio >= 0 {
				p, err := Start(Options{Endpoint: endpoint, SampleRatio: bc.ratio})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() {
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					defer cancel()
					p.Shutdown(ctx)
				})
				tr = p.Tracer()
			}
			in, out := propagation.MapCarrier{}, propagation.MapCarrier{}
			b.ReportAllocs()
			for b.Loop() {
				start := time.Now()
				s := tr.Request("POST /v1/chat/completions", "POST", path, in, start)
				s.Describe("model", "req-1", 1000)
				s.Route(start, Route{Attempt: 1, Policy: "cost_model", Replica: "r0", Predicted: true, CachedTokens: 512, EstimatedTTFT: 30 * time.Millisecond})
				u := s.Upstream(1, "r0", "http://10.0.0.7:8000", path)
				u.Inject(out)
				u.Event(FirstByte)
				u.End(200, "2xx", nil)
				s.Served("r0", 1)
				s.End(200, "2xx", nil)
				Sink = s
			}
		})
	}
}

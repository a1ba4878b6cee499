package frontend

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/inferrail/inferrail/sim"
	"github.com/inferrail/inferrail/transport/tracing"
)

// promptTokens is what fixedTokenizer says every prompt is long.
const promptTokens = 7

// fixedTokenizer prepares every prompt as promptTokens tokens and no blocks.
type fixedTokenizer struct{}

func (fixedTokenizer) Prepare(string, bool, []byte, time.Time) (Prompt, bool) {
	return Prompt{Tokens: promptTokens, BlockSize: 16}, true
}

// startTraced runs a gateway in front of engines at urls whose spans, sampled
// at ratio, land in the returned exporter as they end.
func startTraced(t *testing.T, urls []string, ratio float64) (*gw, *tracetest.InMemoryExporter) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio))))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	g := startOpts(t, urls, nil, func(o *Options) {
		o.Tracer = tracing.New(tp)
		o.Tokenizer = fixedTokenizer{}
	})
	return g, exp
}

// startTracedSims is startTraced in front of n zero-latency simulators.
func startTracedSims(t *testing.T, n int, ratio float64) (*gw, *tracetest.InMemoryExporter) {
	t.Helper()
	sims, urls := startSims(t, n, nil)
	g, exp := startTraced(t, urls, ratio)
	g.sims = sims
	return g, exp
}

// traceOf waits for the spans of the request whose server span has id
// requestID, and returns its server span and the children, in the order
// they ended.
func traceOf(t *testing.T, exp *tracetest.InMemoryExporter, requestID string) (server tracetest.SpanStub, children []tracetest.SpanStub) {
	t.Helper()
	waitFor(t, "server span of "+requestID, 5*time.Second, func() bool {
		for _, s := range exp.GetSpans() {
			if v, ok := attr(s, tracing.KeyRequestID); ok && v.AsString() == requestID {
				server = s
				return true
			}
		}
		return false
	})
	for _, s := range exp.GetSpans() {
		if s.Parent.SpanID() == server.SpanContext.SpanID() && s.SpanContext.TraceID() == server.SpanContext.TraceID() {
			children = append(children, s)
		}
	}
	return server, children
}

func attr(s tracetest.SpanStub, k attribute.Key) (attribute.Value, bool) {
	for _, kv := range s.Attributes {
		if kv.Key == k {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

// wantAttrs checks s's attributes: a string, int or float64 value each, or
// nil for "present".
func wantAttrs(t *testing.T, s tracetest.SpanStub, want map[attribute.Key]any) {
	t.Helper()
	for k, w := range want {
		v, ok := attr(s, k)
		if !ok {
			t.Errorf("span %s: no %s; has %v", s.Name, k, s.Attributes)
			continue
		}
		switch w := w.(type) {
		case nil:
		case string:
			if v.AsString() != w {
				t.Errorf("span %s: %s = %q, want %q", s.Name, k, v.String(), w)
			}
		case int:
			if v.AsInt64() != int64(w) {
				t.Errorf("span %s: %s = %s, want %d", s.Name, k, v.String(), w)
			}
		}
	}
}

func hasEvent(s tracetest.SpanStub, name string) bool {
	for _, e := range s.Events {
		if e.Name == name {
			return true
		}
	}
	return false
}

// byName splits spans by name.
func byName(spans []tracetest.SpanStub) map[string][]tracetest.SpanStub {
	m := map[string][]tracetest.SpanStub{}
	for _, s := range spans {
		m[s.Name] = append(m[s.Name], s)
	}
	return m
}

// TestTraceSpans: a request is a server span with the request's attributes,
// and its attempt a route span and an upstream client span beneath it.
func TestTraceSpans(t *testing.T) {
	g, exp := startTracedSims(t, 2, 1)
	for _, stream := range []bool{false, true} {
		id := "trace-" + map[bool]string{false: "plain", true: "stream"}[stream]
		resp, body := g.post("/v1/chat/completions", chat("hello traces", 4, stream), "X-Request-Id", id)
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", id, resp.StatusCode, body)
		}
		replica := resp.Header.Get("X-Inferrail-Replica")
		server, children := traceOf(t, exp, id)
		if server.Name != "POST /v1/chat/completions" || server.SpanKind != trace.SpanKindServer {
			t.Errorf("%s: server span %q kind %v", id, server.Name, server.SpanKind)
		}
		if server.Parent.IsValid() {
			t.Errorf("%s: server span has a parent %v; the client sent no traceparent", id, server.Parent)
		}
		if server.Status.Code != codes.Unset {
			t.Errorf("%s: server span status %v", id, server.Status)
		}
		wantAttrs(t, server, map[attribute.Key]any{
			tracing.KeyMethod: "POST", tracing.KeyPath: "/v1/chat/completions", tracing.KeyStatus: 200,
			tracing.KeyModel: model, tracing.KeyPromptTokens: promptTokens, tracing.KeyReplica: replica,
			tracing.KeyAttempts: 1,
		})
		kids := byName(children)
		if len(kids[tracing.RouteSpan]) != 1 || len(kids[tracing.UpstreamSpan]) != 1 || len(children) != 2 {
			t.Fatalf("%s: children %v, want one route and one upstream span", id, kids)
		}
		route, up := kids[tracing.RouteSpan][0], kids[tracing.UpstreamSpan][0]
		wantAttrs(t, route, map[attribute.Key]any{
			tracing.KeyAttempt: 1, tracing.KeyReplica: replica, tracing.KeyPolicy: resp.Header.Get("X-Inferrail-Policy"),
		})
		if up.SpanKind != trace.SpanKindClient {
			t.Errorf("%s: upstream span kind %v", id, up.SpanKind)
		}
		wantAttrs(t, up, map[attribute.Key]any{
			tracing.KeyAttempt: 1, tracing.KeyReplica: replica, tracing.KeyStatus: 200, tracing.KeyOutcome: "2xx",
			tracing.KeyURL: nil,
		})
		if v, _ := attr(up, tracing.KeyURL); !strings.HasSuffix(v.AsString(), "/v1/chat/completions") {
			t.Errorf("%s: url.full %q", id, v.AsString())
		}
		if !hasEvent(up, tracing.FirstByte) {
			t.Errorf("%s: upstream span has no %s event: %v", id, tracing.FirstByte, up.Events)
		}
		if stream != hasEvent(up, tracing.FirstChunk) {
			t.Errorf("%s: %s event present = %v, want %v", id, tracing.FirstChunk, !stream, stream)
		}
		if up.StartTime.Before(route.EndTime) || up.EndTime.After(server.EndTime) {
			t.Errorf("%s: upstream span [%v, %v] not after the route span (ended %v) within the request (ended %v)",
				id, up.StartTime, up.EndTime, route.EndTime, server.EndTime)
		}
	}
}

// TestTraceRetry: every attempt gets its own route and upstream spans, and
// the failed attempt's upstream span is an error.
func TestTraceRetry(t *testing.T) {
	g, exp := startTracedSims(t, 2, 1)
	g.sims[0].SetFault(sim.Fault{Kind: sim.FaultFail, Status: 503})
	for i := 0; i < 30; i++ {
		id := "retry-" + string(rune('a'+i))
		resp, body := g.post("/v1/completions", `{"model":"sim","prompt":"hi","max_tokens":2}`, "X-Request-Id", id)
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", id, resp.StatusCode, body)
		}
		server, children := traceOf(t, exp, id)
		if v, _ := attr(server, tracing.KeyAttempts); v.AsInt64() < 2 {
			continue
		}
		kids := byName(children)
		routes, ups := kids[tracing.RouteSpan], kids[tracing.UpstreamSpan]
		if len(routes) != 2 || len(ups) != 2 {
			t.Fatalf("%s: %d route and %d upstream spans, want 2 each", id, len(routes), len(ups))
		}
		first, second := ups[0], ups[1]
		if first.StartTime.After(second.StartTime) {
			first, second = second, first
		}
		wantAttrs(t, first, map[attribute.Key]any{tracing.KeyAttempt: 1, tracing.KeyReplica: "r0",
			tracing.KeyStatus: 503, tracing.KeyOutcome: "retried"})
		if first.Status.Code != codes.Error {
			t.Errorf("%s: the failed attempt's status is %v", id, first.Status)
		}
		wantAttrs(t, second, map[attribute.Key]any{tracing.KeyAttempt: 2, tracing.KeyReplica: "r1", tracing.KeyStatus: 200})
		if second.Status.Code == codes.Error || server.Status.Code == codes.Error {
			t.Errorf("%s: the served attempt or the request is an error: %v, %v", id, second.Status, server.Status)
		}
		return
	}
	t.Fatal("no request was retried in 30")
}

// TestTracePropagation: a client's traceparent is continued, and the engine
// gets the upstream span as its parent.
func TestTracePropagation(t *testing.T) {
	eng := newFakeEngine(t, func([]byte) ([]byte, bool, uint64) { return []byte(`{"ok":true}`), false, 1 })
	g, exp := startTraced(t, []string{eng.url()}, 1)
	const (
		clientTrace = "0af7651916cd43dd8448eb211c80319c"
		clientSpan  = "b7ad6b7169203331"
	)
	resp, body := g.post("/v1/completions", `{"model":"sim","prompt":"hi"}`, "X-Request-Id", "continued",
		"Traceparent", "00-"+clientTrace+"-"+clientSpan+"-01", "Tracestate", "vendor=x")
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	server, children := traceOf(t, exp, "continued")
	if got := server.SpanContext.TraceID().String(); got != clientTrace {
		t.Errorf("server span's trace %s, want the client's %s", got, clientTrace)
	}
	if got := server.Parent.SpanID().String(); got != clientSpan || !server.Parent.IsRemote() {
		t.Errorf("server span's parent %s (remote %v), want the client's span %s", got, server.Parent.IsRemote(), clientSpan)
	}
	ups := byName(children)[tracing.UpstreamSpan]
	if len(ups) != 1 {
		t.Fatalf("%d upstream spans", len(ups))
	}
	want := "00-" + clientTrace + "-" + ups[0].SpanContext.SpanID().String() + "-01"
	eng.mu.Lock()
	got := eng.traceparents[len(eng.traceparents)-1]
	eng.mu.Unlock()
	if got != want {
		t.Errorf("engine got traceparent %q, want %q (the upstream span)", got, want)
	}
	if ts := ups[0].SpanContext.TraceState().String(); ts != "vendor=x" {
		t.Errorf("tracestate %q not carried", ts)
	}

	// Without a traceparent the gateway starts the trace, and the engine
	// joins it.
	resp, _ = g.post("/v1/completions", `{"model":"sim","prompt":"hi"}`, "X-Request-Id", "fresh")
	if resp.StatusCode != 200 {
		t.Fatal(resp.Status)
	}
	server, _ = traceOf(t, exp, "fresh")
	eng.mu.Lock()
	got = eng.traceparents[len(eng.traceparents)-1]
	eng.mu.Unlock()
	if tid := server.SpanContext.TraceID().String(); tid == clientTrace || !strings.HasPrefix(got, "00-"+tid+"-") || !strings.HasSuffix(got, "-01") {
		t.Errorf("engine got traceparent %q; the request's trace is %s", got, tid)
	}
}

// TestTraceUnsampled: at ratio 0 the gateway records nothing, but still
// tells the engine the trace is not sampled; a client's sampled trace is
// followed whatever the ratio.
func TestTraceUnsampled(t *testing.T) {
	eng := newFakeEngine(t, func([]byte) ([]byte, bool, uint64) { return []byte(`{"ok":true}`), true, 1 })
	g, exp := startTraced(t, []string{eng.url()}, 0)
	for range 5 {
		resp, body := g.post("/v1/completions", `{"model":"sim","prompt":"hi"}`)
		if resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
	}
	if spans := exp.GetSpans(); len(spans) != 0 {
		t.Fatalf("ratio 0 recorded %d spans: %v", len(spans), byName(spans))
	}
	eng.mu.Lock()
	for _, tp := range eng.traceparents {
		if len(tp) != 55 || !strings.HasSuffix(tp, "-00") {
			t.Errorf("engine got traceparent %q, want an unsampled one", tp)
		}
	}
	eng.mu.Unlock()

	resp, _ := g.post("/v1/completions", `{"model":"sim","prompt":"hi"}`, "X-Request-Id", "parent-sampled",
		"Traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
	if resp.StatusCode != 200 {
		t.Fatal(resp.Status)
	}
	if _, children := traceOf(t, exp, "parent-sampled"); len(children) != 2 {
		t.Errorf("a sampled client trace got %d child spans, want 2", len(children))
	}
}

package tracing

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestTracesURL(t *testing.T) {
	f := func(in, want string) {
		t.Helper()
		got, err := TracesURL(in)
		if want == "" {
			if err == nil {
				t.Errorf("TracesURL(%q) = %q, want an error", in, got)
			}
			return
		}
		if err != nil || got != want {
			t.Errorf("TracesURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	f("http://localhost:4318", "http://localhost:4318/v1/traces")
	f("http://localhost:4318/", "http://localhost:4318/v1/traces")
	f("http://localhost:4318/v1/traces", "http://localhost:4318/v1/traces")
	f("https://collector.example/otlp/v1/traces", "https://collector.example/otlp/v1/traces")
	f("https://collector.example/custom", "https://collector.example/custom")
	f("collector:4318", "")
	f("grpc://collector:4317", "")
	f("http://", "")
}

// mapCarrier is a header map for propagation.
type mapCarrier = propagation.MapCarrier

// TestOffCostsNothing: a nil Tracer and the Spans it returns allocate
// nothing, whatever is called on them.
func TestOffCostsNothing(t *testing.T) {
	var tr *Tracer
	h := mapCarrier{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
	path := []byte("/v1/chat/completions")
	start := time.Now()
	allocs := testing.AllocsPerRun(100, func() {
		s := tr.Request("POST /v1/chat/completions", "POST", path, h, start)
		s.Describe("m", "id", 3)
		s.Route(start, Route{Attempt: 1, Policy: "p", Replica: "r", Predicted: true})
		u := s.Upstream(1, "r", "http://x", path)
		u.Inject(h)
		u.Event(FirstByte)
		u.End(200, "2xx", nil)
		s.Served("r", 1)
		s.End(200, "2xx", nil)
	})
	if allocs != 0 {
		t.Errorf("tracing off: %v allocs per request, want 0", allocs)
	}
}

// TestSpans: the spans and their parents, through the SDK.
func TestSpans(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tp.Shutdown(context.Background())
	tr := New(tp)
	start := time.Now()
	s := tr.Request("POST /v1/completions", "POST", []byte("/v1/completions"), mapCarrier{}, start)
	s.Route(start, Route{Attempt: 1, Err: errors.New("no replica")})
	u := s.Upstream(1, "r0", "http://x", []byte("/v1/completions"))
	h := mapCarrier{}
	u.Inject(h)
	u.End(0, "failed", errors.New("refused"))
	s.End(503, "no_replica", nil)
	spans := exp.GetSpans()
	if len(spans) != 3 {
		t.Fatalf("%d spans", len(spans))
	}
	route, up, server := spans[0], spans[1], spans[2]
	if route.Name != RouteSpan || up.Name != UpstreamSpan || server.Name != "POST /v1/completions" {
		t.Fatalf("spans %q %q %q", route.Name, up.Name, server.Name)
	}
	for _, c := range []tracetest.SpanStub{route, up} {
		if c.Parent.SpanID() != server.SpanContext.SpanID() {
			t.Errorf("%s: parent %v, want the server span", c.Name, c.Parent.SpanID())
		}
		if c.Status.Code.String() != "Error" {
			t.Errorf("%s: status %v, want Error", c.Name, c.Status)
		}
	}
	if server.Status.Code.String() != "Error" || !server.StartTime.Equal(start) {
		t.Errorf("server span: status %v start %v", server.Status, server.StartTime)
	}
	if want := "00-" + up.SpanContext.TraceID().String() + "-" + up.SpanContext.SpanID().String() + "-01"; h["traceparent"] != want {
		t.Errorf("injected %q, want %q", h["traceparent"], want)
	}
}

// collector records the OTLP exports it receives.
type collector struct {
	mu    sync.Mutex
	posts []export
}

type export struct {
	method, path, contentType string
	body                      int
}

func (c *collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.posts = append(c.posts, export{r.Method, r.URL.Path, r.Header.Get("Content-Type"), len(b)})
	w.Header().Set("Content-Type", "application/x-protobuf")
}

// TestProviderExports: the Provider posts its spans as OTLP protobuf to
// /v1/traces of a bare endpoint, by Shutdown at the latest.
func TestProviderExports(t *testing.T) {
	col := &collector{}
	srv := httptest.NewServer(col)
	defer srv.Close()
	p, err := Start(Options{Endpoint: srv.URL, SampleRatio: 1, ServiceVersion: "test"})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		s := p.Tracer().Request("POST /v1/completions", "POST", []byte("/v1/completions"), mapCarrier{}, time.Now())
		s.End(200, "2xx", nil)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := p.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	col.mu.Lock()
	defer col.mu.Unlock()
	if len(col.posts) == 0 {
		t.Fatal("no export")
	}
	for _, e := range col.posts {
		if e.method != "POST" || e.path != "/v1/traces" || e.contentType != "application/x-protobuf" || e.body == 0 {
			t.Errorf("export %+v", e)
		}
	}
}

// TestExportFailureLogged: a failing collector is logged once when it
// starts failing and once when it recovers; the processor sees no error.
func TestExportFailureLogged(t *testing.T) {
	var logs bytes.Buffer
	fake := &fakeExporter{errs: []error{errors.New("refused"), errors.New("refused"), nil, nil}}
	e := &watchedExporter{SpanExporter: fake, log: slog.New(slog.NewTextHandler(&logs, nil)), endpoint: "http://c/v1/traces"}
	for range 4 {
		if err := e.ExportSpans(context.Background(), nil); err != nil {
			t.Fatal(err)
		}
	}
	out := logs.String()
	if strings.Count(out, "trace export failing") != 1 || strings.Count(out, "trace export recovered") != 1 {
		t.Errorf("logs:\n%s", out)
	}
}

type fakeExporter struct {
	sdktrace.SpanExporter
	errs []error
}

func (f *fakeExporter) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error {
	err := f.errs[0]
	f.errs = f.errs[1:]
	return err
}

// TestUnreachableCollector: spans to a collector that refuses connections
// are dropped without delaying whoever ends them, and Shutdown returns in
// time.
func TestUnreachableCollector(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	endpoint := srv.URL
	srv.Close() // nothing listens there now
	p, err := Start(Options{Endpoint: endpoint, SampleRatio: 1})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	for range 3 * queueSize {
		s := p.Tracer().Request("POST /v1/completions", "POST", []byte("/v1/completions"), mapCarrier{}, time.Now())
		s.End(200, "2xx", nil)
	}
	if d := time.Since(t0); d > 2*time.Second {
		t.Errorf("ending %d spans took %v", 3*queueSize, d)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	p.Shutdown(ctx)
	if d := time.Since(t0); d > 5*time.Second {
		t.Errorf("shutdown took until %v", d)
	}
}

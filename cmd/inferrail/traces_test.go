package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// otlpCollector records the trace exports posted to it.
type otlpCollector struct {
	mu      sync.Mutex
	bad     []string // exports that were not OTLP protobuf to /v1/traces
	exports []*coltrace.ExportTraceServiceRequest
}

func (c *otlpCollector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, err := io.ReadAll(r.Body)
	c.mu.Lock()
	defer c.mu.Unlock()
	req := &coltrace.ExportTraceServiceRequest{}
	switch {
	case r.Method != "POST" || r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf":
		c.bad = append(c.bad, r.Method+" "+r.URL.Path+" "+r.Header.Get("Content-Type"))
	case err != nil || len(b) == 0:
		c.bad = append(c.bad, "empty body")
	case proto.Unmarshal(b, req) != nil:
		c.bad = append(c.bad, "not an ExportTraceServiceRequest")
	default:
		c.exports = append(c.exports, req)
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
}

// With observability.otlp_endpoint set to a bare collector address, the
// gateway posts its spans to /v1/traces, as inferrail, by the time serve
// returns.
func TestOTLPExportEndToEnd(t *testing.T) {
	col := &otlpCollector{}
	srv := httptest.NewServer(col)
	defer srv.Close()
	sims, opts := zeroLatencySims(t, 2)
	cfg := gatewayConfig(sims, opts)
	cfg.Observability.OTLPEndpoint = srv.URL
	cfg.Observability.TraceSampleRatio = 1
	addr, _, stop := startGatewayStoppable(t, cfg)
	const n = 5
	for i := range n {
		resp, err := http.Post("http://"+addr+"/v1/completions", "application/json",
			strings.NewReader(`{"model":"sim","max_tokens":2,"prompt":"trace me `+strconv.Itoa(i)+`"}`))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("request %d: %d", i, resp.StatusCode)
		}
	}
	stop() // flushes the spans
	col.mu.Lock()
	defer col.mu.Unlock()
	if len(col.bad) > 0 {
		t.Errorf("bad exports: %v", col.bad)
	}
	if len(col.exports) == 0 {
		t.Fatal("the collector received no export")
	}
	names := map[string]int{}
	for _, e := range col.exports {
		for _, rs := range e.ResourceSpans {
			res := map[string]string{}
			for _, kv := range rs.GetResource().GetAttributes() {
				res[kv.Key] = kv.GetValue().GetStringValue()
			}
			if res["service.name"] != "inferrail" || res["service.version"] != version {
				t.Errorf("resource %v", res)
			}
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					names[s.Name]++
				}
			}
		}
	}
	if names["POST /v1/completions"] != n || names["route"] != n || names["upstream"] != n {
		t.Errorf("spans exported: %v, want %d of each", names, n)
	}
}

package frontend

import (
	"path/filepath"
	"testing"

	"github.com/VictoriaMetrics/metrics"

	"github.com/inferrail/inferrail/sim"
	"github.com/inferrail/inferrail/transport/requestlog"
)

// The request log's line for a request that did not end well: an engine's
// error answer is relayed (its replica and times logged), a request no
// engine answered has neither, and what is not a generation request, or
// names no served model, has no line.
func TestRequestLogFailures(t *testing.T) {
	sims, urls := startSims(t, 1, nil)
	path := filepath.Join(t.TempDir(), "requests.jsonl")
	w, err := requestlog.Open(requestlog.Options{Path: path, SampleRate: 1, BlockSize: 512}, metrics.NewSet())
	if err != nil {
		t.Fatal(err)
	}
	g := startOpts(t, urls, nil, func(o *Options) { o.RequestLog = w })
	g.sims = sims

	sims[0].SetFault(sim.Fault{Kind: sim.FaultFail, Status: 400})
	if resp, body := g.post("/v1/completions", `{"model":"sim","prompt":"hi","max_tokens":2}`); resp.StatusCode != 400 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	sims[0].SetFault(sim.Fault{})
	if resp, _ := g.post("/v1/completions", `{"model":"nope","prompt":"hi","max_tokens":2}`); resp.StatusCode != 404 {
		t.Fatalf("unknown model: %d", resp.StatusCode)
	}
	if resp, _ := g.post("/tokenize", `{"model":"sim","prompt":"hi"}`); resp.StatusCode != 200 {
		t.Fatalf("tokenize: %d", resp.StatusCode)
	}
	sims[0].Kill()
	resp, body := g.post("/v1/chat/completions", chat("hello", 2, true))
	if resp.StatusCode < 500 {
		t.Fatalf("a dead engine: %d %s", resp.StatusCode, body)
	}
	gone := resp.StatusCode

	g.fe.Shutdown(t.Context())
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	lines, err := requestlog.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) != 2 {
		t.Fatalf("%d lines, want 2: %+v", len(lines), lines)
	}
	if l := lines[0]; l.Status != 400 || l.Replica != "r0" || l.TTFT == nil || l.E2E == nil || l.OutputLength != 0 || l.Policy == "" {
		t.Fatalf("the engine's 400: %+v", l)
	}
	if l := lines[1]; l.Status != gone || l.Replica != "" || l.TTFT != nil || l.E2E != nil || l.Cached != nil {
		t.Fatalf("no engine answered (%d): %+v", gone, l)
	}
}

package extproc

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/inferrail/inferrail/transport/requestlog"
)

// The picker logs the requests it routes as the front end does: a stream
// with its usage, replica and times, and a stream its client left, with
// the status it had been sent and no usage.
func TestRequestLog(t *testing.T) {
	p := startPicker(t, 1, nil)
	path := filepath.Join(t.TempDir(), "requests.jsonl")
	w, err := requestlog.Open(requestlog.Options{Path: path, SampleRate: 1, BlockSize: 512}, metrics.NewSet())
	if err != nil {
		t.Fatal(err)
	}
	p.srv.rlog = w

	r := post(chat("stream me some tokens", 8, true), 0)
	x, routed := p.route(r)
	if routed.Immediate != nil {
		t.Fatal("refused")
	}
	if status, _, out := p.forward(x, r, routed, 0); status != 200 || !strings.Contains(out, `"usage"`) {
		t.Fatalf("%d %s", status, out)
	}
	cancelMidStream(t, p)
	waitFor(t, "the lease released", 5*time.Second, func() bool { return p.inFlight("r0") == 0 })
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	lines, err := requestlog.ReadFile(path)
	if err != nil || len(lines) != 2 {
		t.Fatalf("%v: %+v", err, lines)
	}
	if l := lines[0]; l.Status != 200 || l.Replica != "r0" || l.Model != model || l.InputLength == 0 || len(l.HashIDs) != 1 ||
		l.OutputLength != 8 || l.TTFT == nil || l.E2E == nil || *l.E2E < *l.TTFT || l.Policy == "" {
		t.Fatalf("the stream: %+v", l)
	}
	if l := lines[1]; l.Status != 200 || l.Replica != "r0" || l.OutputLength != 0 || l.TTFT == nil || l.HashIDs[0] != 1 {
		t.Fatalf("the stream its client left: %+v", l)
	}
}

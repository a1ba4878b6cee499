package frontend

import (
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/inferrail/inferrail/sim"
)

// startFull runs one slow replica with room for two requests, with
// flow_control set by fc (nil leaves it off).
func startFull(t *testing.T, fc func(*gwConfig)) *gw {
	g := start(t, 1, func(o *sim.Options) {
		o.Engine.Latency.Zero = false
	}, func(c *gwConfig) {
		c.Replicas[0].MaxConcurrency = 2
		c.Replicas[0].MaxPending = 2
		if fc != nil {
			c.FlowControl.Enabled = true
			fc(c)
		}
	})
	reported(t, g)
	return g
}

// reported waits for every replica's first load report: until then the
// utilization-detector counts the pool saturated.
func reported(t testing.TB, g *gw) {
	t.Helper()
	waitFor(t, "the first load reports", 2*time.Second, func() bool {
		for _, s := range g.fl.Replicas() {
			if s.LoadAt.IsZero() {
				return false
			}
		}
		return true
	})
}

func (g *gw) queued() int64 {
	fq := g.fe.gate.models[model]
	return fq.n.Load()
}

// slowBody takes the simulator about 25 decode steps of 20ms: ~0.5s.
const slowBody = `{"prompt":"hi","max_tokens":25}`

type outcome struct {
	status  int
	body    string
	took    time.Duration
	dropped string // x-llm-d-request-dropped-reason
}

// burst sends n slow requests at once and returns their outcomes.
func burst(g *gw, n int) []outcome {
	out := make([]outcome, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			t0 := time.Now()
			resp, body := g.post("/v1/completions", slowBody)
			out[i] = outcome{resp.StatusCode, body, time.Since(t0), resp.Header.Get("X-Llm-D-Request-Dropped-Reason")}
		})
	}
	wg.Wait()
	return out
}

func engineFinished(g *gw) int64 {
	var n int64
	for _, c := range g.engineStats(0).FinishedByReason {
		n += c
	}
	return n
}

func TestFlowOffRejectsAtOnce(t *testing.T) {
	g := startFull(t, nil)
	if g.fe.gate.On() {
		t.Fatal("flow control is on by default")
	}
	ok, rejected := 0, 0
	for _, o := range burst(g, 6) {
		switch o.status {
		case 200:
			ok++
		case 503:
			rejected++
			if o.took > 300*time.Millisecond {
				t.Errorf("a 503 took %v", o.took)
			}
		default:
			t.Errorf("%d %s", o.status, o.body)
		}
	}
	if ok != 2 || rejected != 4 {
		t.Errorf("%d served, %d rejected; want 2 and 4", ok, rejected)
	}
}

func TestFlowQueuesUntilSlotsFree(t *testing.T) {
	g := startFull(t, func(c *gwConfig) { c.FlowControl.MaxWait = 10 * time.Second })
	t0 := time.Now()
	var peak int64
	done := make(chan []outcome)
	go func() { done <- burst(g, 6) }()
	var res []outcome
	for res == nil {
		select {
		case res = <-done:
		case <-time.After(time.Millisecond):
			peak = max(peak, g.queued())
		}
	}
	total := time.Since(t0)
	var slowest time.Duration
	for _, o := range res {
		if o.status != 200 {
			t.Errorf("%d %s", o.status, o.body)
		}
		slowest = max(slowest, o.took)
	}
	if peak != 4 {
		t.Errorf("at most %d queued, want 4", peak)
	}
	if n := g.queued(); n != 0 {
		t.Errorf("%d still queued", n)
	}
	fq := g.fe.gate.models[model]
	if got := fq.met.Queued.Get(); got != 0 {
		t.Errorf("inferrail_flow_queued = %v", got)
	}
	if n := engineFinished(g); n != 6 {
		t.Errorf("engine finished %d", n)
	}
	page := metricsPage(g)
	if !strings.Contains(page, `inferrail_flow_wait_seconds_count{model="`+model+`"} 4`) {
		t.Errorf("wait histogram:\n%s", grepLines(page, "inferrail_flow"))
	}
	t.Logf("6 requests, 2 slots: all served in %v (slowest client %v), peak queue %d", total, slowest, peak)
}

func TestFlowFullQueue(t *testing.T) {
	g := startFull(t, func(c *gwConfig) { c.FlowControl.MaxQueued = 1 })
	ok, rejected := 0, 0
	for _, o := range burst(g, 4) {
		switch o.status {
		case 200:
			ok++
		case 429:
			rejected++
			if !strings.Contains(o.body, "queue for it is full") || o.took > 300*time.Millisecond || o.dropped != "rejected-saturated" {
				t.Errorf("after %v: %s (dropped reason %q)", o.took, o.body, o.dropped)
			}
		default:
			t.Errorf("%d %s", o.status, o.body)
		}
	}
	if ok != 3 || rejected != 1 {
		t.Errorf("%d served, %d rejected; want 3 and 1", ok, rejected)
	}
	if !strings.Contains(metricsPage(g), `inferrail_flow_rejected_total{model="`+model+`",reason="full"} 1`) {
		t.Error("full rejection not counted")
	}
}

func TestFlowTimeout(t *testing.T) {
	const maxWait = 300 * time.Millisecond
	g := startFull(t, func(c *gwConfig) { c.FlowControl.MaxWait = maxWait })
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() { g.post("/v1/completions", `{"prompt":"hi","max_tokens":60}`) }) // ~1.2s each
	}
	defer wg.Wait()
	waitFor(t, "two in flight", 2*time.Second, func() bool { return g.fl.Replicas()[0].Counters.InFlight() == 2 })
	t0 := time.Now()
	resp, body := g.post("/v1/completions", `{"prompt":"hi","max_tokens":1}`)
	took := time.Since(t0)
	if resp.StatusCode != 429 || !strings.Contains(body, "waited") || resp.Header.Get("X-Llm-D-Request-Dropped-Reason") != "rejected-ttl-expired" ||
		resp.Header.Get("Retry-After") == "" {
		t.Fatalf("%d %s %v", resp.StatusCode, body, resp.Header)
	}
	if took < maxWait || took > maxWait+300*time.Millisecond {
		t.Errorf("answered after %v, want about %v", took, maxWait)
	}
	if n := g.queued(); n != 0 {
		t.Errorf("%d still queued", n)
	}
	if !strings.Contains(metricsPage(g), `inferrail_flow_rejected_total{model="`+model+`",reason="timeout"} 1`) {
		t.Error("timeout not counted")
	}
	t.Logf("max_wait %v: 429 after %v", maxWait, took)
}

func TestFlowClientLeavesQueue(t *testing.T) {
	g := startFull(t, func(*gwConfig) {})
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() { g.post("/v1/completions", `{"prompt":"hi","max_tokens":40}`) })
	}
	waitFor(t, "two in flight", 2*time.Second, func() bool { return g.fl.Replicas()[0].Counters.InFlight() == 2 })
	conn, err := net.Dial("tcp", g.addr)
	if err != nil {
		t.Fatal(err)
	}
	body := `{"prompt":"left","max_tokens":1}`
	req := "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
		strconv.Itoa(len(body)) + "\r\n\r\n" + body
	if _, err := conn.Write([]byte(req)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "queued", 2*time.Second, func() bool { return g.queued() == 1 })
	t0 := time.Now()
	conn.Close()
	waitFor(t, "left the queue", 2*time.Second, func() bool { return g.queued() == 0 })
	t.Logf("a queued client that left was dequeued after %v", time.Since(t0))
	wg.Wait()
	if n := engineFinished(g); n != 2 {
		t.Errorf("engine saw %d requests, want the 2 that were admitted", n)
	}
	if n := g.fe.gate.models[model].met.Queued.Get(); n != 0 {
		t.Errorf("inferrail_flow_queued = %v", n)
	}
	// And the queue still works.
	if resp, b := g.post("/v1/completions", `{"prompt":"hi","max_tokens":1}`); resp.StatusCode != 200 {
		t.Errorf("%d %s", resp.StatusCode, b)
	}
}

func metricsPage(g *gw) string {
	var b strings.Builder
	g.fe.met.WritePrometheus(&b)
	return b.String()
}

func grepLines(s, sub string) string {
	var out []string
	for l := range strings.Lines(s) {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "")
}

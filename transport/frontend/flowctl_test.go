package frontend

import (
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/inferrail/inferrail/actors/replica"
	"github.com/inferrail/inferrail/config"
	"github.com/inferrail/inferrail/model/flow"
	"github.com/inferrail/inferrail/sim"
	"github.com/inferrail/inferrail/sim/engine"
)

// startOneSlot runs one slow replica with room for one request, flow
// control on and edited by fc.
func startOneSlot(t *testing.T, simEdit func(*sim.Options), fc func(*config.FlowControl)) *gw {
	t.Helper()
	g := start(t, 1, func(o *sim.Options) {
		o.Engine.Latency.Zero = false
		if simEdit != nil {
			simEdit(o)
		}
	}, func(c *config.Config) {
		c.Replicas[0].MaxConcurrency = 1
		c.FlowControl.Enabled = true
		c.FlowControl.MaxWait = 10 * time.Second
		c.FlowControl.Objectives = map[string]int{"premium": 10, "batch": -1}
		if fc != nil {
			fc(&c.FlowControl)
		}
	})
	reported(t, g)
	return g
}

// sent is one request's answer, and when it came.
type sent struct {
	name    string
	status  int
	body    string
	dropped string
	at      time.Time
}

// sender posts requests in the background and collects their answers.
type sender struct {
	g   *gw
	wg  sync.WaitGroup
	mu  sync.Mutex
	out []sent
}

func (s *sender) send(name, body string, hdr ...string) {
	s.wg.Go(func() {
		resp, b := s.g.post("/v1/completions", body, hdr...)
		s.mu.Lock()
		s.out = append(s.out, sent{name, resp.StatusCode, b, resp.Header.Get("X-Llm-D-Request-Dropped-Reason"), time.Now()})
		s.mu.Unlock()
	})
}

// sendQueued sends a request and waits until the queue holds n.
func (s *sender) sendQueued(t *testing.T, n int64, name, body string, hdr ...string) {
	t.Helper()
	s.send(name, body, hdr...)
	waitFor(t, name+" queued", 5*time.Second, func() bool { return s.g.queued() == n })
}

// wait returns the answers in the order they came.
func (s *sender) wait() []sent {
	s.wg.Wait()
	slices.SortFunc(s.out, func(a, b sent) int { return a.at.Compare(b.at) })
	return s.out
}

func names(out []sent) []string {
	var n []string
	for _, o := range out {
		n = append(n, o.name)
	}
	return n
}

// holdSlot fills the replica's one slot for a while.
func holdSlot(t *testing.T, g *gw, s *sender, maxTokens string) {
	t.Helper()
	s.send("hold", `{"prompt":"hold","max_tokens":`+maxTokens+`}`)
	waitFor(t, "the slot taken", 2*time.Second, func() bool { return g.fl.Replicas()[0].Counters.InFlight() == 1 })
}

const quick = `{"prompt":"q","max_tokens":2}`

// TestFlowPriorityBands: a higher band always leaves first, whatever
// waited longer in a lower one; an objective not configured takes the
// default priority.
func TestFlowPriorityBands(t *testing.T) {
	g := startOneSlot(t, nil, nil)
	s := &sender{g: g}
	holdSlot(t, g, s, "15")
	s.sendQueued(t, 1, "low1", quick)
	s.sendQueued(t, 2, "low2", quick, "X-Llm-D-Inference-Objective", "unknown")
	s.sendQueued(t, 3, "high", quick, "X-Llm-D-Inference-Objective", "premium")
	out := s.wait()
	if got, want := names(out), []string{"hold", "high", "low1", "low2"}; !slices.Equal(got, want) {
		t.Errorf("served %v, want %v", got, want)
	}
	page := metricsPage(g)
	for _, want := range []string{`inferrail_flow_band_queued{model="` + model + `",priority="10"} 0`,
		`inferrail_flow_band_queued{model="` + model + `",priority="0"} 0`,
		`inferrail_flow_dispatched_total{model="` + model + `"} 3`} {
		if !strings.Contains(page, want) {
			t.Errorf("metrics lack %s:\n%s", want, grepLines(page, "inferrail_flow"))
		}
	}
}

// TestFlowRoundRobin: with round-robin fairness, flows (the fairness id
// header, else the tenant) take turns in their band; with the default,
// global strict, they leave in arrival order.
func TestFlowRoundRobin(t *testing.T) {
	for _, c := range []struct {
		fairness string
		want     []string
	}{
		{flow.FairnessRoundRobin, []string{"hold", "a1", "b1", "a2", "b2", "a3", "a4"}},
		{flow.FairnessGlobalStrict, []string{"hold", "a1", "a2", "a3", "a4", "b1", "b2"}},
	} {
		t.Run(c.fairness, func(t *testing.T) {
			g := startOneSlot(t, nil, func(fc *config.FlowControl) { fc.Fairness = c.fairness })
			s := &sender{g: g}
			holdSlot(t, g, s, "15")
			for i, n := range []string{"a1", "a2", "a3", "a4"} {
				s.sendQueued(t, int64(i+1), n, quick, "X-Llm-D-Inference-Fairness-Id", "a")
			}
			s.sendQueued(t, 5, "b1", quick, "X-Llm-D-Inference-Fairness-Id", "b")
			s.sendQueued(t, 6, "b2", quick, "X-Llm-D-Inference-Fairness-Id", "b")
			if got := names(s.wait()); !slices.Equal(got, c.want) {
				t.Errorf("served %v, want %v", got, c.want)
			}
		})
	}
}

// TestFlowShed: while the pool is saturated (concurrency-detector, one in
// flight of one), a sheddable request gets 429 rejected-saturated at once
// with Retry-After, and others queue until it is not.
func TestFlowShed(t *testing.T) {
	g := startOneSlot(t, nil, func(fc *config.FlowControl) {
		fc.SaturationDetector.Type = flow.DetectorConcurrency
		fc.SaturationDetector.MaxConcurrency = 1
	})
	s := &sender{g: g}
	holdSlot(t, g, s, "10")
	t0 := time.Now()
	resp, body := g.post("/v1/completions", quick, "X-Llm-D-Inference-Objective", "batch")
	if resp.StatusCode != 429 || resp.Header.Get("X-Llm-D-Request-Dropped-Reason") != "rejected-saturated" ||
		resp.Header.Get("Retry-After") == "" || !strings.Contains(body, "sheddable") || time.Since(t0) > 300*time.Millisecond {
		t.Errorf("sheddable while saturated: %d %s %v after %v", resp.StatusCode, body, resp.Header, time.Since(t0))
	}
	s.sendQueued(t, 1, "normal", quick)
	out := s.wait()
	if got := names(out); !slices.Equal(got, []string{"hold", "normal"}) || out[1].status != 200 {
		t.Errorf("served %v (%+v)", got, out)
	}
	if !strings.Contains(metricsPage(g), `inferrail_flow_rejected_total{model="`+model+`",reason="shed"} 1`) {
		t.Error("shed not counted")
	}
	// Not saturated, a sheddable request is served.
	if resp, body := g.post("/v1/completions", quick, "X-Llm-D-Inference-Objective", "batch"); resp.StatusCode != 200 {
		t.Errorf("sheddable, pool idle: %d %s", resp.StatusCode, body)
	}
}

// startOneSeq runs one replica whose engine runs one sequence at a time,
// with room for slots at the gateway and the utilization-detector's
// queue_depth_threshold at threshold.
func startOneSeq(t *testing.T, threshold, slots int) *gw {
	t.Helper()
	g := startOneSlot(t, func(o *sim.Options) { o.Engine.MaxNumSeqs = 1 }, func(fc *config.FlowControl) {
		fc.SaturationDetector.QueueDepthThreshold = threshold
	})
	next := *g.cfg
	next.Replicas = slices.Clone(g.cfg.Replicas)
	next.Replicas[0].MaxConcurrency = slots
	if err := g.fl.Reconfigure(&next); err != nil {
		t.Fatal(err)
	}
	return g
}

// TestFlowUtilization: the utilization-detector reads the engine's own
// waiting queue: an engine that runs one sequence and holds another
// waiting is saturated at queue_depth_threshold 1, so a sheddable request
// is refused although the gateway's own caps have room.
func TestFlowUtilization(t *testing.T) {
	// Room for 8 at the gateway: the engine's own queue is what saturates.
	g := startOneSeq(t, 1, 8)
	s := &sender{g: g}
	s.send("run", `{"prompt":"a","max_tokens":40}`)
	s.send("wait", `{"prompt":"b","max_tokens":40}`)
	waitFor(t, "the engine's queue reported", 3*time.Second, func() bool { return g.fl.Replicas()[0].Load.Waiting >= 1 })
	resp, body := g.post("/v1/completions", quick, "X-Llm-D-Inference-Objective", "batch")
	if resp.StatusCode != 429 || resp.Header.Get("X-Llm-D-Request-Dropped-Reason") != "rejected-saturated" {
		t.Errorf("sheddable while the engine queues: %d %s", resp.StatusCode, body)
	}
	s.wait()
}

// TestFlowEvict: with eviction on, a full queue makes room for a
// higher-priority request by evicting a sheddable one, which gets 429
// evicted-queue-pressure; without it, the newcomer is refused.
func TestFlowEvict(t *testing.T) {
	for _, evict := range []bool{true, false} {
		g := startOneSlot(t, nil, func(fc *config.FlowControl) {
			fc.MaxQueued = 1
			fc.Eviction = evict
		})
		s := &sender{g: g}
		holdSlot(t, g, s, "10")
		s.sendQueued(t, 1, "batch", quick, "X-Llm-D-Inference-Objective", "batch")
		s.send("normal", quick)
		out := s.wait()
		want := map[string][2]any{"hold": {200, ""}, "batch": {429, "evicted-queue-pressure"}, "normal": {200, ""}}
		if !evict {
			want = map[string][2]any{"hold": {200, ""}, "batch": {200, ""}, "normal": {429, "rejected-saturated"}}
		}
		for _, o := range out {
			if w := want[o.name]; o.status != w[0] || o.dropped != w[1] {
				t.Errorf("eviction %v: %s got %d %q (%s), want %v", evict, o.name, o.status, o.dropped, o.body, w)
			}
		}
	}
}

// TestFlowReload: flow control turns on, and its policies change, by a
// live reload.
func TestFlowReload(t *testing.T) {
	g := startFull(t, nil)
	if o := burst(g, 4); statusCount(o, 503) != 2 {
		t.Fatalf("off: %+v", o)
	}
	next := *g.cfg
	next.FlowControl.Enabled = true
	next.FlowControl.MaxWait = 10 * time.Second
	g.fe.SetConfig(&next)
	if o := burst(g, 4); statusCount(o, 200) != 4 {
		t.Errorf("on after a reload: %+v", o)
	}
	off := next
	off.FlowControl.Enabled = false
	g.fe.SetConfig(&off)
	if o := burst(g, 4); statusCount(o, 503) != 2 {
		t.Errorf("off again: %+v", o)
	}
}

func statusCount(out []outcome, status int) int {
	n := 0
	for _, o := range out {
		if o.status == status {
			n++
		}
	}
	return n
}

// TestFlowStaleWarning: when the utilization-detector counts a replica
// saturated for stale metrics, the operator is told (a warning on the
// replica, logged), requests wait, and the warning clears once a reload
// makes the reports fresh enough.
func TestFlowStaleWarning(t *testing.T) {
	g := startOneSlot(t, nil, func(fc *config.FlowControl) {
		fc.SaturationDetector.MetricsStalenessThreshold = time.Nanosecond
		fc.MaxWait = 200 * time.Millisecond
	})
	resp, body := g.post("/v1/completions", quick)
	if resp.StatusCode != 429 || resp.Header.Get("X-Llm-D-Request-Dropped-Reason") != "rejected-ttl-expired" {
		t.Errorf("stale metrics: %d %s", resp.StatusCode, body)
	}
	snap := g.fl.Replicas()[0]
	if !snap.Warnings.Active(replica.WarnFlowStale) || !strings.Contains(g.logs.String(), "flow_metrics_stale") {
		t.Fatalf("no warning: %v\n%s", snap.Warnings.List(), g.logs.String())
	}
	next := *g.cfg
	next.FlowControl.SaturationDetector.MetricsStalenessThreshold = time.Minute
	g.fe.SetConfig(&next)
	if resp, body := g.post("/v1/completions", quick); resp.StatusCode != 200 {
		t.Errorf("fresh enough: %d %s", resp.StatusCode, body)
	}
	if g.fl.Replicas()[0].Warnings.Active(replica.WarnFlowStale) {
		t.Error("the warning stays")
	}
}

// TestFlowNoEndpoints: with flow control on, a model without a healthy
// replica is answered 503 rejected-no-endpoints at once, not queued.
func TestFlowNoEndpoints(t *testing.T) {
	g := startWith(t, []string{"http://127.0.0.1:1"}, func(c *config.Config) {
		c.FlowControl.Enabled = true
		c.Retry.MaxAttempts = 1
	})
	waitFor(t, "the replica down", 3*time.Second, func() bool { return !g.fl.Replicas()[0].Healthy })
	t0 := time.Now()
	resp, body := g.post("/v1/completions", quick)
	if resp.StatusCode != 503 || resp.Header.Get("X-Llm-D-Request-Dropped-Reason") != "rejected-no-endpoints" || time.Since(t0) > time.Second {
		t.Errorf("no healthy replica: %d %s %v after %v", resp.StatusCode, body, resp.Header, time.Since(t0))
	}
}

// TestFlowDrainStopsAtThreshold: when an engine's report shows room
// again, the gateway's queue does not drain into it all at once: the head
// is judged afresh at each dispatch, and the requests sent since the
// report count in the engine's waiting queue, so the engine queues no more
// than queue_depth_threshold, give or take the one request that may come
// and go between the engine's last step and the scrape that reads its page
// (issue 15's overload scenario saw engines of 4 sequences queue 33 behind
// a threshold of 5 before).
func TestFlowDrainStopsAtThreshold(t *testing.T) {
	const threshold = 2
	g := startOneSeq(t, threshold, 64)
	s := &sender{g: g}
	long := `{"prompt":"x","max_tokens":20}`
	s.send("run", long)
	s.send("wait-1", long)
	s.send("wait-2", long)
	waitFor(t, "the engine's queue reported full", 3*time.Second, func() bool { return g.fl.Replicas()[0].Load.Waiting >= threshold })
	for i := range 8 {
		s.sendQueued(t, int64(i+1), "queued", long)
	}
	// Until every request is answered, the engine's own queue stays at the
	// threshold.
	done := make(chan []sent)
	go func() { done <- s.wait() }()
	most := 0
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	var out []sent
	for out == nil {
		select {
		case out = <-done:
		case <-tick.C:
			g.sims[0].Inspect(func(e *engine.Engine) { most = max(most, e.Stats().Waiting) })
		}
	}
	if most > threshold+1 {
		t.Errorf("the engine queued %d while the gateway drained its queue, over queue_depth_threshold %d + 1", most, threshold)
	}
	for _, o := range out {
		if o.status != 200 {
			t.Errorf("%s: %d %s", o.name, o.status, o.body)
		}
	}
}

// TestFlowVerdictRoom: a verdict of room is reused for no more dispatches
// than it found room for, so a burst that lands within satReuse cannot all
// pass on it: with queue_depth_threshold 5 and an idle engine, the sixth
// request in a burst, the first five dispatched, finds the pool saturated.
// Checks that dispatch nothing reuse it freely.
func TestFlowVerdictRoom(t *testing.T) {
	g := startFull(t, func(c *gwConfig) {})
	gate, gc := g.fe.gate, g.fe.gate.cfg.Load()
	fq, counters := gate.models[model], g.fl.Replicas()[0].Counters
	for i := range 5 {
		for range 10 {
			if sat, _ := gate.saturated(gc, model, true); sat {
				t.Fatalf("request %d of the burst found the pool saturated", i+1)
			}
		}
		// Dispatched, as Admit counts it.
		fq.sent.Add(1)
		defer counters.Acquire().Release()
	}
	if sat, _ := gate.saturated(gc, model, true); !sat {
		t.Error("the sixth request of the burst, five in flight since the report, found room")
	}
}

// TestGateDue: under slo-deadline-ordering-policy a wait is ordered by
// when its first token is due (received plus x-llm-d-slo-ttft-ms, none
// last), under edf-ordering-policy by when the wait would end.
func TestGateDue(t *testing.T) {
	received := time.Unix(100, 0)
	end := received.Add(time.Second)
	slo := newGateConfig(&config.FlowControl{Ordering: flow.OrderingSLODeadline})
	edf := newGateConfig(&config.FlowControl{Ordering: flow.OrderingEDF})
	if !slo.opts.EDF || !edf.opts.EDF || edf.sloDeadline {
		t.Fatalf("options: slo %+v, edf %+v", slo.opts, edf.opts)
	}
	tk := &Ticket{Received: received, SLOTTFT: 250 * time.Millisecond}
	if got := slo.due(tk, end); !got.Equal(received.Add(250 * time.Millisecond)) {
		t.Errorf("slo-deadline due %v", got)
	}
	if got := edf.due(tk, end); !got.Equal(end) {
		t.Errorf("edf due %v", got)
	}
	if got := slo.due(&Ticket{Received: received}, end); !got.Equal(flow.NoDeadline) {
		t.Errorf("no header: due %v", got)
	}
}

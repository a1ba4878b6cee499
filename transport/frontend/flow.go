package frontend

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/inferrail/inferrail/actors/fleet"
	"github.com/inferrail/inferrail/actors/replica"
	"github.com/inferrail/inferrail/config"
	"github.com/inferrail/inferrail/model/flow"
	"github.com/inferrail/inferrail/model/route"
	"github.com/inferrail/inferrail/transport/telemetry"
)

// flowPoll is how often the request at the head of a model's queue tries
// again without being woken. Most slots free through this gateway's own
// Done and FirstByte, which wake the head at once; the poll catches the
// rest (a replica turning healthy, the saturation detector's next report,
// a reload raising a cap, a lease the fleet released itself). Only the
// head polls, so it costs one timer and at most one Pick per flowPoll per
// model with a queue. llm-d refreshes its metrics every 50 ms too.
const flowPoll = 50 * time.Millisecond

// Why flow control did not admit a request.
var (
	ErrFlowFull        = errors.New("flow control: the model's queue is full")
	ErrFlowTimeout     = errors.New("flow control: flow_control.max_wait passed")
	ErrFlowShed        = errors.New("flow control: the pool is saturated and the request is sheddable")
	ErrFlowEvicted     = errors.New("flow control: evicted from the queue for higher-priority work")
	ErrFlowNoEndpoints = errors.New("flow control: flow_control.max_wait passed with no healthy replica")
)

// Gate holds requests back while every replica of their model is full or
// the pool is saturated (flow_control). Its settings change live; the
// models are fixed at New.
type Gate struct {
	fleet  *fleet.Fleet
	log    *slog.Logger
	cfg    atomic.Pointer[gateConfig]
	models map[string]*flowQueue // by configured model name
	// stale counts the replicas with WarnFlowStale raised, so that a fleet
	// without any costs no check to clear one.
	stale atomic.Int64
}

// gateConfig is flow_control as the gate reads it; immutable.
type gateConfig struct {
	on      bool
	maxWait time.Duration
	opts    flow.Options
	// sloDeadline orders by slo-deadline-ordering-policy's deadline
	// (opts.EDF given flow.SLODeadline).
	sloDeadline bool
	def         int
	objectives  map[string]int
	tenants     map[string]int
	detector    flow.Detector
	headroom    float64
	// staleAfter is the utilization-detector's staleness threshold; 0 for
	// a detector that reads no reports.
	staleAfter time.Duration
}

func newGateConfig(fc *config.FlowControl) *gateConfig {
	sd := &fc.SaturationDetector
	gc := &gateConfig{on: fc.Enabled, maxWait: fc.MaxWait, def: fc.DefaultPriority,
		objectives: fc.Objectives, tenants: fc.TenantPriorities, headroom: sd.Headroom,
		opts: flow.Options{Max: fc.MaxQueued, Fair: fc.Fairness == flow.FairnessRoundRobin,
			EDF: fc.Ordering == flow.OrderingEDF || fc.Ordering == flow.OrderingSLODeadline, Evict: fc.Eviction},
		sloDeadline: fc.Ordering == flow.OrderingSLODeadline}
	if sd.Type == flow.DetectorConcurrency {
		gc.detector = flow.Concurrency{MaxConcurrency: sd.MaxConcurrency}
	} else {
		gc.detector = flow.Utilization{QueueDepthThreshold: sd.QueueDepthThreshold,
			KVCacheUtilThreshold: sd.KVCacheUtilThreshold, MetricsStalenessThreshold: sd.MetricsStalenessThreshold}
		gc.staleAfter = sd.MetricsStalenessThreshold
	}
	return gc
}

// flowQueue is one model's queue. Only the request at its head picks;
// the others wait to be woken when it leaves.
type flowQueue struct {
	met *telemetry.Flow
	// n is q.Len(), read without mu by wake.
	n     atomic.Int64
	mu    sync.Mutex
	q     *flow.Bands[*waiter]   // under mu
	bands map[int]*metrics.Gauge // under mu: inferrail_flow_band_queued by priority
	// verdict is the detector's last verdict on the model's pool, reused
	// for satReuse.
	verdict atomic.Pointer[verdict]
	// sent counts the requests flow control let through to a pick that
	// succeeded, so that a verdict of room is reused only for as many.
	sent atomic.Int64
}

// satReuse is how long a saturation verdict is reused: the engines'
// reports change at each scrape (load.scrape_interval, 100 ms by default),
// and llm-d reads them every 50 ms, so a millisecond-old verdict is as
// good as a new one, and a burst of requests reads the snapshots once. A
// verdict of room is reused for at most the requests it found room for
// (flow.Room, up to satRoom): otherwise a burst that arrives within the
// millisecond, as one does after the process was descheduled, all passes
// on it (issue 15's overload scenario saw the engines hold 35 waiting
// behind a threshold of 15 together).
const (
	satReuse = time.Millisecond
	satRoom  = 64
)

// verdict is a saturation verdict and when it was reached; immutable.
type verdict struct {
	at                   time.Time
	cfg                  *gateConfig
	saturated, endpoints bool
	// room is how many requests the pool took then (flow.Room), and sent
	// the model's dispatches then (flowQueue.sent).
	room, sent int64
}

type waiter struct {
	prio    int
	key     uint64
	wake    chan struct{} // capacity 1: wake-ups coalesce
	evicted bool          // under the queue's mu
}

// NewGate builds the flow control of c's models, judging saturation from
// fl's replicas and counting in met.
func NewGate(c *config.Config, fl *fleet.Fleet, met *telemetry.Registry, log *slog.Logger) *Gate {
	gc := newGateConfig(&c.FlowControl)
	g := &Gate{fleet: fl, log: log, models: make(map[string]*flowQueue, len(c.Models))}
	g.cfg.Store(gc)
	for _, m := range c.Models {
		g.models[m.Name] = &flowQueue{met: met.Flow(m.Name), q: flow.NewBands[*waiter](gc.opts), bands: map[int]*metrics.Gauge{}}
	}
	return g
}

// Apply puts a reloaded flow_control in effect: for the requests that
// come, and for the order of those waiting.
func (g *Gate) Apply(c *config.Config) {
	gc := newGateConfig(&c.FlowControl)
	g.cfg.Store(gc)
	for _, fq := range g.models {
		fq.mu.Lock()
		fq.q.SetOptions(gc.opts)
		fq.wakeHead()
		fq.mu.Unlock()
	}
}

// On reports whether flow control is on.
func (g *Gate) On() bool { return g.cfg.Load().on }

// Wake tells the head of model's queue that a slot may have freed.
func (g *Gate) Wake(model string) {
	fq := g.models[model]
	if fq == nil || fq.n.Load() == 0 {
		return
	}
	fq.mu.Lock()
	fq.wakeHead()
	fq.mu.Unlock()
}

// wakeHead wakes the head, if any. Call with mu held.
func (fq *flowQueue) wakeHead() {
	if h, ok := fq.q.Peek(); ok {
		signal(h.wake)
	}
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// band updates band p's gauge. Call with mu held.
func (fq *flowQueue) band(p int) {
	g := fq.bands[p]
	if g == nil {
		g = fq.met.Band(p)
		fq.bands[p] = g
	}
	g.Set(float64(fq.q.BandLen(p)))
}

// state is w's standing: the head, evicted, or waiting.
func (fq *flowQueue) state(w *waiter) (head, evicted bool) {
	fq.mu.Lock()
	defer fq.mu.Unlock()
	h, ok := fq.q.Peek()
	return ok && h == w, w.evicted
}

// Ticket is what flow control knows of one request.
type Ticket struct {
	Model string
	// Objective and FairnessID are the request's x-llm-d-inference-objective
	// and x-llm-d-inference-fairness-id headers, empty when absent.
	Objective, FairnessID []byte
	// SLOTTFT is the request's TTFT objective (its x-llm-d-slo-ttft-ms
	// header, else its model's default; 0 for none), and Received when the
	// gateway received it: the deadline slo-deadline-ordering-policy
	// orders by.
	SLOTTFT  time.Duration
	Received time.Time
	// Tenant is the tenant an API key named; HasTenant is false without one.
	Tenant    string
	HasTenant bool
	Deadline  time.Time
	// Attempt counts from 1; only a first attempt is held.
	Attempt int
	// Arm, when set, is handed the wait's cancel, so that the caller's
	// watch ends the wait when the client leaves.
	Arm func(context.CancelCauseFunc)
}

// priority is t's priority: its objective's, else its tenant's, else the
// default.
func (gc *gateConfig) priority(t *Ticket) int {
	if len(t.Objective) > 0 {
		if p, ok := gc.objectives[string(t.Objective)]; ok {
			return p
		}
	}
	if p, ok := gc.tenants[t.Tenant]; ok && t.HasTenant {
		return p
	}
	return gc.def
}

// flowKey is t's flow: its fairness id, else its tenant, else llm-d's
// default flow.
func flowKey(t *Ticket) uint64 {
	if len(t.FairnessID) > 0 {
		return keyOf(t.FairnessID)
	}
	if t.HasTenant {
		return keyOf(t.Tenant)
	}
	return keyOf(flow.DefaultFlow)
}

// saturated reports whether model's pool is saturated by gc's detector,
// from the replicas' snapshots; endpoints is false when the model has no
// healthy replica, which no detector judges. With reuse, a verdict of the
// same config less than satReuse old is reused.
func (g *Gate) saturated(gc *gateConfig, model string, reuse bool) (saturated, endpoints bool) {
	now := time.Now()
	fq := g.models[model]
	if fq != nil && reuse {
		if v := fq.verdict.Load(); v != nil && v.cfg == gc && now.Sub(v.at) < satReuse && (v.saturated || fq.sent.Load()-v.sent < v.room) {
			return v.saturated, v.endpoints
		}
	}
	saturated, endpoints, room := g.judge(gc, model, now)
	if fq != nil {
		fq.verdict.Store(&verdict{at: now, cfg: gc, saturated: saturated, endpoints: endpoints,
			room: int64(room), sent: fq.sent.Load()})
	}
	return saturated, endpoints
}

// judge is saturated's verdict from the snapshots, at now, and the
// requests the pool takes before it is saturated (flow.Room).
func (g *Gate) judge(gc *gateConfig, model string, now time.Time) (saturated, endpoints bool, room int) {
	var buf [16]flow.Endpoint
	eps := buf[:0]
	for _, snap := range g.fleet.Replicas() {
		if !snap.Healthy || snap.Ejected(now) || !snap.Serves(model) {
			continue
		}
		e := flow.Endpoint{Waiting: snap.Load.Waiting, KVUsage: snap.Load.KVUsage,
			HasReport: !snap.LoadAt.IsZero() && !snap.LoadFailing, ReportAge: now.Sub(snap.LoadAt),
			InFlight: snap.Counters.InFlight(), InFlightAtReport: snap.LoadInFlight}
		eps = append(eps, e)
		if gc.staleAfter > 0 {
			g.warnStale(snap, &e, gc.staleAfter, now)
		}
	}
	if len(eps) == 0 {
		return false, false, 0
	}
	if flow.Saturated(gc.detector.Saturation(eps), gc.headroom) {
		return true, true, 0
	}
	return false, true, flow.Room(gc.detector, eps, gc.headroom, satRoom)
}

// warnStale raises WarnFlowStale on a replica the utilization-detector
// counts saturated for a stale report, once it has had a report or its
// scrape fails (so not in the moment before the first scrape), and clears
// it when the report is fresh again.
func (g *Gate) warnStale(snap *replica.Snapshot, e *flow.Endpoint, after time.Duration, now time.Time) {
	stale := !e.HasReport || e.ReportAge > after
	switch {
	case stale && (snap.LoadFailing || !snap.LoadAt.IsZero()) && !snap.Warnings.Active(replica.WarnFlowStale):
		msg := "flow control's utilization-detector counts this replica saturated: its engine's load report is " +
			"older than flow_control.saturation_detector.metrics_staleness_threshold (" + after.String() + ")" +
			" or its /metrics scrape fails, and stale metrics fail closed, so requests for its models queue and " +
			"sheddable ones are refused: check the engine's /metrics and load.scrape_interval, raise the threshold, " +
			"or set flow_control.saturation_detector.type to concurrency-detector"
		if snap.Warnings.RaiseNew(g.log, now, replica.WarnFlowStale, msg, "replica", snap.ID) {
			g.stale.Add(1)
		}
	case !stale && g.stale.Load() > 0 && snap.Warnings.Active(replica.WarnFlowStale):
		if snap.Warnings.Clear(g.log, replica.WarnFlowStale) {
			g.stale.Add(-1)
		}
	}
}

// ticket is what flow control knows of r's attempt.
func (r *request) ticket(attempt int) Ticket {
	t := Ticket{Model: r.model, Deadline: r.deadline, Attempt: attempt,
		Objective:  r.ctx.Request.Header.Peek(flow.HeaderObjective),
		FairnessID: r.ctx.Request.Header.Peek(flow.HeaderFairnessID),
		SLOTTFT:    r.policy.SLO.TTFT, Received: r.start}
	if r.who != nil {
		t.Tenant, t.HasTenant = r.who.Tenant, true
	}
	return t
}

// dispatch picks a replica for r through flow control (Gate.Admit).
func (s *Server) dispatch(r *request, tried []string, attempt int) (fleet.Decision, error) {
	if !s.gate.On() {
		return s.pick(r, tried, attempt) // without the ticket's allocations
	}
	t := r.ticket(attempt)
	t.Arm = func(cancel context.CancelCauseFunc) { r.w.arm("", cancelFunc(cancel)) }
	return s.gate.Admit(s.base, &t, func() (fleet.Decision, error) { return s.pick(r, tried, attempt) })
}

// Admit picks a replica for t through flow control: at once while flow
// control is off, or the model's pool is not saturated, nothing waits and
// a replica has room; otherwise t waits in its band (wait), except that a
// sheddable request meeting a saturated pool is refused (ErrFlowShed).
// A pick that refuses the request for its SLO (policy.ErrNotAdmitted)
// ends it at once, waiting or not: the wait would spend the TTFT the
// refusal judged against, and, since only the head of a queue picks,
// hold back every request behind it. Retries go straight to a pick, as t was admitted already, and wait only
// for a free slot. A wait ends with ctx.
func (g *Gate) Admit(ctx context.Context, t *Ticket, pick func() (fleet.Decision, error)) (fleet.Decision, error) {
	gc := g.cfg.Load()
	fq := g.models[t.Model]
	if !gc.on || fq == nil {
		return pick()
	}
	prio, wait, err := g.hold(t, gc, fq)
	if err != nil {
		return fleet.Decision{}, err
	}
	if wait {
		return g.wait(ctx, t, fq, gc, prio, pick)
	}
	d, err := pick()
	if errors.Is(err, route.ErrOverloaded) {
		return g.wait(ctx, t, fq, gc, prio, pick)
	}
	if err == nil {
		fq.sent.Add(1)
	}
	return d, err
}

// due is what t's wait is ordered by under EDF: when the wait would end
// (edf-ordering-policy), or when its first token is due
// (slo-deadline-ordering-policy).
func (gc *gateConfig) due(t *Ticket, end time.Time) time.Time {
	if gc.sloDeadline {
		return flow.SLODeadline(t.Received, t.SLOTTFT)
	}
	return end
}

// hold is what flow control decides for t before any pick: its priority,
// and whether it waits (the pool saturated, or requests waiting already),
// or ErrFlowShed for a sheddable request meeting a saturated pool. Only a
// first attempt is held.
func (g *Gate) hold(t *Ticket, gc *gateConfig, fq *flowQueue) (prio int, wait bool, err error) {
	prio = gc.priority(t)
	if t.Attempt > 1 {
		return prio, false, nil
	}
	sat, _ := g.saturated(gc, t.Model, true)
	if sat && prio < 0 {
		fq.met.Shed.Inc()
		return prio, false, ErrFlowShed
	}
	return prio, sat || fq.n.Load() > 0, nil
}

// wait queues t in band prio until, at the head of the queue, the pool
// is not saturated and a pick succeeds or fails for another reason; or
// flow_control.max_wait or the request's deadline passes
// (ErrFlowTimeout, ErrFlowNoEndpoints), higher-priority work evicts it
// (ErrFlowEvicted), or ctx ends (its cause: the client left, the gateway
// shuts down). A full queue fails at once with ErrFlowFull.
func (g *Gate) wait(ctx context.Context, t *Ticket, fq *flowQueue, gc *gateConfig, prio int, pick func() (fleet.Decision, error)) (fleet.Decision, error) {
	start := time.Now()
	wait := min(gc.maxWait, time.Until(t.Deadline))
	w := &waiter{prio: prio, key: flowKey(t), wake: make(chan struct{}, 1)}
	fq.mu.Lock()
	ev, evicted, ok := fq.q.Push(prio, w.key, w, gc.due(t, start.Add(wait)))
	switch {
	case evicted:
		ev.evicted = true
		signal(ev.wake)
		fq.band(ev.prio)
	case ok:
		fq.n.Add(1)
	}
	if ok {
		fq.band(prio)
		fq.wakeHead()
	}
	fq.mu.Unlock()
	if !ok {
		fq.met.Full.Inc()
		return fleet.Decision{}, ErrFlowFull
	}
	fq.met.Queued.Inc()
	// served is set when w leaves for a pick that did not find the fleet
	// full: only that takes its flow's turn.
	served := false
	defer func() {
		fq.mu.Lock()
		if fq.q.Remove(w.prio, w.key, w, served) {
			fq.n.Add(-1)
		}
		fq.band(w.prio)
		// The turn passes on, with any wake-up this waiter took.
		fq.wakeHead()
		fq.mu.Unlock()
		fq.met.Queued.Dec()
		fq.met.Wait.Update(time.Since(start).Seconds())
	}()

	// The watch cancels ctx when the client leaves; the next attempt's
	// arm replaces it.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if t.Arm != nil {
		t.Arm(cancel)
	}
	limit := time.NewTimer(wait)
	defer limit.Stop()
	poll := time.NewTimer(flowPoll)
	defer poll.Stop()
	for {
		var pollC <-chan time.Time
		head, evicted := fq.state(w)
		if evicted {
			fq.met.Evicted.Inc()
			return fleet.Decision{}, ErrFlowEvicted
		}
		if head {
			// The live config's detector, in case a reload changed it,
			// judged afresh: the head before this one may have been
			// dispatched a moment ago, and a reused verdict would let a
			// queue drain into the engines all at once (issue 15's
			// overload scenario saw engines queue past the threshold).
			sat, _ := g.saturated(g.cfg.Load(), t.Model, false)
			if !sat {
				d, err := pick()
				if !errors.Is(err, route.ErrOverloaded) {
					served = true
					if err == nil {
						fq.met.Dispatched.Inc()
						fq.sent.Add(1)
					}
					return d, err
				}
			}
			poll.Reset(flowPoll)
			pollC = poll.C
		}
		select {
		case <-w.wake:
		case <-pollC:
		case <-limit.C:
			if _, endpoints := g.saturated(gc, t.Model, true); !endpoints {
				fq.met.NoEndpoints.Inc()
				return fleet.Decision{}, ErrFlowNoEndpoints
			}
			fq.met.TimedOut.Inc()
			return fleet.Decision{}, ErrFlowTimeout
		case <-ctx.Done():
			return fleet.Decision{}, context.Cause(ctx)
		}
	}
}

// FlowDropped is the x-llm-d-request-dropped-reason of a request flow
// control did not admit (one of the ErrFlow errors), or "".
func FlowDropped(err error) string {
	switch {
	case errors.Is(err, ErrFlowFull), errors.Is(err, ErrFlowShed):
		return flow.DroppedSaturated
	case errors.Is(err, ErrFlowTimeout):
		return flow.DroppedTTLExpired
	case errors.Is(err, ErrFlowEvicted):
		return flow.DroppedEvicted
	case errors.Is(err, ErrFlowNoEndpoints):
		return flow.DroppedNoEndpoints
	}
	return ""
}

// DroppedReason is FlowDropped's reason; with flow control on, a routing
// error that found no endpoint is named too.
func (g *Gate) DroppedReason(err error) string {
	if r := FlowDropped(err); r != "" || !g.On() {
		return r
	}
	if errors.Is(err, route.ErrNoReplica) || errors.Is(err, route.ErrFilteredOut) {
		return flow.DroppedNoEndpoints
	}
	return ""
}

// droppedReason is the gate's reason, and rejected-shutting-down for a
// request the gateway's shutdown ended while flow control is on.
func (s *Server) droppedReason(err error) string {
	if errors.Is(err, errShutdown) && s.gate.On() {
		return flow.DroppedShuttingDown
	}
	return s.gate.DroppedReason(err)
}

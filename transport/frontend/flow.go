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

// The headers of llm-d's flow control (shared/reference/llm-d-gie.md §3).
const (
	headerObjective  = "X-Llm-D-Inference-Objective"
	headerFairnessID = "X-Llm-D-Inference-Fairness-Id"
	headerDropped    = "X-Llm-D-Request-Dropped-Reason"
	// defaultFlow is the flow of a request with neither a fairness id nor
	// a tenant, as llm-d names it.
	defaultFlow = "default-flow"
)

// x-llm-d-request-dropped-reason values (llm-d pkg/common/error).
const (
	droppedSaturated   = "rejected-saturated"
	droppedNoEndpoints = "rejected-no-endpoints"
	droppedTTLExpired  = "rejected-ttl-expired"
	droppedShutdown    = "rejected-shutting-down"
	droppedEvicted     = "evicted-queue-pressure"
)

// Why flow control did not admit a request.
var (
	errFlowFull        = errors.New("flow control: the model's queue is full")
	errFlowTimeout     = errors.New("flow control: flow_control.max_wait passed")
	errFlowShed        = errors.New("flow control: the pool is saturated and the request is sheddable")
	errFlowEvicted     = errors.New("flow control: evicted from the queue for higher-priority work")
	errFlowNoEndpoints = errors.New("flow control: flow_control.max_wait passed with no healthy replica")
)

// gate holds requests back while every replica of their model is full or
// the pool is saturated (flow_control). Its settings change live; the
// models are fixed at New.
type gate struct {
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
	on         bool
	maxWait    time.Duration
	opts       flow.Options
	def        int
	objectives map[string]int
	tenants    map[string]int
	detector   flow.Detector
	headroom   float64
	// staleAfter is the utilization-detector's staleness threshold; 0 for
	// a detector that reads no reports.
	staleAfter time.Duration
}

func newGateConfig(fc *config.FlowControl) *gateConfig {
	sd := &fc.SaturationDetector
	gc := &gateConfig{on: fc.Enabled, maxWait: fc.MaxWait, def: fc.DefaultPriority,
		objectives: fc.Objectives, tenants: fc.TenantPriorities, headroom: sd.Headroom,
		opts: flow.Options{Max: fc.MaxQueued, Fair: fc.Fairness == flow.FairnessRoundRobin,
			EDF: fc.Ordering == flow.OrderingEDF, Evict: fc.Eviction}}
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
}

// satReuse is how long a saturation verdict is reused: the engines'
// reports change at each scrape (load.scrape_interval, 100 ms by default),
// and llm-d reads them every 50 ms, so a millisecond-old verdict is as
// good as a new one, and a burst of requests reads the snapshots once.
const satReuse = time.Millisecond

// verdict is a saturation verdict and when it was reached; immutable.
type verdict struct {
	at                   time.Time
	cfg                  *gateConfig
	saturated, endpoints bool
}

type waiter struct {
	prio    int
	key     uint64
	wake    chan struct{} // capacity 1: wake-ups coalesce
	evicted bool          // under the queue's mu
}

func newGate(c *config.Config, fl *fleet.Fleet, met *telemetry.Registry, log *slog.Logger) *gate {
	gc := newGateConfig(&c.FlowControl)
	g := &gate{fleet: fl, log: log, models: make(map[string]*flowQueue, len(c.Models))}
	g.cfg.Store(gc)
	for _, m := range c.Models {
		g.models[m.Name] = &flowQueue{met: met.Flow(m.Name), q: flow.NewBands[*waiter](gc.opts), bands: map[int]*metrics.Gauge{}}
	}
	return g
}

// apply puts a reloaded flow_control in effect: for the requests that
// come, and for the order of those waiting.
func (g *gate) apply(c *config.Config) {
	gc := newGateConfig(&c.FlowControl)
	g.cfg.Store(gc)
	for _, fq := range g.models {
		fq.mu.Lock()
		fq.q.SetOptions(gc.opts)
		fq.wakeHead()
		fq.mu.Unlock()
	}
}

// on reports whether flow control is on.
func (g *gate) on() bool { return g.cfg.Load().on }

// wake tells the head of model's queue that a slot may have freed.
func (g *gate) wake(model string) {
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

// priority is r's priority: its objective's, else its tenant's, else the
// default.
func (gc *gateConfig) priority(r *request) int {
	if o := r.ctx.Request.Header.Peek(headerObjective); len(o) > 0 {
		if p, ok := gc.objectives[string(o)]; ok {
			return p
		}
	}
	if p, ok := gc.tenants[tenantOf(r.who)]; ok && r.who != nil {
		return p
	}
	return gc.def
}

// flowKey is r's flow: its fairness id, else its tenant, else llm-d's
// default flow.
func flowKey(r *request) uint64 {
	if id := r.ctx.Request.Header.Peek(headerFairnessID); len(id) > 0 {
		return keyOf(id)
	}
	if r.who != nil {
		return keyOf(r.who.Tenant)
	}
	return keyOf(defaultFlow)
}

// saturated reports whether model's pool is saturated by gc's detector,
// from the replicas' snapshots; endpoints is false when the model has no
// healthy replica, which no detector judges. A verdict of the same config
// less than satReuse old is reused.
func (g *gate) saturated(gc *gateConfig, model string) (saturated, endpoints bool) {
	now := time.Now()
	fq := g.models[model]
	if fq != nil {
		if v := fq.verdict.Load(); v != nil && v.cfg == gc && now.Sub(v.at) < satReuse {
			return v.saturated, v.endpoints
		}
	}
	saturated, endpoints = g.judge(gc, model, now)
	if fq != nil {
		fq.verdict.Store(&verdict{at: now, cfg: gc, saturated: saturated, endpoints: endpoints})
	}
	return saturated, endpoints
}

// judge is saturated's verdict from the snapshots, at now.
func (g *gate) judge(gc *gateConfig, model string, now time.Time) (saturated, endpoints bool) {
	var buf [16]flow.Endpoint
	eps := buf[:0]
	for _, snap := range g.fleet.Replicas() {
		if !snap.Healthy || snap.Ejected(now) || !snap.Serves(model) {
			continue
		}
		e := flow.Endpoint{Waiting: snap.Load.Waiting, KVUsage: snap.Load.KVUsage,
			HasReport: !snap.LoadAt.IsZero() && !snap.LoadFailing, ReportAge: now.Sub(snap.LoadAt),
			InFlight: snap.Counters.InFlight()}
		eps = append(eps, e)
		if gc.staleAfter > 0 {
			g.warnStale(snap, &e, gc.staleAfter, now)
		}
	}
	if len(eps) == 0 {
		return false, false
	}
	return flow.Saturated(gc.detector.Saturation(eps), gc.headroom), true
}

// warnStale raises WarnFlowStale on a replica the utilization-detector
// counts saturated for a stale report, once it has had a report or its
// scrape fails (so not in the moment before the first scrape), and clears
// it when the report is fresh again.
func (g *gate) warnStale(snap *replica.Snapshot, e *flow.Endpoint, after time.Duration, now time.Time) {
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

// dispatch picks a replica for r through flow control: at once while the
// model's pool is not saturated, nothing waits and a replica has room;
// otherwise r waits in its band (admit), except that a sheddable request
// meeting a saturated pool is refused (errFlowShed). Retries go straight
// to a pick, as r was admitted already, and wait only for a free slot.
func (s *Server) dispatch(r *request, tried []string, attempt int) (fleet.Decision, error) {
	gc := s.gate.cfg.Load()
	fq := s.gate.models[r.model]
	if !gc.on || fq == nil {
		return s.pick(r, tried, attempt)
	}
	prio, wait, err := s.hold(r, gc, fq, attempt)
	if err != nil {
		return fleet.Decision{}, err
	}
	if wait {
		return s.admit(r, fq, gc, prio, tried, attempt)
	}
	d, err := s.pick(r, tried, attempt)
	if errors.Is(err, route.ErrOverloaded) {
		return s.admit(r, fq, gc, prio, tried, attempt)
	}
	return d, err
}

// hold is what flow control decides for r before any pick: its priority,
// and whether it waits (the pool saturated, or requests waiting already),
// or errFlowShed for a sheddable request meeting a saturated pool. Only a
// first attempt is held.
func (s *Server) hold(r *request, gc *gateConfig, fq *flowQueue, attempt int) (prio int, wait bool, err error) {
	prio = gc.priority(r)
	if attempt > 1 {
		return prio, false, nil
	}
	sat, _ := s.gate.saturated(gc, r.model)
	if sat && prio < 0 {
		fq.met.Shed.Inc()
		return prio, false, errFlowShed
	}
	return prio, sat || fq.n.Load() > 0, nil
}

// admit queues r in band prio until, at the head of the queue, the pool
// is not saturated and a pick succeeds or fails for another reason; or
// flow_control.max_wait or the request's deadline passes
// (errFlowTimeout, errFlowNoEndpoints), higher-priority work evicts it
// (errFlowEvicted), the client leaves (errClientGone) or the gateway
// shuts down (errShutdown). A full queue fails at once with errFlowFull.
func (s *Server) admit(r *request, fq *flowQueue, gc *gateConfig, prio int, tried []string, attempt int) (fleet.Decision, error) {
	start := time.Now()
	wait := min(gc.maxWait, time.Until(r.deadline))
	w := &waiter{prio: prio, key: flowKey(r), wake: make(chan struct{}, 1)}
	fq.mu.Lock()
	ev, evicted, ok := fq.q.Push(prio, w.key, w, start.Add(wait))
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
		return fleet.Decision{}, errFlowFull
	}
	fq.met.Queued.Inc()
	defer func() {
		fq.mu.Lock()
		if fq.q.Remove(w.prio, w.key, w) {
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
	ctx, cancel := context.WithCancelCause(s.base)
	defer cancel(nil)
	r.w.arm("", cancel)
	limit := time.NewTimer(wait)
	defer limit.Stop()
	poll := time.NewTimer(flowPoll)
	defer poll.Stop()
	for {
		var pollC <-chan time.Time
		head, evicted := fq.state(w)
		if evicted {
			fq.met.Evicted.Inc()
			return fleet.Decision{}, errFlowEvicted
		}
		if head {
			// The live config's detector, in case a reload changed it.
			sat, _ := s.gate.saturated(s.gate.cfg.Load(), r.model)
			if !sat {
				d, err := s.pick(r, tried, attempt)
				if !errors.Is(err, route.ErrOverloaded) {
					if err == nil {
						fq.met.Dispatched.Inc()
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
			if _, endpoints := s.gate.saturated(gc, r.model); !endpoints {
				fq.met.NoEndpoints.Inc()
				return fleet.Decision{}, errFlowNoEndpoints
			}
			fq.met.TimedOut.Inc()
			return fleet.Decision{}, errFlowTimeout
		case <-ctx.Done():
			return fleet.Decision{}, context.Cause(ctx)
		}
	}
}

// droppedReason is the x-llm-d-request-dropped-reason of a request flow
// control did not admit, or "".
func (s *Server) droppedReason(err error) string {
	switch {
	case errors.Is(err, errFlowFull), errors.Is(err, errFlowShed):
		return droppedSaturated
	case errors.Is(err, errFlowTimeout):
		return droppedTTLExpired
	case errors.Is(err, errFlowEvicted):
		return droppedEvicted
	case errors.Is(err, errFlowNoEndpoints):
		return droppedNoEndpoints
	case !s.gate.on():
		return ""
	case errors.Is(err, route.ErrNoReplica), errors.Is(err, route.ErrFilteredOut):
		return droppedNoEndpoints
	case errors.Is(err, errShutdown):
		return droppedShutdown
	}
	return ""
}

// Package telemetry owns the gateway's Prometheus metrics: the series the
// request path records, one metrics.Set per replica so that a replica's
// series leave with it, and the replica gauges read from the fleet when the
// page is rendered.
//
// Recording is lock-free after a series' first use: handles are created once
// per (replica, model, policy) and cached. telemetry starts no goroutines.
// A Registry is safe for concurrent use.
package telemetry

import (
	"bytes"
	"io"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/inferrail/inferrail/actors/replica"
	"github.com/inferrail/inferrail/model/flow"
)

// latencyBuckets are the upper bounds of the gateway's latency histograms,
// in seconds: vLLM's TTFT buckets, so the two can be set side by side.
var latencyBuckets = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75,
	1, 2.5, 5, 7.5, 10, 20, 40, 80, 160, 640}

// ratioBuckets bound inferrail_ttft_estimate_ratio: estimated over
// measured time to first token, from 8 times under to 8 times over.
var ratioBuckets = []float64{0.125, 0.25, 0.5, 0.67, 0.8, 0.9, 1, 1.11, 1.25, 1.5, 2, 4, 8}

// decisionBuckets bound inferrail_routing_decision_seconds: microseconds
// to milliseconds.
var decisionBuckets = []float64{5e-6, 1e-5, 2e-5, 5e-5, 1e-4, 2e-4, 5e-4, 1e-3, 2e-3, 5e-3, 1e-2}

// Status classes of inferrail_requests_total.
const (
	Status2xx       = "2xx"
	Status4xx       = "4xx"
	Status5xx       = "5xx"
	StatusAborted   = "aborted"   // the engine broke a response it had started
	StatusCancelled = "cancelled" // the client left
)

// Reasons a response stream was cut after its first byte
// (inferrail_streams_cut_total{model,reason}).
const (
	CutEngine    = "engine"            // the engine's connection broke: it died, or reset it
	CutTimeout   = "timeout"           // server.request_timeout passed mid-stream
	CutShutdown  = "shutdown"          // the gateway's shutdown cut it
	CutUnhealthy = "replica_unhealthy" // the replica failed its health checks mid-stream
	// CutUnfinished: under inferrail epp, the exchange ended before the
	// stream's last event; the picker cannot tell whether the engine or
	// the client ended it.
	CutUnfinished = "unfinished"
)

var statuses = [...]string{Status2xx, Status4xx, Status5xx, StatusAborted, StatusCancelled}

// StatusClass maps an HTTP status to its class.
func StatusClass(code int) string {
	switch {
	case code >= 500:
		return Status5xx
	case code >= 400:
		return Status4xx
	}
	return Status2xx
}

// Fleet is what the registry reads replica gauges from.
type Fleet interface {
	Replicas() []*replica.Snapshot
}

// Registry holds every metric of one gateway.
type Registry struct {
	fleet  Fleet
	global *metrics.Set

	mu       sync.Mutex // held by writers of replicas, models and decisions
	replicas cowMap[string, *Replica]
	models   cowMap[string, *Model]

	decisions cowMap[string, *metrics.PrometheusHistogram] // by policy; written under mu
	extra     []Writer

	procMu sync.Mutex // guards proc and procAt
	proc   []byte     // the last go_* and process_* series
	procAt time.Time
}

// New returns an empty registry reading replica gauges from fleet.
func New(fleet Fleet) *Registry {
	return &Registry{fleet: fleet, global: metrics.NewSet()}
}

// Include adds a set written with the registry's own, such as the routing
// actors' counters (fleet.Options.RoutingMetrics) or the tokenizer pool's.
// Call it before the registry is first written.
func (r *Registry) Include(set Writer) { r.extra = append(r.extra, set) }

// Writer writes series in the Prometheus text format: a *metrics.Set, or
// a WriterFunc for series computed when the page is read.
type Writer interface{ WritePrometheus(w io.Writer) }

// WriterFunc adapts a function to Writer.
type WriterFunc func(w io.Writer)

// WritePrometheus calls f(w).
func (f WriterFunc) WritePrometheus(w io.Writer) { f(w) }

// Model holds the per-model series that have no replica.
type Model struct {
	set         *metrics.Set
	name        string
	Retries     *metrics.Counter // inferrail_upstream_retries_total
	Disconnects *metrics.Counter // inferrail_client_disconnects_total
	// Withdrawn counts endpoint-picker picks whose exchange ended with no
	// response phase, taken back from the shadow index
	// (inferrail_picks_withdrawn_total).
	Withdrawn *metrics.Counter
	// PromptTokens and PredictedCached count, per decision the KV index
	// priced, the prompt's tokens and the cached tokens predicted on the
	// chosen replica (inferrail_prompt_tokens_total,
	// inferrail_predicted_cached_tokens_total).
	PromptTokens    *metrics.Counter
	PredictedCached *metrics.Counter
	// DeliveredCached counts, of the same decisions, the cached tokens the
	// engine reported in usage.prompt_tokens_details.cached_tokens
	// (inferrail_delivered_cached_tokens_total); a response without them
	// adds nothing, and counts as unknown in inferrail_prediction_total.
	DeliveredCached *metrics.Counter
	errMu           sync.Mutex
	errs            map[string]*metrics.Counter                  // by reason
	cuts            map[string]*metrics.Counter                  // by reason
	estimated       cowMap[string, *metrics.PrometheusHistogram] // by policy; written under errMu
	// slo is inferrail_slo_requests_total{model,result}, in
	// flow.SLOResults' order.
	slo [len(flow.SLOResults)]*metrics.Counter
	// ratio is inferrail_ttft_estimate_ratio: how the cost model's
	// estimate compares with the time to first token measured, which
	// shows whether its prefill model (routing.cost_model, or each
	// replica's fit with auto) prices the engines as they run.
	ratio *metrics.PrometheusHistogram
}

// Name is the model's name.
func (m *Model) Name() string { return m.name }

// Estimated records the cost model's estimated time to first token for the
// chosen replica (inferrail_estimated_ttft_seconds), by policy.
func (m *Model) Estimated(policy string, d time.Duration) {
	m.estimated.getOrMake(&m.errMu, policy, func() *metrics.PrometheusHistogram {
		return m.set.GetOrCreatePrometheusHistogramExt(
			`inferrail_estimated_ttft_seconds{model=`+strconv.Quote(m.name)+`,policy=`+strconv.Quote(policy)+`}`, latencyBuckets)
	}).Update(d.Seconds())
}

// TTFTRatio records a streamed response's estimated time to first token
// over the one measured (inferrail_ttft_estimate_ratio{model}). A
// measured time of 0 is not recorded.
func (m *Model) TTFTRatio(estimated, measured time.Duration) {
	if measured > 0 {
		m.ratio.Update(estimated.Seconds() / measured.Seconds())
	}
}

// Model returns the series of model name, creating them on first use.
func (r *Registry) Model(name string) *Model {
	return r.models.getOrMake(&r.mu, name, func() *Model { return r.newModel(name) })
}

func (r *Registry) newModel(name string) *Model {
	l := `{model=` + strconv.Quote(name) + `}`
	m := &Model{
		set:             r.global,
		name:            name,
		Retries:         r.global.NewCounter("inferrail_upstream_retries_total" + l),
		Disconnects:     r.global.NewCounter("inferrail_client_disconnects_total" + l),
		Withdrawn:       r.global.NewCounter("inferrail_picks_withdrawn_total" + l),
		PromptTokens:    r.global.NewCounter("inferrail_prompt_tokens_total" + l),
		PredictedCached: r.global.NewCounter("inferrail_predicted_cached_tokens_total" + l),
		DeliveredCached: r.global.NewCounter("inferrail_delivered_cached_tokens_total" + l),
		ratio:           r.global.NewPrometheusHistogramExt("inferrail_ttft_estimate_ratio"+l, ratioBuckets),
		errs:            make(map[string]*metrics.Counter),
		cuts:            make(map[string]*metrics.Counter),
	}
	for i, res := range flow.SLOResults {
		m.slo[i] = r.global.NewCounter(MetricSLO + `{model=` + strconv.Quote(name) + `,result=` + strconv.Quote(res) + `}`)
	}
	return m
}

// MetricSLO counts the requests that carried a latency objective (llm-d's
// SLO headers, else models[].slo), by model and by result: one of
// flow.SLOResults (met, ttft_missed, tpot_missed, not_admitted, refused,
// failed; flow.Attained judges the first three). A request whose client
// left, or that an engine answered with a 4xx, is not counted.
const MetricSLO = "inferrail_slo_requests_total"

// SLO counts one request that carried an objective, by its result (one of
// flow.SLOResults; another is a bug).
func (m *Model) SLO(result string) {
	for i, res := range flow.SLOResults {
		if res == result {
			m.slo[i].Inc()
			return
		}
	}
	panic("BUG: telemetry: unknown SLO result " + result)
}

// SLOCounts is how many requests ended in each result, in
// flow.SLOResults' order.
func (m *Model) SLOCounts() (n [len(flow.SLOResults)]uint64) {
	for i, c := range m.slo {
		n[i] = c.Get()
	}
	return n
}

// Error counts one error the gateway answered itself, by reason.
func (m *Model) Error(reason string) {
	m.byReason(m.errs, "inferrail_request_errors_total", reason).Inc()
}

// Cut counts one response stream cut after its first byte, by reason
// (CutEngine, ...).
func (m *Model) Cut(reason string) { m.byReason(m.cuts, "inferrail_streams_cut_total", reason).Inc() }

// Cuts is how many streams were cut for reason.
func (m *Model) Cuts(reason string) uint64 {
	return m.byReason(m.cuts, "inferrail_streams_cut_total", reason).Get()
}

// byReason is the counter name{model,reason}, made on first use and kept
// in byReason (guarded by errMu).
func (m *Model) byReason(byReason map[string]*metrics.Counter, name, reason string) *metrics.Counter {
	m.errMu.Lock()
	defer m.errMu.Unlock()
	c := byReason[reason]
	if c == nil {
		c = m.set.GetOrCreateCounter(name + `{model=` + strconv.Quote(m.name) + `,reason=` + strconv.Quote(reason) + `}`)
		byReason[reason] = c
	}
	return c
}

// ModelPolicy reports that policy routes percent of model's traffic:
// inferrail_model_policy{model,policy} is 1 for each policy routing the
// model, for joins in queries, and inferrail_model_policy_percent{model,
// policy} its share; each arm of an A/B split, or one policy at 100. Call
// it once per policy of each model at startup.
func (r *Registry) ModelPolicy(model, policy string, percent int) {
	labels := `{model=` + strconv.Quote(model) + `,policy=` + strconv.Quote(policy) + `}`
	r.global.GetOrCreateGauge(`inferrail_model_policy`+labels, nil).Set(1)
	r.global.GetOrCreateGauge(`inferrail_model_policy_percent`+labels, nil).Set(float64(percent))
}

// ModelPolicyOff records that policy no longer routes model: a reload took
// it out of the model's split.
func (r *Registry) ModelPolicyOff(model, policy string) {
	labels := `{model=` + strconv.Quote(model) + `,policy=` + strconv.Quote(policy) + `}`
	r.global.GetOrCreateGauge(`inferrail_model_policy`+labels, nil).Set(0)
	r.global.GetOrCreateGauge(`inferrail_model_policy_percent`+labels, nil).Set(0)
}

// Decision records the time one routing decision took, by policy.
func (r *Registry) Decision(policy string, d time.Duration) {
	r.decisions.getOrMake(&r.mu, policy, func() *metrics.PrometheusHistogram {
		return r.global.GetOrCreatePrometheusHistogramExt(
			`inferrail_routing_decision_seconds{policy=`+strconv.Quote(policy)+`}`, decisionBuckets)
	}).Update(d.Seconds())
}

// Replica holds one replica's request series, in a set of its own.
type Replica struct {
	id      string
	set     *metrics.Set
	mu      sync.RWMutex // guards byModel and preds, and is held by writers of byMP
	byMP    cowMap[[2]string, *Series]
	byModel map[string]*PromptCheck
	preds   map[string]*Prediction // by model
}

// Series are the series of one (replica, model, policy).
type Series struct {
	Requests  [len(statuses)]*metrics.Counter // inferrail_requests_total by status class
	TTFT      *metrics.PrometheusHistogram    // inferrail_ttft_seconds
	Duration  *metrics.PrometheusHistogram    // inferrail_request_duration_seconds
	Decisions *metrics.Counter                // inferrail_routing_decisions_total
	// Prompt is the (replica, model)'s prompt count check, shared by the
	// series of every policy.
	Prompt *PromptCheck
	// Prediction is the (replica, model)'s prediction accuracy, shared
	// by the series of every policy.
	Prediction *Prediction
}

// PromptCheck counts, for one (replica, model), the responses whose
// usage.prompt_tokens was compared with the gateway's own count of the
// same prompt (inferrail_prompt_tokens_checked_total), and those where the
// two differed (inferrail_prompt_tokens_mismatch_total). Its counters are
// safe for concurrent use.
type PromptCheck struct {
	Checked    *metrics.Counter
	Mismatched *metrics.Counter
}

// PromptChecks sums replica id's prompt count checks over its models:
// what /admin/replicas shows as its agreement.
func (r *Registry) PromptChecks(id string) (checked, mismatched uint64) {
	rep, ok := r.replicas.get(id)
	if !ok {
		return 0, 0
	}
	rep.mu.RLock()
	defer rep.mu.RUnlock()
	for _, pc := range rep.byModel {
		checked += pc.Checked.Get()
		mismatched += pc.Mismatched.Get()
	}
	return checked, mismatched
}

// Request counts one finished request by status class.
func (s *Series) Request(status string) {
	for i, st := range statuses {
		if st == status {
			s.Requests[i].Inc()
			return
		}
	}
}

// replica returns the series set of replica id, creating it on first use.
func (r *Registry) replica(id string) *Replica {
	return r.replicas.getOrMake(&r.mu, id, func() *Replica {
		return &Replica{id: id, set: metrics.NewSet(),
			byModel: make(map[string]*PromptCheck), preds: make(map[string]*Prediction)}
	})
}

// ResponseLookupFailed counts, in
// inferrail_response_lookup_failures_total{replica}, one lookup of a
// Responses response id (GET /v1/responses/{id}) that replica id did not
// answer with 200 or 404 in time: a conversation it stores may be routed
// as if none held it.
func (r *Registry) ResponseLookupFailed(id string) {
	rep := r.replica(id)
	rep.set.GetOrCreateCounter(`inferrail_response_lookup_failures_total{replica=` + strconv.Quote(id) + `}`).Inc()
}

// Replica returns the series of (replica, model, policy), creating them on
// first use.
func (r *Registry) Replica(id, model, policy string) *Series {
	rep := r.replica(id)
	key := [2]string{model, policy}
	return rep.byMP.getOrMake(&rep.mu, key, func() *Series { return rep.newSeries(id, model, policy) })
}

// newSeries makes the series of (replica, model, policy); rep.mu is held.
func (rep *Replica) newSeries(id, model, policy string) *Series {
	lm := `model=` + strconv.Quote(model)
	lr := `replica=` + strconv.Quote(id)
	lp := `policy=` + strconv.Quote(policy)
	s := &Series{
		TTFT:      rep.set.NewPrometheusHistogramExt(`inferrail_ttft_seconds{`+lm+`,`+lp+`,`+lr+`}`, latencyBuckets),
		Duration:  rep.set.NewPrometheusHistogramExt(`inferrail_request_duration_seconds{`+lm+`,`+lp+`,`+lr+`}`, latencyBuckets),
		Decisions: rep.set.NewCounter(`inferrail_routing_decisions_total{` + lm + `,` + lp + `,` + lr + `}`),
	}
	for i, st := range statuses {
		s.Requests[i] = rep.set.GetOrCreateCounter(`inferrail_requests_total{` + lm + `,` + lr + `,status="` + st + `"}`)
	}
	if s.Prompt = rep.byModel[model]; s.Prompt == nil {
		s.Prompt = &PromptCheck{
			Checked:    rep.set.NewCounter(`inferrail_prompt_tokens_checked_total{` + lm + `,` + lr + `}`),
			Mismatched: rep.set.NewCounter(`inferrail_prompt_tokens_mismatch_total{` + lm + `,` + lr + `}`),
		}
		rep.byModel[model] = s.Prompt
	}
	if s.Prediction = rep.preds[model]; s.Prediction == nil {
		s.Prediction = newPrediction(rep.set, lm, lr)
		rep.preds[model] = s.Prediction
	}
	return s
}

// WritePrometheus renders the page: gateway-wide series, the series of
// replicas still in the fleet (the sets of replicas that left are dropped
// first, so a departed replica never outlives its departure on the page),
// and the replica gauges read from the fleet now.
func (r *Registry) WritePrometheus(w io.Writer) {
	snaps := r.fleet.Replicas()
	live := make(map[string]*replica.Snapshot, len(snaps))
	for _, s := range snaps {
		live[s.ID] = s
	}
	r.mu.Lock()
	r.replicas.delete(func(id string, rep *Replica) bool {
		if _, ok := live[id]; ok {
			return false
		}
		rep.set.UnregisterAllMetrics()
		return true
	})
	reps := make([]*Replica, 0, len(live))
	for _, rep := range r.replicas.snapshot() {
		reps = append(reps, rep)
	}
	r.mu.Unlock()
	sort.Slice(reps, func(i, j int) bool { return reps[i].id < reps[j].id })

	var b bytes.Buffer
	r.global.WritePrometheus(&b)
	for _, set := range r.extra {
		set.WritePrometheus(&b)
	}
	for _, rep := range reps {
		rep.set.WritePrometheus(&b)
	}
	writeGauges(&b, snaps, time.Now())
	b.Write(r.processMetrics(time.Now()))
	w.Write(b.Bytes())
}

// processMaxAge is how long the go_* and process_* series are reused. They
// come from runtime.ReadMemStats, which stops the world; scraped a hundred
// times a second during 2,000 streams, that took scrapes to 150 ms at p50
// (the stress suite). Reused for a second, it stops the world at most
// once a second however often the page is read.
const processMaxAge = time.Second

// processMetrics returns the process series, refreshed when older than
// processMaxAge.
func (r *Registry) processMetrics(now time.Time) []byte {
	r.procMu.Lock()
	defer r.procMu.Unlock()
	if r.proc == nil || now.Sub(r.procAt) >= processMaxAge {
		var b bytes.Buffer
		metrics.WriteProcessMetrics(&b)
		r.proc, r.procAt = b.Bytes(), now
	}
	return r.proc
}

// writeGauges writes the inferrail_replica_* gauges of every replica.
func writeGauges(b *bytes.Buffer, snaps []*replica.Snapshot, now time.Time) {
	sort.Slice(snaps, func(i, j int) bool { return snaps[i].ID < snaps[j].ID })
	gauge := func(name string, f func(*replica.Snapshot) float64) {
		metrics.WriteMetadataIfNeeded(b, name, "gauge")
		for _, s := range snaps {
			b.WriteString(name)
			b.WriteString(`{replica=`)
			b.WriteString(strconv.Quote(s.ID))
			b.WriteString(`} `)
			b.WriteString(strconv.FormatFloat(f(s), 'g', -1, 64))
			b.WriteByte('\n')
		}
	}
	counter := func(name string, f func(*replica.Snapshot) float64) {
		metrics.WriteMetadataIfNeeded(b, name, "counter")
		for _, s := range snaps {
			b.WriteString(name + `{replica=` + strconv.Quote(s.ID) + `} ` + strconv.FormatFloat(f(s), 'g', -1, 64) + "\n")
		}
	}
	if len(snaps) == 0 {
		return
	}
	gauge("inferrail_replica_healthy", func(s *replica.Snapshot) float64 { return b2f(s.Healthy) })
	gauge("inferrail_replica_ejected", func(s *replica.Snapshot) float64 { return b2f(s.Ejected(now)) })
	gauge("inferrail_replica_in_flight", func(s *replica.Snapshot) float64 { return float64(s.Counters.InFlight()) })
	gauge("inferrail_replica_pending", func(s *replica.Snapshot) float64 { return float64(s.Counters.Pending()) })
	writeModelHealth(b, snaps, now)
	counter("inferrail_ejections_total", func(s *replica.Snapshot) float64 { return float64(s.Ejections) })
	counter("inferrail_replica_restarts_total", func(s *replica.Snapshot) float64 { return float64(s.Restarts) })
	counter("inferrail_replica_engine_restarts_total", func(s *replica.Snapshot) float64 { return float64(s.EngineRestarts) })
	var shadowed []*replica.Snapshot
	for _, s := range snaps {
		if s.Shadow != nil {
			shadowed = append(shadowed, s)
		}
	}
	if all := snaps; len(shadowed) > 0 {
		snaps = shadowed
		index := func(s *replica.Snapshot) (blocks, capacity, bytes int) { return s.Shadow.Index() }
		gauge("inferrail_index_entries", func(s *replica.Snapshot) float64 { b, _, _ := index(s); return float64(b) })
		gauge("inferrail_index_bytes", func(s *replica.Snapshot) float64 { _, _, n := index(s); return float64(n) })
		gauge("inferrail_replica_index_capacity_blocks", func(s *replica.Snapshot) float64 { _, c, _ := index(s); return float64(c) })
		counter("inferrail_index_resets_total", func(s *replica.Snapshot) float64 { return float64(s.Shadow.Resets()) })
		gauge("inferrail_index_speculative_blocks", func(s *replica.Snapshot) float64 { return float64(s.Shadow.Speculative()) })
		gauge("inferrail_replica_queued_prefill_seconds", func(s *replica.Snapshot) float64 { return s.Shadow.Queued(now).Seconds() })
		writeFits(b, snaps)
		// inferrail_replica_index_mode{replica,mode}: 1 for the mode the
		// replica's prediction is in, 0 for the others.
		metrics.WriteMetadataIfNeeded(b, "inferrail_replica_index_mode", "gauge")
		for _, s := range snaps {
			for _, mode := range replica.IndexModes {
				b.WriteString(`inferrail_replica_index_mode{replica=` + strconv.Quote(s.ID) + `,mode="` + string(mode) + `"} ` +
					strconv.FormatFloat(b2f(s.IndexMode == mode), 'g', -1, 64) + "\n")
			}
		}
		snaps = all
	}

	// inferrail_replica_warning{replica,warning}: 1 while the warning is
	// raised, 0 otherwise, for every code, so that an alert can name it.
	metrics.WriteMetadataIfNeeded(b, "inferrail_replica_warning", "gauge")
	for _, s := range snaps {
		active := s.Warnings.List()
		for _, code := range replica.WarningCodes {
			v := "0"
			for _, w := range active {
				if w.Code == code {
					v = "1"
				}
			}
			b.WriteString(`inferrail_replica_warning{replica=` + strconv.Quote(s.ID) + `,warning="` + string(code) + `"} ` + v + "\n")
		}
	}

	// inferrail_load_scrapes_total{replica,result}
	metrics.WriteMetadataIfNeeded(b, "inferrail_load_scrapes_total", "counter")
	for _, s := range snaps {
		if s.Scrapes == nil {
			continue
		}
		for _, rc := range [...]struct {
			result string
			n      uint64
		}{{"ok", s.Scrapes.OK.Load()}, {"unreadable", s.Scrapes.Unreadable.Load()}, {"error", s.Scrapes.Failed.Load()}} {
			b.WriteString(`inferrail_load_scrapes_total{replica=` + strconv.Quote(s.ID) + `,result="` + rc.result + `"} ` +
				strconv.FormatUint(rc.n, 10) + "\n")
		}
	}

	// inferrail_kv_events_*, for replicas subscribed to their engine's KV
	// events (replicas[].kv_events).
	var evented []*replica.Snapshot
	for _, s := range snaps {
		if s.Events.Endpoint != "" && s.EventCounts != nil {
			evented = append(evented, s)
		}
	}
	if all := snaps; len(evented) > 0 {
		snaps = evented
		counter("inferrail_kv_events_batches_total", func(s *replica.Snapshot) float64 { return float64(s.EventCounts.Batches.Load()) })
		metrics.WriteMetadataIfNeeded(b, "inferrail_kv_events_blocks_total", "counter")
		for _, s := range snaps {
			c := s.EventCounts
			for _, oc := range [...]struct {
				op string
				n  uint64
			}{{"stored", c.Stored.Load()}, {"removed", c.Removed.Load()}, {"unmapped", c.Unmapped.Load()}, {"unknown", c.Unknown.Load()}} {
				b.WriteString(`inferrail_kv_events_blocks_total{replica=` + strconv.Quote(s.ID) + `,op="` + oc.op + `"} ` +
					strconv.FormatUint(oc.n, 10) + "\n")
			}
		}
		counter("inferrail_kv_events_gaps_total", func(s *replica.Snapshot) float64 { return float64(s.EventCounts.Gaps.Load()) })
		// inferrail_kv_events_fallbacks_total{replica,reason}: exact mode
		// given up, by why; inferrail_kv_events_resyncs_total: regained.
		metrics.WriteMetadataIfNeeded(b, "inferrail_kv_events_fallbacks_total", "counter")
		for _, s := range snaps {
			for _, reason := range replica.FallbackReasons {
				b.WriteString(`inferrail_kv_events_fallbacks_total{replica=` + strconv.Quote(s.ID) + `,reason="` + string(reason) + `"} ` +
					strconv.FormatUint(s.EventCounts.Fallbacks(reason), 10) + "\n")
			}
		}
		counter("inferrail_kv_events_resyncs_total", func(s *replica.Snapshot) float64 { return float64(s.EventCounts.Resyncs()) })
		snaps = all
	}

	// The engine's own view, for replicas whose page has been read.
	var read []*replica.Snapshot
	for _, s := range snaps {
		if !s.LoadAt.IsZero() {
			read = append(read, s)
		}
	}
	snaps = read
	if len(snaps) == 0 {
		return
	}
	gauge("inferrail_replica_engine_running", func(s *replica.Snapshot) float64 { return s.Load.Running })
	gauge("inferrail_replica_engine_waiting", func(s *replica.Snapshot) float64 { return s.Load.Waiting })
	gauge("inferrail_replica_engine_kv_usage", func(s *replica.Snapshot) float64 { return s.Load.KVUsage })
	gauge("inferrail_replica_engine_prefix_cache_queries", func(s *replica.Snapshot) float64 { return s.Load.PrefixQueries })
	gauge("inferrail_replica_engine_prefix_cache_hits", func(s *replica.Snapshot) float64 { return s.Load.PrefixHits })
	gauge("inferrail_replica_report_age_seconds", func(s *replica.Snapshot) float64 { return now.Sub(s.LoadAt).Seconds() })
}

// writeModelHealth writes inferrail_model_healthy_replicas{model}: the
// replicas of each model that are healthy and not ejected, the ones it can
// be routed to; 0 is the alert "no healthy replica for a model".
func writeModelHealth(b *bytes.Buffer, snaps []*replica.Snapshot, now time.Time) {
	healthy := map[string]int{}
	for _, s := range snaps {
		for _, m := range s.Models {
			if _, ok := healthy[m]; !ok {
				healthy[m] = 0
			}
			if s.Healthy && !s.Ejected(now) {
				healthy[m]++
			}
		}
	}
	models := make([]string, 0, len(healthy))
	for m := range healthy {
		models = append(models, m)
	}
	sort.Strings(models)
	metrics.WriteMetadataIfNeeded(b, "inferrail_model_healthy_replicas", "gauge")
	for _, m := range models {
		b.WriteString(`inferrail_model_healthy_replicas{model=` + strconv.Quote(m) + `} ` + strconv.Itoa(healthy[m]) + "\n")
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// Flow holds a model's admission queue series (flow_control).
type Flow struct {
	set   *metrics.Set
	model string
	// Queued is inferrail_flow_queued: requests waiting, every band.
	Queued *metrics.Gauge
	// Wait is inferrail_flow_wait_seconds: how long each waited.
	Wait *metrics.PrometheusHistogram
	// Dispatched is inferrail_flow_dispatched_total: waiting requests that
	// left the queue for a replica.
	Dispatched *metrics.Counter
	// inferrail_flow_rejected_total{reason}: Full (the queue was full),
	// TimedOut (max_wait passed), Shed (sheddable, the pool saturated),
	// Evicted (evicted for higher-priority work), NoEndpoints (max_wait
	// passed with no healthy replica).
	Full, TimedOut, Shed, Evicted, NoEndpoints *metrics.Counter
}

// Flow returns the admission queue series of model, creating them on first
// use.
func (r *Registry) Flow(model string) *Flow {
	m := `model=` + strconv.Quote(model)
	rejected := func(reason string) *metrics.Counter {
		return r.global.GetOrCreateCounter(`inferrail_flow_rejected_total{` + m + `,reason="` + reason + `"}`)
	}
	return &Flow{
		set:         r.global,
		model:       model,
		Queued:      r.global.GetOrCreateGauge(`inferrail_flow_queued{`+m+`}`, nil),
		Wait:        r.global.GetOrCreatePrometheusHistogramExt(`inferrail_flow_wait_seconds{`+m+`}`, latencyBuckets),
		Dispatched:  r.global.GetOrCreateCounter(`inferrail_flow_dispatched_total{` + m + `}`),
		Full:        rejected("full"),
		TimedOut:    rejected("timeout"),
		Shed:        rejected("shed"),
		Evicted:     rejected("evicted"),
		NoEndpoints: rejected("no_endpoints"),
	}
}

// Band is inferrail_flow_band_queued{model,priority}: the requests waiting
// in the band of priority p, created on first use.
func (f *Flow) Band(p int) *metrics.Gauge {
	return f.set.GetOrCreateGauge(`inferrail_flow_band_queued{model=`+strconv.Quote(f.model)+`,priority="`+strconv.Itoa(p)+`"}`, nil)
}

// writeFits writes the inferrail_cost_model_fit_* series of the replicas
// that calibrate their cost model online (routing.cost_model: auto): the
// a, b and d in effect, whether the fit prices the replica (1) or the
// configured values do (0), the fit's age in samples, its relative RMS
// error, and its samples and dropped outliers.
func writeFits(b *bytes.Buffer, snaps []*replica.Snapshot) {
	type fitted struct {
		id string
		f  *replica.Fit
	}
	var fits []fitted
	for _, s := range snaps {
		if f := s.Shadow.Fit(); f != nil {
			fits = append(fits, fitted{s.ID, f})
		}
	}
	if len(fits) == 0 {
		return
	}
	series := func(name, kind string, v func(*replica.Fit) float64) {
		metrics.WriteMetadataIfNeeded(b, name, kind)
		for _, x := range fits {
			b.WriteString(name + `{replica=` + strconv.Quote(x.id) + `} ` + strconv.FormatFloat(v(x.f), 'g', -1, 64) + "\n")
		}
	}
	series("inferrail_cost_model_fit_prefill_token_seconds", "gauge", func(f *replica.Fit) float64 { return f.Model.PrefillTokenSecs })
	series("inferrail_cost_model_fit_prefill_pair_seconds", "gauge", func(f *replica.Fit) float64 { return f.Model.PrefillPairSecs })
	series("inferrail_cost_model_fit_prefill_fixed_seconds", "gauge", func(f *replica.Fit) float64 { return f.Model.PrefillFixedSecs })
	series("inferrail_cost_model_fit_decode_step_seconds", "gauge", func(f *replica.Fit) float64 { return f.Model.DecodeStepSecs })
	series("inferrail_cost_model_fit_auto", "gauge", func(f *replica.Fit) float64 { return b2f(f.Fitted) })
	series("inferrail_cost_model_fit_age_samples", "gauge", func(f *replica.Fit) float64 { return float64(f.Stats.Age) })
	series("inferrail_cost_model_fit_relative_error", "gauge", func(f *replica.Fit) float64 { return f.Stats.RelError })
	series("inferrail_cost_model_fit_samples_total", "counter", func(f *replica.Fit) float64 { return float64(f.Stats.Samples) })
	series("inferrail_cost_model_fit_outliers_total", "counter", func(f *replica.Fit) float64 { return float64(f.Stats.Outliers) })
}

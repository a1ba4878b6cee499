package replica

import (
	"log/slog"
	"slices"
	"sync"
	"time"
)

// WarningCode names one way in which routing on a replica cannot work as
// configured. Every code the gateway raises is declared here, and nowhere
// else: the metrics page, /admin/replicas and the tests read them from
// WarningCodes.
type WarningCode string

// The warning codes.
const (
	// WarnEventsUnmapped: most of the blocks the engine's KV events store
	// cannot be placed in the index (an unknown parent, extra keys, another
	// hash scheme), so the events teach the index little or nothing.
	WarnEventsUnmapped WarningCode = "kv_events_unmapped"
	// WarnEventsForeignTokens: the events carry token ids outside the
	// model tokenizer's vocabulary; the engine tokenizes with another
	// tokenizer.
	WarnEventsForeignTokens WarningCode = "kv_events_foreign_tokens"
	// WarnEventsBlockSize: the events' blocks hold another number of tokens
	// than the configured block size.
	WarnEventsBlockSize WarningCode = "kv_events_block_size"
	// WarnEventsSilent: the replica is configured for KV events and none
	// has arrived.
	WarnEventsSilent WarningCode = "kv_events_silent"
	// WarnEventsNoTokenizer: the replica is configured for KV events but
	// its model has no tokenizer (none configured, or it failed to load),
	// so the gateway maps no text prompt to blocks: the index the events
	// fill is never queried, and routing on the replica ignores the cache.
	// It clears with the first prompt that maps to blocks (token ids).
	WarnEventsNoTokenizer WarningCode = "kv_events_no_tokenizer"
	// WarnEventsInterrupted: the replica followed its engine's KV events
	// and they stopped (IndexMode went back to approximate), until they
	// resume and a resync completes.
	WarnEventsInterrupted WarningCode = "kv_events_interrupted"
	// WarnSharedEngines: the engine runs more requests than this gateway
	// sent it, scrape after scrape (load.Shared), while the index follows
	// routing decisions: another router or client (a second gateway
	// instance) sends it requests, whose blocks this gateway never
	// predicts. cost_model's cold rendezvous is on while it holds.
	WarnSharedEngines WarningCode = "shared_engines"
	// WarnTokenizerMismatch: the engine's usage.prompt_tokens disagrees
	// with the gateway's own count for the same prompt.
	WarnTokenizerMismatch WarningCode = "tokenizer_mismatch"
	// WarnMetricsUnreadable: the engine's /metrics page lacks a family
	// that routing needs.
	WarnMetricsUnreadable WarningCode = "metrics_unreadable"
	// WarnMetricsPartial: the page is readable but lacks optional families
	// (the prefix-cache counters, say); routing uses what is there.
	WarnMetricsPartial WarningCode = "metrics_partial"
	// WarnCapacityUnits: the index capacity taken from the engine is
	// counted in tokens the gateway does not count the same way.
	WarnCapacityUnits WarningCode = "capacity_units"
	// WarnEngineUnauthorized: the engine answers the gateway's requests
	// with 401: its --api-key is not the key upstream.api_key_file or the
	// replica's api_key_file holds, or none is configured.
	WarnEngineUnauthorized WarningCode = "engine_unauthorized"
	// WarnFlowStale: flow control's utilization-detector counts the replica
	// saturated because its engine report is older than
	// flow_control.saturation_detector.metrics_staleness_threshold (or the
	// scrape fails): stale metrics fail closed, as in llm-d.
	WarnFlowStale WarningCode = "flow_metrics_stale"
	// WarnNoCachedTokens: the engine's usage carries no
	// prompt_tokens_details.cached_tokens (vLLM without
	// --enable-prompt-tokens-details), so every cache prediction on the
	// replica counts as unknown in inferrail_prediction_total.
	WarnNoCachedTokens WarningCode = "usage_no_cached_tokens"
	// WarnWarmStart: index.warm_start_from names peers and none could be
	// read (unreachable, refused, or a snapshot that did not decode), so
	// the replica's index started cold.
	WarnWarmStart WarningCode = "index_warm_start_failed"
	// WarnResponseLookup: the replica fails the gateway's lookups of
	// Responses response ids (GET /v1/responses/{id} answered neither 200
	// nor 404 in time: unreachable, slow, or refusing the key), so a
	// conversation it stores is routed as if no replica held it, until it
	// answers a lookup again.
	WarnResponseLookup WarningCode = "response_lookup_failed"
	// WarnFitNoSpread: routing.cost_model is auto and the replica's
	// measured prefills never varied enough in computed and cached tokens
	// to fit a, b and d (one prompt shape, or too few lone requests): the
	// configured values price it.
	WarnFitNoSpread WarningCode = "cost_model_no_spread"
	// WarnFitPoor: routing.cost_model is auto and the replica's fit
	// explains its measured prefills poorly (relative error above 50%):
	// the configured values price it until the error halves.
	WarnFitPoor WarningCode = "cost_model_fit_poor"
)

// WarningCodes lists every code, in the order the metrics page writes them.
var WarningCodes = []WarningCode{
	WarnEventsUnmapped, WarnEventsForeignTokens, WarnEventsBlockSize, WarnEventsSilent, WarnEventsInterrupted,
	WarnEventsNoTokenizer, WarnSharedEngines,
	WarnTokenizerMismatch, WarnMetricsUnreadable, WarnMetricsPartial, WarnCapacityUnits,
	WarnEngineUnauthorized, WarnFlowStale, WarnNoCachedTokens, WarnWarmStart, WarnResponseLookup,
	WarnFitNoSpread, WarnFitPoor,
}

// Warning is one active warning of a replica, as /admin/replicas shows it.
type Warning struct {
	Code    WarningCode `json:"code"`
	Message string      `json:"message"`
	Since   time.Time   `json:"since"`
}

// Warnings is a replica's set of active warnings. A nil *Warnings holds
// none and ignores Raise. It is shared by every
// snapshot of the replica, like Counters, and is safe for concurrent use:
// the replica's actor raises most of them, the request path some (a
// tokenizer that counts differently from the engine).
//
// The operator is told once: Raise logs a warning the first time a code is
// raised, and again only when its message changes or after it was cleared.
type Warnings struct {
	mu     sync.Mutex
	active map[WarningCode]Warning
}

// Raise sets code with msg at now and, when the code was not active or had
// another message, logs msg at warn level with attrs. It reports whether it
// logged. Callers whose message carries live numbers use RaiseNew, so
// that each change of a number is not a new log line.
func (w *Warnings) Raise(log *slog.Logger, now time.Time, code WarningCode, msg string, attrs ...any) bool {
	if w == nil {
		return false
	}
	w.mu.Lock()
	old, was := w.active[code]
	if was && old.Message == msg {
		w.mu.Unlock()
		return false
	}
	if w.active == nil {
		w.active = make(map[WarningCode]Warning)
	}
	since := now
	if was {
		since = old.Since
	}
	w.active[code] = Warning{Code: code, Message: msg, Since: since}
	w.mu.Unlock()
	if log != nil {
		log.Warn(msg, append([]any{"warning", string(code)}, attrs...)...)
	}
	return true
}

// RaiseNew is Raise for a message that carries live numbers: it sets code
// only when it is not active, so that two callers racing to raise it with
// different numbers log one line between them. It reports whether it
// logged.
func (w *Warnings) RaiseNew(log *slog.Logger, now time.Time, code WarningCode, msg string, attrs ...any) bool {
	if w == nil {
		return false
	}
	w.mu.Lock()
	if _, was := w.active[code]; was {
		w.mu.Unlock()
		return false
	}
	if w.active == nil {
		w.active = make(map[WarningCode]Warning)
	}
	w.active[code] = Warning{Code: code, Message: msg, Since: now}
	w.mu.Unlock()
	if log != nil {
		log.Warn(msg, append([]any{"warning", string(code)}, attrs...)...)
	}
	return true
}

// Clear ends code, and logs at info level that it ended if it was active.
// It reports whether the code was active.
func (w *Warnings) Clear(log *slog.Logger, code WarningCode) bool {
	if w == nil {
		return false
	}
	w.mu.Lock()
	_, was := w.active[code]
	delete(w.active, code)
	w.mu.Unlock()
	if was && log != nil {
		log.Info("replica warning cleared", "warning", string(code))
	}
	return was
}

// Active reports whether code is raised.
func (w *Warnings) Active(code WarningCode) bool {
	if w == nil {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	_, ok := w.active[code]
	return ok
}

// List returns the active warnings sorted by code; never nil.
func (w *Warnings) List() []Warning {
	if w == nil {
		return []Warning{}
	}
	w.mu.Lock()
	out := make([]Warning, 0, len(w.active))
	for _, v := range w.active {
		out = append(out, v)
	}
	w.mu.Unlock()
	slices.SortFunc(out, func(a, b Warning) int {
		switch {
		case a.Code < b.Code:
			return -1
		case a.Code > b.Code:
			return 1
		}
		return 0
	})
	return out
}

package replica

import (
	"fmt"
	"time"

	"github.com/inferrail/inferrail/model/prefix"
)

// IndexMode is how a replica's cache prediction is fed. Every mode is
// declared here; the metrics page (inferrail_replica_index_mode) and
// /admin/replicas read them from IndexModes.
type IndexMode string

// The index modes.
const (
	// IndexExact: the replica follows its engine's KV events and is in
	// step with them: the index holds what the engine's events say it
	// caches, plus the speculative entries of requests just routed there
	// (Config.SpeculativeTTL).
	IndexExact IndexMode = "exact"
	// IndexApproximate: the index is fed by routing decisions, kept
	// until evicted: a replica without KV events, one whose events have
	// not arrived yet, or one that fell back because they stopped
	// (FallbackReasons).
	IndexApproximate IndexMode = "approximate"
	// IndexNoTokenizer: the replica is configured for KV events, but its
	// model has no tokenizer and no prompt mapped to blocks has reached
	// it (prompts of token ids need none): whatever the events store, no
	// request queries it, and routing on the replica is cache-blind
	// (WarnEventsNoTokenizer). Underneath, the index follows its events
	// as in exact mode, ready for the first prompt it can query.
	IndexNoTokenizer IndexMode = "no_tokenizer"
)

// IndexModes lists every mode, in the order the metrics page writes them.
var IndexModes = []IndexMode{IndexExact, IndexApproximate, IndexNoTokenizer}

// FallbackReason is why a replica in exact mode fell back to the
// approximate index: the label of inferrail_kv_events_fallbacks_total.
type FallbackReason string

// The reasons.
const (
	// FallbackSilence: no batch for Config.MaxSilence after the engine
	// completed a request that must have stored blocks.
	FallbackSilence FallbackReason = "silence"
	// FallbackGap: batches were lost that the replay could not recover
	// (or there is no replay endpoint), or one did not decode.
	FallbackGap FallbackReason = "gap"
)

// A subscription that is down shows as silence: the SUB socket dials again
// on its own and tells no one. One that cannot start at all leaves the
// replica approximate from the start (and says so in the log).

// FallbackReasons lists every reason, in the order the metrics page writes
// them.
var FallbackReasons = []FallbackReason{FallbackSilence, FallbackGap}

// Fallbacks returns how many times the replica fell back for reason.
func (c *EventCounts) Fallbacks(reason FallbackReason) uint64 {
	switch reason {
	case FallbackSilence:
		return c.fallbackSilence.Load()
	case FallbackGap:
		return c.fallbackGap.Load()
	}
	return 0
}

// Resyncs returns how many times the replica returned to exact mode after
// a fallback.
func (c *EventCounts) Resyncs() uint64 { return c.resyncs.Load() }

func (c *EventCounts) fellBack(reason FallbackReason) {
	switch reason {
	case FallbackSilence:
		c.fallbackSilence.Add(1)
	case FallbackGap:
		c.fallbackGap.Add(1)
	default:
		panic("BUG: replica: fallback reason " + string(reason))
	}
}

// LastBatch returns the sequence number of the last batch applied and when
// it arrived; ok is false before the first.
func (c *EventCounts) LastBatch() (seq uint64, at time.Time, ok bool) {
	ns := c.lastAt.Load()
	if ns == 0 {
		return 0, time.Time{}, false
	}
	return c.lastSeq.Load(), time.Unix(0, ns), true
}

// The exact mode's life cycle, on the replica actor.
//
// A replica with a KV event stream starts approximate and turns exact with
// its first batch, when nothing is missing before it: the batch is the
// engine's first (sequence 0, live or through the catch-up replay). Once
// exact, the routing decisions it records are speculative and expire unless
// an event confirms them (estimate.Events.Speculate).
//
// It falls back to approximate when the events stop: batches are lost that
// the replay could not recover, or nothing arrives for
// MaxSilence after the engine completed a request that must have stored
// blocks (an attempt whose last block the events did not hold, assigned
// after the last batch). Speculative entries then stay, as decisions do
// without events. Meanwhile nothing expires: no entry is dropped for want of
// an event that cannot come.
//
// It returns to exact when a resync completes: after a pause with nothing
// lost (the stream resumed, its gap replayed) at the first batch, the
// decisions recorded meanwhile turning speculative; after a loss, whose
// mapping was reset, once the events place most of a window of stored
// blocks again (they know the parents of what the engine stores).

// indexMode is the mode the replica reports: no_tokenizer while it is blind,
// else the index's own.
func (a *replicaActor) indexMode() IndexMode {
	if a.blind {
		return IndexNoTokenizer
	}
	return a.mode
}

// checkBlind, when a replica starts, tells the operator once that its KV
// events feed an index its model's prompts cannot query.
func (a *replicaActor) checkBlind() {
	if a.cfg.Events == nil || a.stream.Endpoint == "" || len(a.models) == 0 || !a.cfg.NoTokenizer[a.models[0]] {
		return
	}
	a.blind = true
	a.warnings.Raise(a.log, a.cfg.Now(), WarnEventsNoTokenizer, fmt.Sprintf(
		"KV events are configured, but model %s has no tokenizer (see its start-up tokenizer line): the "+
			"gateway cannot map its text prompts to blocks, so the index the events fill is never queried and "+
			"routing on this replica ignores the cache (prompts sent as token ids are the exception); set "+
			"models[].tokenizer to the engine's tokenizer", a.models[0]), "endpoint", a.stream.Endpoint)
}

// mapped notes a prompt that maps to blocks: the index can be queried.
func (a *replicaActor) mapped(blocks []prefix.Hash) {
	if !a.blind || len(blocks) == 0 {
		return
	}
	a.blind = false
	if a.warnings.Clear(a.log, WarnEventsNoTokenizer) {
		a.log.Info("KV events: a prompt mapped to blocks (token ids); the index is queried", "mode", string(a.mode))
	}
	a.publish()
}

// exactTick checks, at now, whether the events went silent, and expires
// speculative entries while they are not overdue.
func (a *replicaActor) exactTick(now time.Time) {
	if a.mode != IndexExact {
		return
	}
	if !a.overdueSince.IsZero() {
		if now.Sub(a.overdueSince) >= a.cfg.MaxSilence {
			a.fallBack(FallbackSilence, fmt.Sprintf("nothing for %s after the engine completed requests that "+
				"stored blocks", now.Sub(a.overdueSince).Round(time.Millisecond)))
		}
		return
	}
	if a.mirror.Expire(now, a.est.Index) > 0 {
		a.publishShadow(now)
	}
}

// fallBack turns the replica approximate for reason, with what happened.
func (a *replicaActor) fallBack(reason FallbackReason, what string) {
	if a.mode != IndexExact {
		return
	}
	a.mode = IndexApproximate
	a.mirror.Settle()
	a.eventCounts.fellBack(reason)
	a.warnings.Raise(a.log, a.cfg.Now(), WarnEventsInterrupted, fmt.Sprintf(
		"KV events stopped (%s): %s; the cache prediction follows routing decisions until they resume and "+
			"a resync completes", reason, what), "endpoint", a.stream.Endpoint)
	a.publishShadow(a.cfg.Now())
	a.publish()
}

// enterExact turns the replica exact at now: the resync completed.
func (a *replicaActor) enterExact(now time.Time) {
	if a.mode == IndexExact {
		return
	}
	if !a.lossy {
		// Nothing was lost: what decisions put in the index meanwhile
		// and the engine has not stored is speculative like any other.
		a.mirror.SpeculateIndex(a.est.Index, now, a.cfg.SpeculativeTTL)
	}
	a.mode, a.lossy, a.overdueSince = IndexExact, false, time.Time{}
	if a.everExact {
		a.eventCounts.resyncs.Add(1)
	}
	a.everExact = true
	if a.warnings.Clear(a.log, WarnEventsInterrupted) {
		a.log.Info("KV events: in step with the engine again; the prediction is exact", "endpoint", a.stream.Endpoint)
	}
	a.publishShadow(now)
	a.publish()
}

// lost records that events were lost that nothing can bring back: the
// mapping is reset (its view of the engine has holes) and the replica falls
// back until a resync shows the events in step again.
func (a *replicaActor) lost(reason FallbackReason, what string) {
	a.lossy = true
	a.mirror.Reset()
	a.resyncFrom = a.mirror.Stats()
	a.fallBack(reason, what)
}

// resynced reports whether, after a loss, the events place most of a window
// of stored blocks again; a window that does not moves the start on.
func (a *replicaActor) resynced() bool {
	st := a.mirror.Stats()
	blocks := st.Blocks - a.resyncFrom.Blocks
	if blocks < eventsWindow {
		return false
	}
	unmapped := st.Unmapped - a.resyncFrom.Unmapped
	a.resyncFrom = st
	return 2*unmapped <= blocks
}

// expectsEvents reports whether an attempt on blocks must make the engine
// publish a store: the events do not hold its last block, which the engine
// caches once it has computed the prompt.
func (a *replicaActor) expectsEvents(blocks []prefix.Hash) bool {
	return a.mirror != nil && len(blocks) > 0 && !a.mirror.Held(blocks[len(blocks)-1])
}

// completed notes at now an attempt that completed, for the silence rule: one
// that must have stored blocks, assigned after the last batch arrived, makes
// the events overdue from now.
func (a *replicaActor) completed(at *Attempt, now time.Time) {
	if at == nil || !at.expects || a.lastBatchAt.After(at.assignedAt) || !a.overdueSince.IsZero() {
		return
	}
	a.overdueSince = now
}

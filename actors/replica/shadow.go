package replica

import (
	"sync/atomic"
	"time"

	"github.com/inferrail/inferrail/model/cost"
	"github.com/inferrail/inferrail/model/estimate"
	"github.com/inferrail/inferrail/model/kvindex"
	"github.com/inferrail/inferrail/model/prefix"
	"github.com/inferrail/inferrail/model/route"
)

// Shadow is what a replica actor publishes of its shadow state (its KV
// index and virtual prefill queue) for readers outside the actor: routing
// actors pricing a replica that missed the estimate deadline, and metrics.
// It is shared by pointer between every snapshot of the replica and its
// Handle, outlives actor restarts, and is safe for concurrent use.
type Shadow struct {
	// Capacity configured for the index: the replica's kv_capacity_blocks,
	// 0 for "what the engine reports, else the default". Set before the
	// actor starts.
	configured atomic.Int64

	// Assignment numbers: routing actors take the next one with Next as
	// they assign a request to the replica; the actor publishes the last one
	// it applied. A routing actor adds what it assigned past Applied to a
	// reply, so a burst of decisions between an estimate and its
	// assignment does not herd onto the replica that looked idle.
	assigned atomic.Uint64
	applied  atomic.Uint64

	busyUntil atomic.Int64 // the prefill queue's end, Unix ns; 0 when empty
	waiting   atomic.Int64 // requests in the queue
	// pendingTokens sums the Tokens of the attempts assigned here that
	// have not had their first byte or ended.
	pendingTokens atomic.Int64

	blocks      atomic.Int64 // blocks the index holds
	capacity    atomic.Int64 // the index's capacity in blocks
	bytes       atomic.Int64 // the index's memory
	resets      atomic.Int64 // engines found restarted, so the index was cleared
	speculative atomic.Int64 // of the blocks, those a decision put there and no event confirmed yet

	// calib is the configured cost model the online fit starts from, nil
	// when the replica does not calibrate (SetCalibration); fit is the fit
	// the actor last published (calibrate.go).
	calib atomic.Pointer[cost.Model]
	fit   atomic.Pointer[Fit]
}

// SetConfiguredCapacity sets kv_capacity_blocks for the replica (0: ask the
// engine, else the fleet default). Call it before the actor starts.
func (s *Shadow) SetConfiguredCapacity(blocks int) { s.configured.Store(int64(max(blocks, 0))) }

// Next takes the next assignment number.
func (s *Shadow) Next() uint64 { return s.assigned.Add(1) }

// Applied returns the last assignment number the actor applied.
func (s *Shadow) Applied() uint64 { return s.applied.Load() }

// Queued returns the virtual prefill queue at now, as last published.
func (s *Shadow) Queued(now time.Time) time.Duration {
	if s.waiting.Load() == 0 {
		return 0
	}
	end := s.busyUntil.Load()
	if d := end - now.UnixNano(); d > 0 {
		return time.Duration(d)
	}
	return 0
}

// PendingTokens returns the tokens to compute of the requests assigned to
// the replica that await their first byte (policy.Candidate.PendingTokens,
// llm-d's in-flight tokens), as last published.
func (s *Shadow) PendingTokens() int { return int(max(s.pendingTokens.Load(), 0)) }

// Index returns the blocks the index holds, its capacity and its bytes.
func (s *Shadow) Index() (blocks, capacity, bytes int) {
	return int(s.blocks.Load()), int(s.capacity.Load()), int(s.bytes.Load())
}

// Resets returns how many times the index was cleared for a restarted
// engine.
func (s *Shadow) Resets() int { return int(s.resets.Load()) }

// Speculative returns how many blocks of the index are speculative: put
// there by routing decisions in exact mode, not yet confirmed by an event.
func (s *Shadow) Speculative() int { return int(s.speculative.Load()) }

// Gather is one estimate broadcast as a replica actor answers it: the
// routing actor's collector of the replies (routing.Gather). The actor
// reads the query and fills its own slot, once.
type Gather interface {
	// Query is what the broadcast asks.
	Query() *estimate.Query
	// Fill sets slot's reply. It must not block.
	Fill(slot int, r route.Reply)
}

// Attempt is one request attempt assigned to a replica, from its
// assignment to its end. The request path creates it and sends it in
// Assign, FirstByte and RequestDone, always from one goroutine, so the actor
// sees them in that order; only the actor touches its unexported fields.
type Attempt struct {
	// Blocks are the prompt's block hashes, recorded in the index.
	Blocks []prefix.Hash
	// Prefill is the prompt's estimated prefill on the replica, added to
	// its queue.
	Prefill time.Duration
	// Seq is the assignment number Shadow.Next gave it.
	Seq uint64
	// Price, when set, prices Prefill on the replica, from its own
	// prediction for the prompt of PromptTokens tokens in blocks of
	// BlockSize: the decision was made without an estimate (a cache-blind
	// arm of a split). It runs on the replica actor.
	Price                   func(cachedTokens int) time.Duration
	PromptTokens, BlockSize int
	// Tokens is the prompt's tokens to compute on the replica, less those
	// predicted cached there, counted in its pending tokens until the
	// first byte. With Price the actor sets it from its own prediction.
	Tokens int
	// Cached is the tokens predicted cached there, and Running the
	// requests the decision saw running there: what the online fit's
	// sample of its prefill is priced with (routing.cost_model: auto).
	Cached, Running int
	// EngineCached is 1 + the cached tokens the engine reported in the
	// response's usage, 0 when unknown, and FirstToken when the first
	// event of a streamed response arrived, zero for a response not
	// streamed (its head comes after its last token). The request path sets
	// both before RequestDone (fleet.Decision.ReportCached and
	// ReportFirstToken); the attempt's prefill sample is taken from them.
	EngineCached int
	FirstToken   time.Time

	receipt   kvindex.Receipt
	pending   bool // Tokens are counted in Shadow.pendingTokens
	firstByte bool
	ended     bool
	// For the silence rule (mode.go): whether the engine must publish a
	// store for it, and when it was assigned.
	expects    bool
	assignedAt time.Time
	// For the online fit (calibrate.go): its timing from the assignment,
	// and whether the index was exact then.
	timing        estimate.Timing
	exactAtAssign bool
}

// maxReportedCapacity bounds the index capacity taken from an engine's
// report: 4M blocks, 64M tokens at block size 16, far above any one engine's
// cache today. kv_capacity_blocks in the config is taken as it is.
const maxReportedCapacity = 1 << 22

// capacity is the index capacity the actor uses (indexCapacity).
func (a *replicaActor) capacity() int {
	c, _ := indexCapacity(int(a.shadow.configured.Load()), a.load.KVCapacityBlocks, a.cfg.IndexCapacity)
	return c
}

// indexCapacity chooses a replica's index capacity in blocks: configured
// (kv_capacity_blocks), else the engine's reported KV capacity, else
// fallback (index.default_capacity_blocks). fromEngine reports the second
// case, a capacity counted in the engine's blocks of the engine's tokens.
func indexCapacity(configured, reported, fallback int) (blocks int, fromEngine bool) {
	if configured > 0 {
		return configured, false
	}
	if reported > 0 {
		// The index takes its memory up front (about 40 bytes a block),
		// so a page reporting an absurd capacity must not size it.
		return min(reported, maxReportedCapacity), true
	}
	return max(fallback, 1), false
}

// CapacityFromEngine reports whether the replica's index is sized by the
// KV capacity its engine reports, rather than by kv_capacity_blocks or
// index.default_capacity_blocks.
func (s *Snapshot) CapacityFromEngine() bool {
	if s.Shadow == nil {
		return false
	}
	_, fromEngine := indexCapacity(int(s.Shadow.configured.Load()), s.Load.KVCapacityBlocks, 0)
	return fromEngine
}

func (a *replicaActor) estimate(m *Estimate) {
	g := m.Gather
	now := a.cfg.Now()
	a.exactTick(now)
	r := a.est.Estimate(g.Query(), now)
	g.Fill(m.Slot, route.Reply{Reply: r, Applied: a.shadow.applied.Load()})
}

// assign records an attempt routed to the replica. In exact mode its blocks
// are speculative (Config.SpeculativeTTL), or not recorded at all without
// a TTL.
func (a *replicaActor) assign(m *Assign) {
	at := m.Attempt
	now := a.cfg.Now()
	a.exactTick(now)
	if at.Price != nil {
		cached := a.est.Index.Predict(at.Blocks, at.PromptTokens, at.BlockSize)
		at.Prefill, at.Tokens = at.Price(cached), max(at.PromptTokens-cached, 0)
	}
	if !at.ended && !at.firstByte && at.Tokens > 0 {
		at.pending = true
		a.shadow.pendingTokens.Add(int64(at.Tokens))
	}
	a.mapped(at.Blocks)
	at.expects, at.assignedAt = a.expectsEvents(at.Blocks), now
	switch {
	case a.mode != IndexExact:
		at.receipt = a.est.Assign(at.Blocks, at.Prefill, now)
	case a.cfg.SpeculativeTTL > 0:
		at.receipt = a.est.Assign(at.Blocks, at.Prefill, now)
		a.mirror.Speculate(at.Blocks, now, a.cfg.SpeculativeTTL)
	default:
		a.est.Queue.Add(now, at.Prefill)
	}
	a.timeAttempt(at, now)
	if at.Seq > a.shadow.applied.Load() {
		a.shadow.applied.Store(at.Seq)
	}
	a.publishShadow(now)
}

func (a *replicaActor) firstByte(m *FirstByte) {
	at := m.Attempt
	if at.firstByte || at.ended {
		return
	}
	at.firstByte = true
	a.settlePending(at)
	now := a.cfg.Now()
	a.est.FirstByte(now)
	a.publishQueue(now)
}

// settlePending takes an attempt's tokens off the pending count, once: at
// its first byte, or when it ends without one.
func (a *replicaActor) settlePending(at *Attempt) {
	if at.pending {
		at.pending = false
		a.shadow.pendingTokens.Add(-int64(at.Tokens))
	}
}

// attemptEnded settles an attempt's shadow state: a failed attempt's blocks
// are taken back, and one that ends before its first byte leaves the queue.
func (a *replicaActor) attemptEnded(at *Attempt, o Outcome) {
	if at == nil || at.ended {
		return
	}
	at.ended = true
	a.settlePending(at)
	if o == OutcomeOK {
		a.settleSample(at)
	}
	now := a.cfg.Now()
	switch o {
	case OutcomeFailed, OutcomeWithdrawn:
		a.est.Failed(at.receipt, at.firstByte, now)
		a.publishShadow(now)
	case OutcomeCancelled:
		a.est.Cancelled(at.firstByte, now)
		a.publishQueue(now)
	default:
		if !at.firstByte {
			a.est.FirstByte(now)
			a.publishQueue(now)
		}
	}
}

// How an engine restart was noticed: its metrics' counters went backwards,
// or its KV event sequence did.
const (
	restartByMetrics = iota + 1
	restartByEvents
)

// sameRestart is how close together the two ways must notice a restart for
// it to count as one. The KV event stream sees the new engine's first batch
// at once, the scrape loop its counters within a scrape interval.
const sameRestart = 5 * time.Second

// engineRestarted clears the shadow state of an engine found restarted,
// and the mapping of its KV events: its block hashes are gone with it. It
// reports false, clearing nothing, when the other way noticed the same
// restart just before: by then the index holds what the new engine stored
// or was sent since, which a second clear would throw away.
func (a *replicaActor) engineRestarted(by int) bool {
	now := a.cfg.Now()
	if a.restartBy != 0 && a.restartBy != by && now.Sub(a.restartAt) < sameRestart {
		a.restartBy = 0 // the next restart is a new one
		return false
	}
	a.restartAt, a.restartBy = now, by
	a.est.Restarted()
	if a.mirror != nil {
		a.mirror.Reset()
		// The new engine's cache is as empty as the mapping: nothing is
		// missing from it.
		a.lossy, a.overdueSince = false, time.Time{}
	}
	a.shadow.resets.Add(1)
	a.publishShadow(now)
	return true
}

func (a *replicaActor) publishQueue(now time.Time) {
	s := a.shadow
	if q := a.est.Queue.Queued(now); q > 0 {
		s.busyUntil.Store(now.Add(q).UnixNano())
	} else {
		s.busyUntil.Store(0)
	}
	s.waiting.Store(int64(a.est.Queue.Waiting()))
}

func (a *replicaActor) publishShadow(now time.Time) {
	a.publishQueue(now)
	x := a.est.Index
	a.shadow.blocks.Store(int64(x.Len()))
	a.shadow.capacity.Store(int64(x.Capacity()))
	a.shadow.bytes.Store(x.Bytes())
	if a.mirror != nil {
		a.shadow.speculative.Store(int64(a.mirror.Speculative()))
	}
}

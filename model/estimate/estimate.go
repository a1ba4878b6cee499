// Package estimate is what a replica keeps to answer cost estimates: its
// shadow KV index and its virtual prefill queue, with the rules that keep
// them in step with what was routed to it. The gateway's replica actors and
// the virtual-time fleet simulator both own one Replica per engine, so the
// two predict with the same code.
//
// estimate starts no goroutines, does no I/O and keeps no globals. A Replica
// is owned by one actor (or one simulated replica) and is not safe for
// concurrent use.
package estimate

import (
	"time"

	"github.com/inferrail/inferrail/model/cost"
	"github.com/inferrail/inferrail/model/kvindex"
	"github.com/inferrail/inferrail/model/policy"
	"github.com/inferrail/inferrail/model/prefix"
)

// Query is one prompt to price: its full blocks' chained hashes, its length
// in tokens and the engine's block size.
type Query struct {
	Blocks       []prefix.Hash
	PromptTokens int
	BlockSize    int
}

// Reply is a replica's answer to a Query.
type Reply struct {
	// CachedTokens is how many leading prompt tokens the index predicts the
	// engine holds (kvindex.Index.Predict).
	CachedTokens int
	// QueuedPrefill is the virtual prefill queue at the time of the reply.
	QueuedPrefill time.Duration
	// Waiting is how many routed requests still wait for their first byte.
	Waiting int
}

// Fill copies the reply into a policy candidate.
func (r Reply) Fill(c *policy.Candidate) {
	c.CachedTokens = r.CachedTokens
	c.QueuedPrefill = r.QueuedPrefill
}

// Replica is one engine's shadow state.
type Replica struct {
	Index *kvindex.Index
	Queue cost.PrefillQueue
	// Fit is the replica's online fit of its prefill (calibrate.go), nil
	// unless its cost model is auto.
	Fit *cost.Online
	// added remembers when the last requests timed were added (Time).
	added [64]added
}

// New returns a Replica whose index holds capacity blocks.
func New(capacity int) *Replica { return &Replica{Index: kvindex.New(capacity)} }

// Estimate answers q at now without changing anything.
func (r *Replica) Estimate(q *Query, now time.Time) Reply {
	return Reply{
		CachedTokens:  r.Index.Predict(q.Blocks, q.PromptTokens, q.BlockSize),
		QueuedPrefill: r.Queue.Queued(now),
		Waiting:       r.Queue.Waiting(),
	}
}

// Assign records a request routed to the replica at now: its blocks go into
// the index and its estimated prefill onto the queue. The receipt takes the
// blocks back if the attempt fails (Failed).
func (r *Replica) Assign(blocks []prefix.Hash, prefill time.Duration, now time.Time) kvindex.Receipt {
	r.Queue.Add(now, prefill)
	return r.Index.Record(blocks)
}

// FirstByte records that an assigned request got its first byte: it leaves
// the prefill queue.
func (r *Replica) FirstByte(now time.Time) { r.Queue.Done(now) }

// Failed records that an assigned attempt ended without the engine computing
// its prompt (refused, an error status, or a failure before answering): its
// blocks are taken back, and it leaves the queue unless it had already left
// at its first byte.
func (r *Replica) Failed(rc kvindex.Receipt, hadFirstByte bool, now time.Time) {
	r.Index.TakeBack(rc)
	if !hadFirstByte {
		r.Queue.Done(now)
	}
}

// Cancelled records that an assigned attempt ended because its client left
// before the first byte. The engine may have computed some of the prompt,
// so the blocks stay.
func (r *Replica) Cancelled(hadFirstByte bool, now time.Time) {
	if !hadFirstByte {
		r.Queue.Done(now)
	}
}

// Restarted forgets everything: the engine was found restarted, so its
// cache is empty and nothing routed before is queued there any more.
func (r *Replica) Restarted() {
	r.Index.Clear()
	r.Queue.Reset()
}

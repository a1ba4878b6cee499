package replica

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/inferrail/inferrail/model/dump"
	"github.com/inferrail/inferrail/model/prefix"
)

// dumpIndex is the replica's part of its instance's index snapshot: the
// index's blocks least recent first, and the KV event mapping with the last
// batch's sequence when it follows events.
func (a *replicaActor) dumpIndex() *dump.Replica {
	r := &dump.Replica{ID: a.id}
	if a.est != nil {
		r.Blocks = make([]prefix.Hash, 0, a.est.Index.Len())
		for h := range a.est.Index.All() {
			r.Blocks = append(r.Blocks, h)
		}
	}
	if a.mirror != nil {
		r.Engine = a.mirror.Export(nil)
	}
	if a.eventCounts != nil {
		r.Seq, _, r.HasSeq = a.eventCounts.LastBatch()
	}
	return r
}

// warmIndex adds a peer's snapshot of this replica to the index, in the
// peer's order, so that its most recent block is the most recent here
// and the index evicts as the peer's would; and its engine blocks to the
// KV event mapping, so that the engine's events about them are understood.
// What the index held already stays, behind.
//
// When the snapshot names the last batch it holds, the replica follows
// events with a replay endpoint and is not exact yet, it subscribes again,
// catching up from the batch after the snapshot's: the engine's replay
// buffer need only reach back to the snapshot, not to the engine's start.
func (a *replicaActor) warmIndex(ctx actor.Context, r *dump.Replica) {
	if a.est == nil || r == nil {
		return
	}
	one := make([]prefix.Hash, 1)
	for _, h := range r.Blocks {
		one[0] = h
		a.est.Index.Record(one)
	}
	if a.mirror != nil {
		a.mirror.Import(r.Engine)
	}
	if a.mirror != nil && r.HasSeq && a.stream.Replay != "" && a.mode != IndexExact && a.events != nil {
		a.stopEvents()
		// The mapping now holds the engine's state up to r.Seq.
		a.stream.From, a.lossy = r.Seq+1, false
		a.subscribe(ctx)
		a.log.Info("KV events: catching up from the peer's snapshot", "from_seq", a.stream.From)
	}
	a.publishShadow(a.cfg.Now())
	a.log.Info("replica: index warmed from a peer", "blocks", len(r.Blocks), "engine_blocks", len(r.Engine))
}

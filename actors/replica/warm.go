package replica

import (
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
func (a *replicaActor) warmIndex(r *dump.Replica) {
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
	a.publishShadow()
	a.log.Info("replica: index warmed from a peer", "blocks", len(r.Blocks), "engine_blocks", len(r.Engine))
}

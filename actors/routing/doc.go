// Package routing holds the gateway's routing actors: one per model, owning
// that model's policy state (a round-robin position, a seeded random source)
// and answering Pick.
//
// A routing actor decides from the replicas' published snapshots alone: it
// offers the policy every replica that serves the model, passes its health
// checks, is not ejected, was not already tried by the request and has room
// under its breakers, then takes a lease on the winner's counters before it
// answers. Because decisions are serialized in the actor and each one holds
// its lease before the next is made, a burst of requests sees every earlier
// decision of the burst and cannot herd onto the replica that looked idle.
// It never messages a replica actor, so a decision costs one mailbox hop and
// no scatter-gather.
//
// routing starts no goroutines and does no I/O. Its state lives in the actor
// and is touched only inside Receive, which never blocks.
package routing

package cost

import "time"

// PrefillQueue is a replica's virtual prefill queue, the raw part of
// cost_model's W. Each request routed to the replica adds its estimated
// prefill; the queue drains in real time, as the engine computes, and counts
// as empty once every request in it has its first byte (or has ended), so an
// estimate that ran long never leaves a phantom queue behind.
//
// A PrefillQueue is a value owned by one replica actor (or one simulated
// replica); it is not safe for concurrent use. The zero value is an empty
// queue.
type PrefillQueue struct {
	busyUntil time.Time // when the queued prefill is done if nothing else arrives
	waiting   int       // requests added and not yet Done
	added     uint64    // requests ever added, numbering them
}

// Add queues a request whose prefill is estimated at prefill, at time now.
func (q *PrefillQueue) Add(now time.Time, prefill time.Duration) {
	if q.busyUntil.Before(now) {
		q.busyUntil = now
	}
	q.busyUntil = q.busyUntil.Add(max(prefill, 0))
	q.waiting++
	q.added++
}

// Added returns how many requests were ever added: the number of the last
// one, which a later Add changes.
func (q *PrefillQueue) Added() uint64 { return q.added }

// Done records that a request added earlier got its first byte, or ended
// without one. Once none wait, the queue is empty whatever remains of the
// estimates.
func (q *PrefillQueue) Done(now time.Time) {
	if q.waiting > 0 {
		q.waiting--
	}
	if q.waiting == 0 {
		q.busyUntil = now
	}
}

// Queued returns the prefill still queued at now: what remains of the added
// estimates, drained in real time, or 0 once no request waits.
func (q *PrefillQueue) Queued(now time.Time) time.Duration {
	if q.waiting == 0 || !q.busyUntil.After(now) {
		return 0
	}
	return q.busyUntil.Sub(now)
}

// Waiting returns how many added requests have not been marked Done.
func (q *PrefillQueue) Waiting() int { return q.waiting }

// Reset empties the queue, for an engine found restarted. The numbering
// goes on.
func (q *PrefillQueue) Reset() { *q = PrefillQueue{added: q.added} }

package replica

import "sync/atomic"

// Counters are a replica's live request counts. They are shared by pointer
// between the replica actor, every snapshot it publishes and the request
// path, and are safe for concurrent use. They outlive actor restarts: a
// restarted actor gets the same Counters, because the requests they count
// are still running.
type Counters struct {
	inFlight atomic.Int64  // requests between acquire and release
	pending  atomic.Int64  // of those, requests still waiting for a response head
	started  atomic.Uint64 // requests ever acquired, for the shared-engine check

	maxConcurrency int64 // cap on inFlight; 0 means none
	maxPending     int64 // cap on pending; 0 means none
}

// NewCounters returns counters with the given caps (0 means no cap).
func NewCounters(maxConcurrency, maxPending int) *Counters {
	return &Counters{maxConcurrency: int64(maxConcurrency), maxPending: int64(maxPending)}
}

// InFlight is the number of requests in flight.
func (c *Counters) InFlight() int { return int(c.inFlight.Load()) }

// Started is the number of requests ever acquired.
func (c *Counters) Started() uint64 { return c.started.Load() }

// Pending is the number of requests in flight without a response head yet.
func (c *Counters) Pending() int { return int(c.pending.Load()) }

// HasRoom reports whether a request could be acquired now. It is advisory:
// TryAcquire decides.
func (c *Counters) HasRoom() bool {
	return (c.maxConcurrency == 0 || c.inFlight.Load() < c.maxConcurrency) &&
		(c.maxPending == 0 || c.pending.Load() < c.maxPending)
}

// TryAcquire takes one in-flight slot and one pending slot when both caps
// allow it, and returns the lease that gives them back. It reports false,
// taking nothing, when either cap is reached.
//
// Each count is raised with a compare-and-swap loop against its cap, so no
// number of concurrent callers ever pushes a count past its cap. When the
// pending cap refuses after the in-flight slot was taken, that slot is handed
// back; a racing caller may then see the replica full for that instant, which
// errs on the side of the cap.
func (c *Counters) TryAcquire() (*Lease, bool) {
	if !take(&c.inFlight, c.maxConcurrency) {
		return nil, false
	}
	if !take(&c.pending, c.maxPending) {
		c.inFlight.Add(-1)
		return nil, false
	}
	c.started.Add(1)
	return &Lease{c: c}, true
}

// Acquire takes one in-flight slot and one pending slot whatever the caps:
// for a request that is on the replica already, which an endpoint picker
// learns after the fact (fleet.Fleet.Moved). The counts may then pass the
// caps until it ends, and HasRoom turns new requests away meanwhile.
func (c *Counters) Acquire() *Lease {
	c.inFlight.Add(1)
	c.pending.Add(1)
	c.started.Add(1)
	return &Lease{c: c}
}

// take adds one to v unless that would pass limit (0 means no limit).
func take(v *atomic.Int64, limit int64) bool {
	if limit == 0 {
		v.Add(1)
		return true
	}
	for {
		n := v.Load()
		if n >= limit {
			return false
		}
		if v.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// Lease states, as bits of Lease.state.
const (
	leaseFirstByte uint32 = 1 << iota // the pending slot was given back at the response head
	leaseReleased                     // every slot was given back
)

// A Lease holds one request's in-flight and pending slots on a replica's
// Counters, from the routing decision to the end of the attempt. It is safe
// for concurrent use: each slot is given back exactly once however many
// times, and from however many goroutines, FirstByte and Release are called.
// A lease keeps working after its replica's actor has stopped (a DNS member
// that left), since it touches only the shared Counters.
type Lease struct {
	c     *Counters
	state atomic.Uint32
}

// FirstByte gives back the pending slot when the response head arrives. It
// does nothing after the first call or after Release.
func (l *Lease) FirstByte() {
	for {
		s := l.state.Load()
		if s != 0 {
			return
		}
		if l.state.CompareAndSwap(s, leaseFirstByte) {
			l.c.pending.Add(-1)
			return
		}
	}
}

// Release gives back the in-flight slot, and the pending slot too if
// FirstByte was never called. It does nothing after the first call.
func (l *Lease) Release() {
	for {
		s := l.state.Load()
		if s&leaseReleased != 0 {
			return
		}
		if l.state.CompareAndSwap(s, s|leaseReleased) {
			// Pending first, so that pending <= in flight holds for
			// every reader at every instant.
			if s&leaseFirstByte == 0 {
				l.c.pending.Add(-1)
			}
			l.c.inFlight.Add(-1)
			return
		}
	}
}

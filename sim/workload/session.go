package workload

import (
	"container/heap"
	"strconv"
	"time"
)

// script is one conversation or agent loop: it makes its requests one
// after the other.
type script interface {
	// turn makes the session's next request (At left zero) and returns the
	// gap to the one after it; more is false after the last. ok is false
	// when the session ended without a request.
	turn(enc *Encoder) (r Request, gap time.Duration, more, ok bool)
}

// sessions merges the requests of many sessions, each started at an
// arrival of its clock. Sessions start from a time before zero, so that at
// zero as many are under way as in a steady state; their requests due
// before zero are made (later ones resend them) but not yielded.
type sessions struct {
	clock     *clock
	nextStart time.Duration
	start     func(id int) script
	queue     turnQueue
	enc       *Encoder
	started   int
}

func newSessions(c *clock, start func(id int) script) *sessions {
	s := &sessions{clock: c, start: start, enc: NewEncoder()}
	s.nextStart = c.next()
	return s
}

func (s *sessions) Next() Request {
	for {
		for len(s.queue) == 0 || s.nextStart <= s.queue[0].at {
			heap.Push(&s.queue, &pendingTurn{at: s.nextStart, id: s.started, sc: s.start(s.started)})
			s.started++
			s.nextStart = s.clock.next()
		}
		p := s.queue[0]
		at := p.at
		r, gap, more, ok := p.sc.turn(s.enc)
		if more {
			p.at += gap
			heap.Fix(&s.queue, 0)
		} else {
			heap.Pop(&s.queue)
		}
		if ok && at >= 0 {
			r.At = at
			return r
		}
	}
}

// sessionID names session id of a run started from seed, for x-session-id.
func sessionID(prefix string, seed uint64, id int) string {
	return prefix + "-" + strconv.FormatUint(seed%1_000_000, 10) + "-" + strconv.Itoa(id)
}

// pendingTurn is a session waiting for its next request's time.
type pendingTurn struct {
	at time.Duration
	id int
	sc script
}

// turnQueue is a min-heap by time, then by session (so ties are
// deterministic).
type turnQueue []*pendingTurn

func (q turnQueue) Len() int { return len(q) }
func (q turnQueue) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].id < q[j].id
}
func (q turnQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *turnQueue) Push(x any)   { *q = append(*q, x.(*pendingTurn)) }
func (q *turnQueue) Pop() any {
	old := *q
	x := old[len(old)-1]
	old[len(old)-1] = nil
	*q = old[:len(old)-1]
	return x
}

// mixSeed derives a session's content seed from the run's, so that a
// session's content does not depend on how its requests interleave with
// others' (the splitmix64 finalizer).
func mixSeed(seed uint64, id int) uint64 {
	x := seed ^ (uint64(id)+1)*0x9e3779b97f4a7c15
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

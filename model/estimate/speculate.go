package estimate

import (
	"time"

	"github.com/inferrail/inferrail/model/kvindex"
	"github.com/inferrail/inferrail/model/prefix"
)

// speculation tracks the blocks of a replica's index that routing decisions
// put there and no event of the engine holds yet, each with the time it
// expires: llm-d's speculative indexing (speculativeTTL, 2 s by default). An
// engine announces a prompt's blocks only once it has computed them; until
// then the next request for the same prefix must still see them placed,
// or it is sent elsewhere. The engine's event confirms an entry (it is
// forgotten here and stays in the index as the engine's); an entry still
// unconfirmed when its time runs out is dropped from the index, since the
// engine evidently did not cache it.
//
// Entries expire in the order they were made, and each decision marks its
// chain last block first: a parent is marked at least as late as any child
// (every chain that holds a child holds its parent), so a child always goes
// before its parent and the index stays closed under prefixes.
type speculation struct {
	until map[prefix.Hash]int64 // each speculative block's latest deadline, Unix ns
	queue []specEntry           // deadlines in the order they were set, oldest at head
	head  int
}

type specEntry struct {
	h     prefix.Hash
	until int64
}

func (s *speculation) reset() {
	clear(s.until)
	s.queue, s.head = s.queue[:0], 0
}

// confirm forgets blocks the engine's events now hold.
func (s *speculation) confirm(chain []prefix.Hash) {
	if len(s.until) == 0 {
		return
	}
	for _, h := range chain {
		delete(s.until, h)
	}
}

// Speculate marks the blocks of chain, a prompt just routed to the replica
// at now and recorded in its index, as speculative until now+ttl, except
// those the engine's events already hold. A block marked again gets the
// later deadline. A ttl of at most 0 marks nothing.
func (e *Events) Speculate(chain []prefix.Hash, now time.Time, ttl time.Duration) {
	if ttl <= 0 {
		return
	}
	until := now.Add(ttl).UnixNano()
	s := &e.spec
	for i := len(chain) - 1; i >= 0; i-- {
		h := chain[i]
		if e.held[h] > 0 {
			continue
		}
		s.until[h] = until
		s.queue = append(s.queue, specEntry{h, until})
	}
}

// SpeculateIndex marks every block of x that the engine's events do not hold
// as speculative until now+ttl: what routing decisions put in the index
// while the events were not followed turns speculative when they are again,
// and goes unless the engine confirms it. A ttl of at most 0 marks nothing.
func (e *Events) SpeculateIndex(x *kvindex.Index, now time.Time, ttl time.Duration) {
	if ttl <= 0 {
		return
	}
	until := now.Add(ttl).UnixNano()
	s := &e.spec
	for h := range x.All() { // children before their parents
		if e.held[h] > 0 {
			continue
		}
		s.until[h] = until
		s.queue = append(s.queue, specEntry{h, until})
	}
}

// Expire drops from x the speculative blocks whose deadline is not after
// now, and returns how many it removed. What is pending is bounded by the
// index's capacity: past 8 times it (a decision rate far past what the
// engine confirms, or a clock that went backwards) the oldest entries go
// early.
func (e *Events) Expire(now time.Time, x *kvindex.Index) int {
	s := &e.spec
	t, limit := now.UnixNano(), 8*x.Capacity()+4096
	removed := 0
	for s.head < len(s.queue) && (s.queue[s.head].until <= t || len(s.queue)-s.head > limit) {
		if s.pop(x) {
			removed++
		}
	}
	// Keep the queue's memory to what is pending.
	if s.head == len(s.queue) {
		s.queue, s.head = s.queue[:0], 0
	} else if s.head > 1024 && s.head > len(s.queue)/2 {
		n := copy(s.queue, s.queue[s.head:])
		s.queue, s.head = s.queue[:n], 0
	}
	return removed
}

// pop takes the oldest entry and, unless it was confirmed or marked again
// since, drops its block from x; it reports whether x held it.
func (s *speculation) pop(x *kvindex.Index) bool {
	q := s.queue[s.head]
	s.head++
	if u, ok := s.until[q.h]; !ok || u != q.until {
		return false
	}
	delete(s.until, q.h)
	return x.Remove(q.h)
}

// Settle makes every speculative block permanent: it stays in the index as
// a routing decision put it, as without events. For a replica that stops
// trusting its events and so cannot wait for them to confirm anything.
func (e *Events) Settle() { e.spec.reset() }

// Speculative is how many blocks are speculative now.
func (e *Events) Speculative() int { return len(e.spec.until) }

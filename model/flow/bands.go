package flow

import "time"

// Options shape a Bands.
type Options struct {
	// Max is the most items waiting across every band (at least 1).
	Max int
	// Fair takes the flows of a band in turns, round-robin
	// (round-robin-fairness-policy); otherwise a band is one logical queue
	// across its flows (global-strict-fairness-policy).
	Fair bool
	// EDF orders by the deadline Push is given, earliest first
	// (edf-ordering-policy, and slo-deadline-ordering-policy given
	// SLODeadline); otherwise by arrival (fcfs-ordering-policy). Ties go by
	// arrival.
	EDF bool
	// Evict lets a full Bands make room for an item by evicting the newest
	// item of the lowest band below it whose priority is negative
	// (sheddable).
	Evict bool
}

// Bands holds waiting items of type T in priority bands, as llm-d's flow
// controller does: a higher band is always drained first; within a band
// flows share by the fairness policy; within a flow, items leave by the
// ordering policy. A flow is an item's key within its band. The zero
// Bands is not usable; use NewBands. A Bands is not safe for concurrent
// use.
type Bands[T comparable] struct {
	opt   Options
	n     int
	seq   uint64
	bands []*band[T] // highest priority first; only bands with items
	// head caches the item whose turn it is; nil when it must be found
	// again.
	head *spot[T]
}

type band[T comparable] struct {
	prio  int
	n     int
	lanes []*lane[T] // in turn order
	byKey map[uint64]*lane[T]
	turn  int // the lane whose turn it is (Fair)
}

type lane[T comparable] struct {
	key   uint64
	items []entry[T] // in arrival order
}

type entry[T comparable] struct {
	v   T
	seq uint64
	due time.Time
}

// spot is where an item sits.
type spot[T comparable] struct {
	b    *band[T]
	l, i int // lane and item index
}

// NewBands returns an empty Bands.
func NewBands[T comparable](o Options) *Bands[T] {
	o.Max = max(o.Max, 1)
	return &Bands[T]{opt: o}
}

// SetOptions changes the policies and the bound from now on; items
// already waiting stay, even above a lowered bound.
func (q *Bands[T]) SetOptions(o Options) {
	o.Max = max(o.Max, 1)
	q.opt = o
	q.head = nil
}

// Len is how many items wait.
func (q *Bands[T]) Len() int { return q.n }

// BandLen is how many items wait at priority p.
func (q *Bands[T]) BandLen(p int) int {
	if b := q.band(p); b != nil {
		return b.n
	}
	return 0
}

func (q *Bands[T]) band(p int) *band[T] {
	for _, b := range q.bands {
		if b.prio == p {
			return b
		}
	}
	return nil
}

// Push adds v to the flow key of band p, due by due (for EDF). When the
// Bands is full it evicts, if Options.Evict allows, the newest item of the
// lowest sheddable band below p, and returns it as evicted; ok is false,
// and nothing is added, when it is full and nothing may be evicted.
func (q *Bands[T]) Push(p int, key uint64, v T, due time.Time) (evicted T, didEvict, ok bool) {
	if q.n >= q.opt.Max {
		if !q.opt.Evict {
			return evicted, false, false
		}
		victim := q.victim(p)
		if victim == nil {
			return evicted, false, false
		}
		evicted, didEvict = victim.b.lanes[victim.l].items[victim.i].v, true
		q.removeAt(*victim, false)
	}
	b := q.band(p)
	if b == nil {
		b = &band[T]{prio: p, byKey: map[uint64]*lane[T]{}}
		i := 0
		for i < len(q.bands) && q.bands[i].prio > p {
			i++
		}
		q.bands = append(q.bands, nil)
		copy(q.bands[i+1:], q.bands[i:])
		q.bands[i] = b
	}
	l := b.byKey[key]
	if l == nil {
		l = &lane[T]{key: key}
		b.byKey[key] = l
		// A new flow joins at the end of the round: just before the lane
		// whose turn it is.
		b.lanes = append(b.lanes, nil)
		copy(b.lanes[b.turn+1:], b.lanes[b.turn:])
		b.lanes[b.turn] = l
		if len(b.lanes) > 1 {
			b.turn++
		}
	}
	q.seq++
	l.items = append(l.items, entry[T]{v: v, seq: q.seq, due: due})
	b.n++
	q.n++
	q.head = nil
	return evicted, didEvict, true
}

// victim is the newest item of the lowest band with a negative priority
// below p, or nil.
func (q *Bands[T]) victim(p int) *spot[T] {
	for bi := len(q.bands) - 1; bi >= 0; bi-- {
		b := q.bands[bi]
		if b.prio >= 0 || b.prio >= p {
			return nil
		}
		var best *spot[T]
		var seq uint64
		for li, l := range b.lanes {
			if n := len(l.items); n > 0 && l.items[n-1].seq > seq {
				seq, best = l.items[n-1].seq, &spot[T]{b: b, l: li, i: n - 1}
			}
		}
		if best != nil {
			return best
		}
	}
	return nil
}

// Peek returns the item whose turn it is, without removing it.
func (q *Bands[T]) Peek() (v T, ok bool) {
	s := q.next()
	if s == nil {
		return v, false
	}
	return s.b.lanes[s.l].items[s.i].v, true
}

// Pop removes and returns the item whose turn it is.
func (q *Bands[T]) Pop() (v T, ok bool) {
	s := q.next()
	if s == nil {
		return v, false
	}
	v = s.b.lanes[s.l].items[s.i].v
	q.removeAt(*s, true)
	return v, true
}

// Remove takes v, filed under key in band p, out wherever it waits,
// reporting whether it was there. Removing the item whose turn it is
// passes the turn on, as Pop does, when served: when it leaves to be
// dispatched. An item that leaves otherwise (its wait ended, its client
// left) takes no turn from its flow, as in llm-d, where only a dispatch
// moves the round-robin cursor: a flow whose oldest requests expire while
// at the head would otherwise lose its turns to them (the fairness stress
// scenario saw the light flow take 0.61 of the dispatches).
func (q *Bands[T]) Remove(p int, key uint64, v T, served bool) bool {
	b := q.band(p)
	if b == nil {
		return false
	}
	l := b.byKey[key]
	if l == nil {
		return false
	}
	for li, x := range b.lanes {
		if x != l {
			continue
		}
		for i, e := range l.items {
			if e.v == v {
				q.removeAt(spot[T]{b: b, l: li, i: i}, served)
				return true
			}
		}
	}
	return false
}

// next finds (and caches) the item whose turn it is.
func (q *Bands[T]) next() *spot[T] {
	if q.head != nil {
		return q.head
	}
	if q.n == 0 {
		return nil
	}
	b := q.bands[0]
	var s spot[T]
	if q.opt.Fair {
		s = spot[T]{b: b, l: b.turn, i: q.pick(b.lanes[b.turn])}
	} else {
		first := true
		for li, l := range b.lanes {
			i := q.pick(l)
			if first || q.before(l.items[i], b.lanes[s.l].items[s.i]) {
				s, first = spot[T]{b: b, l: li, i: i}, false
			}
		}
	}
	q.head = &s
	return q.head
}

// pick is the index of the item of l that leaves first.
func (q *Bands[T]) pick(l *lane[T]) int {
	if !q.opt.EDF {
		return 0
	}
	best := 0
	for i := 1; i < len(l.items); i++ {
		if q.before(l.items[i], l.items[best]) {
			best = i
		}
	}
	return best
}

// before reports whether a leaves before b.
func (q *Bands[T]) before(a, b entry[T]) bool {
	if q.opt.EDF && !a.due.Equal(b.due) {
		return a.due.Before(b.due)
	}
	return a.seq < b.seq
}

// removeAt removes the item at s. Serving the item whose turn it is
// passes the band's turn to the next flow.
func (q *Bands[T]) removeAt(s spot[T], served bool) {
	if h := q.next(); served && (h == nil || h.b != s.b || h.l != s.l || h.i != s.i) {
		served = false
	}
	b := s.b
	l := b.lanes[s.l]
	copy(l.items[s.i:], l.items[s.i+1:])
	l.items[len(l.items)-1] = entry[T]{}
	l.items = l.items[:len(l.items)-1]
	b.n--
	q.n--
	q.head = nil
	if len(l.items) == 0 {
		delete(b.byKey, l.key)
		copy(b.lanes[s.l:], b.lanes[s.l+1:])
		b.lanes[len(b.lanes)-1] = nil
		b.lanes = b.lanes[:len(b.lanes)-1]
		if s.l < b.turn {
			b.turn--
		}
		// s.l == turn: the following lane now sits at turn.
	} else if served && s.l == b.turn {
		b.turn++
	}
	if b.turn >= len(b.lanes) {
		b.turn = 0
	}
	if b.n == 0 {
		for i, x := range q.bands {
			if x == b {
				q.bands = append(q.bands[:i], q.bands[i+1:]...)
				break
			}
		}
	}
}

// Names of the fairness and ordering policies, as llm-d's plugin types
// name them.
const (
	FairnessGlobalStrict = "global-strict-fairness-policy"
	FairnessRoundRobin   = "round-robin-fairness-policy"
	OrderingFCFS         = "fcfs-ordering-policy"
	OrderingEDF          = "edf-ordering-policy"
	OrderingSLODeadline  = "slo-deadline-ordering-policy"
)

// Fairness and Orderings list the policy names.
var (
	Fairness  = []string{FairnessGlobalStrict, FairnessRoundRobin}
	Orderings = []string{OrderingFCFS, OrderingEDF, OrderingSLODeadline}
)

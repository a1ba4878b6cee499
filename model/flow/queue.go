package flow

// Queue is a bounded queue of items of type T, each filed under a key. Items
// under one key leave in the order they came. Across keys, when fair, the
// keys take turns: each key with items waiting is served once per round, in
// the order the keys started waiting; when not fair, every item shares one
// lane and the queue is a plain FIFO. The zero Queue is not usable; use New.
// A Queue is not safe for concurrent use.
type Queue[T comparable] struct {
	max  int
	fair bool
	n    int
	// lanes are the keys with items waiting, in turn order; next is the
	// index of the lane whose turn it is.
	lanes []*lane[T]
	byKey map[uint64]*lane[T]
	next  int
}

type lane[T comparable] struct {
	key   uint64
	items []T
}

// New returns an empty queue that holds at most limit items (at least 1).
func New[T comparable](limit int, fair bool) *Queue[T] {
	return &Queue[T]{max: max(limit, 1), fair: fair, byKey: make(map[uint64]*lane[T])}
}

// Len is how many items wait.
func (q *Queue[T]) Len() int { return q.n }

// Push adds v under key at the back of its lane. It reports false, adding
// nothing, when the queue is full.
func (q *Queue[T]) Push(key uint64, v T) bool {
	if q.n >= q.max {
		return false
	}
	if !q.fair {
		key = 0
	}
	l, ok := q.byKey[key]
	if !ok {
		l = &lane[T]{key: key}
		q.byKey[key] = l
		// A new key joins at the end of the round: the lane before next
		// takes its turn last.
		q.lanes = append(q.lanes, nil)
		copy(q.lanes[q.next+1:], q.lanes[q.next:])
		q.lanes[q.next] = l
		q.next++
		if q.next == len(q.lanes) {
			q.next = 0
		}
	}
	l.items = append(l.items, v)
	q.n++
	return true
}

// Peek returns the item whose turn it is, without removing it.
func (q *Queue[T]) Peek() (v T, ok bool) {
	if q.n == 0 {
		return v, false
	}
	return q.lanes[q.next].items[0], true
}

// Pop removes and returns the item whose turn it is; its key's next item
// waits for the key's next turn.
func (q *Queue[T]) Pop() (v T, ok bool) {
	v, ok = q.Peek()
	if ok {
		q.removeAt(q.next, 0)
	}
	return v, ok
}

// Remove takes v, filed under key, out of the queue wherever it waits. It
// reports whether v was there. Removing the item whose turn it is counts as
// serving it, as Pop does.
func (q *Queue[T]) Remove(key uint64, v T) bool {
	if !q.fair {
		key = 0
	}
	l, ok := q.byKey[key]
	if !ok {
		return false
	}
	for i, x := range l.items {
		if x == v {
			for li, y := range q.lanes {
				if y == l {
					q.removeAt(li, i)
					return true
				}
			}
		}
	}
	return false
}

// removeAt removes item i of lane li. Taking the head of the lane whose turn
// it is passes the turn to the next lane.
func (q *Queue[T]) removeAt(li, i int) {
	l := q.lanes[li]
	var zero T
	copy(l.items[i:], l.items[i+1:])
	l.items[len(l.items)-1] = zero
	l.items = l.items[:len(l.items)-1]
	q.n--
	served := li == q.next && i == 0
	if len(l.items) == 0 {
		delete(q.byKey, l.key)
		copy(q.lanes[li:], q.lanes[li+1:])
		q.lanes[len(q.lanes)-1] = nil
		q.lanes = q.lanes[:len(q.lanes)-1]
		if li < q.next {
			q.next--
		}
		// li == next: the following lane now sits at next.
	} else if served {
		q.next++
	}
	if q.next >= len(q.lanes) {
		q.next = 0
	}
}

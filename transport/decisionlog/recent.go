package decisionlog

import (
	"sync"
	"sync/atomic"
	"time"
)

// RecentLen is how many of the last sampled decisions a Writer keeps in
// memory for GET /admin/decisions (the fleet page): those sampled for the
// file, or with no file, one request per recentEvery.
const RecentLen = 32

// recentEvery is how often a memory-only Writer samples a request: one
// request in each such interval has its decision explained and kept, so
// that the fleet page shows recent decisions while the decision log is
// off, at a cost of one explanation every quarter second.
const recentEvery = 250 * time.Millisecond

// recent is a ring of the last RecentLen records. Its methods are safe for
// concurrent use.
type recent struct {
	mu   sync.Mutex // guards ring and next
	ring [RecentLen]*Record
	next int
	last atomic.Int64 // unix nanoseconds of the last memory-only sample
}

// due reports whether a request at now is sampled for the memory: at most
// once per recentEvery, whoever asks first.
func (r *recent) due(now time.Time) bool {
	last := r.last.Load()
	return now.UnixNano()-last >= int64(recentEvery) && r.last.CompareAndSwap(last, now.UnixNano())
}

func (r *recent) add(rec *Record) {
	r.mu.Lock()
	r.ring[r.next] = rec
	r.next = (r.next + 1) % RecentLen
	r.mu.Unlock()
}

// list returns the records kept, newest first.
func (r *recent) list() []Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Record, 0, RecentLen)
	for i := range RecentLen {
		if rec := r.ring[(r.next-1-i+2*RecentLen)%RecentLen]; rec != nil {
			out = append(out, *rec)
		}
	}
	return out
}

// Memory returns a Writer without a file: it keeps the last RecentLen
// sampled decisions for Recent only, sampling one request per quarter
// second. The gateway runs one when observability.decision_log is off.
func Memory() *Writer { return &Writer{} }

// Recent returns the last sampled decisions, newest first; none from a nil
// Writer. A record's Decision is shared with the log: do not change it.
func (w *Writer) Recent() []Record {
	if w == nil {
		return nil
	}
	return w.recent.list()
}

package engine

import "github.com/inferrail/inferrail/model/prefix"

// status is where a request is in the scheduler (vLLM's RequestStatus, with
// PREEMPTED folded into waiting: a preempted request waits at the front).
type status uint8

const (
	waiting status = iota
	running
	done
)

// seq is the engine's state of one request (vLLM's Request plus the KV cache
// manager's per-request bookkeeping).
type seq struct {
	r      *Request
	status status

	// computed is num_computed_tokens: tokens whose KV is computed (or
	// scheduled to be, during planning).
	computed int
	// start is computed right after the latest admission: the cache hit the
	// request resumed from. The chunk starting there pays the fixed prefill cost.
	start int

	blocks    []int32       // block table, in chain order (req_to_blocks)
	numCached int           // leading blocks that are cached (num_cached_block)
	hashes    []prefix.Hash // chain hashes of full blocks, computed lazily

	admitted bool // first admission done
	order    int  // rank of first admission, for tests (FCFS)
	aborted  bool
}

// numTokens is request.num_tokens: the prompt plus the tokens generated so far.
func (s *seq) numTokens() int { return len(s.r.Prompt) + s.r.Generated }

// appendTokens appends tokens [from, to) of prompt+output to dst.
func (s *seq) appendTokens(dst []uint32, from, to int) []uint32 {
	p := len(s.r.Prompt)
	if from < p {
		dst = append(dst, s.r.Prompt[from:min(to, p)]...)
	}
	if to > p {
		dst = append(dst, s.r.Output[max(from, p)-p:to-p]...)
	}
	return dst
}

// deque is the waiting queue: FCFS with preempted requests pushed back at the
// front (vLLM's RequestQueue for the FCFS policy). A ring buffer.
type deque struct {
	buf  []*seq
	head int
	n    int
}

func (q *deque) len() int { return q.n }

func (q *deque) at(i int) *seq { return q.buf[(q.head+i)%len(q.buf)] }

func (q *deque) grow() {
	if q.n < len(q.buf) {
		return
	}
	nb := make([]*seq, max(8, 2*len(q.buf)))
	for i := range q.n {
		nb[i] = q.at(i)
	}
	q.buf, q.head = nb, 0
}

func (q *deque) pushBack(s *seq) {
	q.grow()
	q.buf[(q.head+q.n)%len(q.buf)] = s
	q.n++
}

func (q *deque) pushFront(s *seq) {
	q.grow()
	q.head = (q.head - 1 + len(q.buf)) % len(q.buf)
	q.buf[q.head] = s
	q.n++
}

func (q *deque) popFront() *seq {
	s := q.buf[q.head]
	q.buf[q.head] = nil
	q.head = (q.head + 1) % len(q.buf)
	q.n--
	return s
}

// remove deletes s, keeping the others in order. O(n): aborts are rare.
func (q *deque) remove(s *seq) bool {
	for i := range q.n {
		if q.at(i) != s {
			continue
		}
		for j := i; j < q.n-1; j++ {
			q.buf[(q.head+j)%len(q.buf)] = q.at(j + 1)
		}
		q.buf[(q.head+q.n-1)%len(q.buf)] = nil
		q.n--
		return true
	}
	return false
}

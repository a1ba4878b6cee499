// Package mailbox is the protoactor mailbox of the routing and replica
// actors. It handles messages as protoactor's default mailbox does, one at
// a time and in the order posted, system messages first, with one
// exception: a message marked Inline that finds the mailbox idle, with
// nothing queued before it, is handled in the goroutine that posts it,
// instead of one the dispatcher starts.
//
// Why: protoactor's default dispatcher starts a goroutine each time an idle
// mailbox gets a message. A cost_model decision for 8 replicas woke 10 such
// goroutines (the Pick, 8 estimate requests, the Gathered), each with a
// fresh stack to grow, and spent 15-30x the decision's own time on that
// (issue 16; fleet's BenchmarkCostModelActor reports goroutines/op). The
// messages marked Inline are the decision's own, waited for by their
// sender anyway, and the bookkeeping a request sends its replica (Assign,
// FirstByte, RequestDone), which otherwise woke a goroutine per request:
// all short and never blocking.
//
// The package starts no goroutines of its own; the actor system's
// dispatcher starts those that run the mailbox when the poster does not.
package mailbox

import (
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"
)

// Inline marks a message that its poster may handle itself. Its handler
// must be short, must never block and must not wait for another actor:
// it runs on the goroutine of whoever sends it (a request's, or another
// actor's while that one handles a message).
type Inline interface {
	Inline()
}

// inlineBudget is how many messages one poster handles at most before it
// hands the rest to the dispatcher: its own and the ones its own caused
// (a Pick's Gathered), and a few of a burst, without holding a request's
// goroutine for the whole burst.
const inlineBudget = 4

const (
	idle int32 = iota
	running
)

// mailbox is an actor.Mailbox. The goroutine that sets status from idle to
// running owns the handling of messages until it sets it back; it alone
// calls the invoker.
type mailbox struct {
	status atomic.Int32

	mu        sync.Mutex
	user, sys ring // guarded by mu
	suspended bool // guarded by mu

	invoker    actor.MessageInvoker
	dispatcher actor.Dispatcher
}

var _ actor.Mailbox = (*mailbox)(nil)

// New returns a mailbox, for actor.WithMailbox.
func New() actor.Mailbox { return &mailbox{} }

// PostUserMessage queues m and has it handled. Message batches and mailbox
// middlewares, which these actors do not use, are not supported.
func (b *mailbox) PostUserMessage(m any) {
	b.mu.Lock()
	b.user.push(m)
	b.mu.Unlock()
	if !b.status.CompareAndSwap(idle, running) {
		return // the owner handles it
	}
	if isInline(m) && b.runInline() {
		return
	}
	b.dispatcher.Schedule(b.process)
}

// PostSystemMessage queues m and has it handled, never inline.
func (b *mailbox) PostSystemMessage(m any) {
	b.mu.Lock()
	b.sys.push(m)
	b.mu.Unlock()
	if b.status.CompareAndSwap(idle, running) {
		b.dispatcher.Schedule(b.process)
	}
}

// RegisterHandlers sets who handles the messages and who runs the mailbox.
func (b *mailbox) RegisterHandlers(invoker actor.MessageInvoker, dispatcher actor.Dispatcher) {
	b.invoker, b.dispatcher = invoker, dispatcher
}

// Start is called once the actor is spawned; there is nothing to start.
func (b *mailbox) Start() {}

// UserMessageCount is how many user messages are queued.
func (b *mailbox) UserMessageCount() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.user.n
}

func isInline(m any) bool {
	if e, ok := m.(*actor.MessageEnvelope); ok {
		m = e.Message
	}
	_, ok := m.(Inline)
	return ok
}

// runInline handles, in the caller's goroutine (the owner), the Inline
// messages at the head of the queue, at most inlineBudget of them. It
// reports true when it left the mailbox idle, and false when messages are
// left that the caller must schedule (it still owns the mailbox).
func (b *mailbox) runInline() bool {
	for n := 0; ; n++ {
		b.mu.Lock()
		if b.sys.n > 0 || b.suspended || b.user.n == 0 || n == inlineBudget || !isInline(b.user.peek()) {
			empty := b.sys.n == 0 && (b.user.n == 0 || b.suspended)
			if empty {
				// Under mu: a poster that queues after this sees idle
				// and takes the mailbox over.
				b.status.Store(idle)
			}
			b.mu.Unlock()
			return empty
		}
		m := b.user.pop()
		b.mu.Unlock()
		b.invokeUser(m)
	}
}

// invokeUser handles one user message; a panic goes to the supervisor, as
// in protoactor's mailbox (the actor then suspends its mailbox).
func (b *mailbox) invokeUser(m any) {
	defer func() {
		if r := recover(); r != nil {
			b.invoker.EscalateFailure(r, m)
		}
	}()
	b.invoker.InvokeUserMessage(m)
}

func (b *mailbox) invokeSystem(m any) {
	defer func() {
		if r := recover(); r != nil {
			b.invoker.EscalateFailure(r, m)
		}
	}()
	b.invoker.InvokeSystemMessage(m)
}

// process runs the mailbox in a dispatcher's goroutine until nothing is
// left to handle, yielding every dispatcher.Throughput() messages.
func (b *mailbox) process() {
	t := b.dispatcher.Throughput()
	for i := 0; ; i++ {
		if t > 0 && i >= t {
			i = 0
			runtime.Gosched()
		}
		b.mu.Lock()
		var m any
		sys := b.sys.n > 0
		switch {
		case sys:
			m = b.sys.pop()
			switch m.(type) {
			case *actor.SuspendMailbox:
				b.suspended = true
				b.mu.Unlock()
				continue
			case *actor.ResumeMailbox:
				b.suspended = false
				b.mu.Unlock()
				continue
			}
		case !b.suspended && b.user.n > 0:
			m = b.user.pop()
		default:
			b.status.Store(idle) // under mu, as in runInline
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()
		if sys {
			b.invokeSystem(m)
		} else {
			b.invokeUser(m)
		}
	}
}

// ring is a FIFO queue of messages.
type ring struct {
	buf     []any
	head, n int
}

func (r *ring) push(m any) {
	if r.n == len(r.buf) {
		buf := make([]any, max(8, 2*len(r.buf)))
		for i := range r.n {
			buf[i] = r.buf[(r.head+i)%len(r.buf)]
		}
		r.buf, r.head = buf, 0
	}
	r.buf[(r.head+r.n)%len(r.buf)] = m
	r.n++
}

func (r *ring) peek() any { return r.buf[r.head] }

func (r *ring) pop() any {
	m := r.buf[r.head]
	r.buf[r.head] = nil
	r.head = (r.head + 1) % len(r.buf)
	r.n--
	return m
}

package frontend

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/inferrail/inferrail/transport/upstream"
)

// attemptCtx is an attempt's context: cancelled with a cause by the
// request's watch (the client left, the replica failed its health checks,
// the gateway's shutdown cut it) or the relay, and with errTimeout at the
// request's deadline. It replaces context.WithCancelCause under
// WithDeadlineCause, which cost ten allocations an attempt, and the four
// more of the upstream pool's context.AfterFunc on it (issue 16's profile):
// an attemptCtx costs one stop function per AfterFunc, its deadline timer
// is pooled, and the first attempt's lives in its request.
//
// Err keeps the context contract (context.Canceled, or
// context.DeadlineExceeded at the deadline); Cause is the cause, which
// context.Cause cannot see in a Context of another package's type.
// OnCancel and ClearCancel (upstream.CancelHook) hold the upstream pool's
// close of the attempt's connection; AfterFunc is the method the context
// package registers a child context's cancellation with, without a
// goroutine. Its methods are safe for concurrent use.
type attemptCtx struct {
	deadline time.Time
	timer    *deadlineTimer

	mu     sync.Mutex
	done   chan struct{} // made by the first Done; closed on cancel
	err    error
	cause  error
	hook   func()       // OnCancel's
	afters []afterFunc  // registered and neither run nor stopped
	buf    [2]afterFunc // afters' first home (a dial's child context registers one)
	nextID uint64
}

type afterFunc struct {
	id uint64
	f  func()
}

var (
	_ context.Context     = (*attemptCtx)(nil)
	_ upstream.CancelHook = (*attemptCtx)(nil)
)

// closedChan is the Done of an attempt cancelled before anyone asked.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// start arms a's deadline; a must be zero.
func (a *attemptCtx) start(deadline time.Time) {
	a.deadline = deadline
	t := getDeadlineTimer()
	t.mu.Lock()
	t.a = a
	t.mu.Unlock()
	a.mu.Lock() // the timer may fire before start returns
	a.timer = t
	a.mu.Unlock()
	t.t.Reset(time.Until(deadline))
}

// deadlineTimer cancels an attempt at its deadline. They are pooled: a
// timer of its own cost an attempt two allocations. A timer that fired
// late, for an attempt that has ended, finds its next attempt's deadline
// still ahead and does nothing.
type deadlineTimer struct {
	t  *time.Timer
	mu sync.Mutex
	a  *attemptCtx // nil while pooled
}

var deadlineTimers sync.Pool

func getDeadlineTimer() *deadlineTimer {
	if t, ok := deadlineTimers.Get().(*deadlineTimer); ok {
		return t
	}
	t := new(deadlineTimer)
	t.t = time.AfterFunc(time.Hour, t.fire)
	t.t.Stop()
	return t
}

func (t *deadlineTimer) fire() {
	t.mu.Lock()
	a := t.a
	t.mu.Unlock()
	if a != nil && !time.Now().Before(a.deadline) {
		a.cancel(errTimeout)
	}
}

// release stops t and pools it.
func (t *deadlineTimer) release() {
	t.t.Stop()
	t.mu.Lock()
	t.a = nil
	t.mu.Unlock()
	deadlineTimers.Put(t)
}

func (a *attemptCtx) Deadline() (time.Time, bool) { return a.deadline, true }

func (a *attemptCtx) Done() <-chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.done == nil {
		if a.err != nil {
			a.done = closedChan
		} else {
			a.done = make(chan struct{})
		}
	}
	return a.done
}

func (a *attemptCtx) Err() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.err
}

// Cause is why a was cancelled: the cause given to cancel, or
// context.Canceled for a nil one; nil while a runs.
func (a *attemptCtx) Cause() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.cause
}

func (a *attemptCtx) Value(any) any { return nil }

// AfterFunc runs f in its own goroutine once a is cancelled (at once if it
// is), as context.AfterFunc does; stop unregisters f, and reports whether
// it did so before f was started.
func (a *attemptCtx) AfterFunc(f func()) (stop func() bool) {
	a.mu.Lock()
	if a.err != nil {
		a.mu.Unlock()
		go f()
		return func() bool { return false }
	}
	a.nextID++
	id := a.nextID
	if a.afters == nil {
		a.afters = a.buf[:0]
	}
	a.afters = append(a.afters, afterFunc{id: id, f: f})
	a.mu.Unlock()
	return func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		for i, af := range a.afters {
			if af.id == id {
				a.afters = slices.Delete(a.afters, i, i+1)
				return true
			}
		}
		return false
	}
}

// OnCancel is upstream.CancelHook's: it runs f once a is cancelled.
func (a *attemptCtx) OnCancel(f func()) {
	a.mu.Lock()
	if a.err != nil {
		a.mu.Unlock()
		go f()
		return
	}
	a.hook = f
	a.mu.Unlock()
}

// ClearCancel is upstream.CancelHook's.
func (a *attemptCtx) ClearCancel() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	had := a.hook != nil
	a.hook = nil
	return had
}

// cancel ends a with cause (context.Canceled when nil); errTimeout is
// a deadline, context.DeadlineExceeded. Only the first call counts.
func (a *attemptCtx) cancel(cause error) {
	err := context.Canceled
	if cause == errTimeout {
		err = context.DeadlineExceeded
	}
	if cause == nil {
		cause = err
	}
	a.mu.Lock()
	if a.err != nil {
		a.mu.Unlock()
		return
	}
	a.err, a.cause = err, cause
	if a.done != nil {
		close(a.done)
	} else {
		a.done = closedChan
	}
	if a.hook != nil {
		go a.hook()
		a.hook = nil
	}
	for _, af := range a.afters {
		go af.f()
	}
	clear(a.afters)
	a.afters = nil
	timer := a.timer
	a.timer = nil
	a.mu.Unlock()
	if timer != nil {
		timer.release()
	}
}

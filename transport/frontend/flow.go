package frontend

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/inferrail/inferrail/actors/fleet"
	"github.com/inferrail/inferrail/config"
	"github.com/inferrail/inferrail/model/flow"
	"github.com/inferrail/inferrail/model/route"
	"github.com/inferrail/inferrail/transport/telemetry"
)

// flowPoll is how often the request at the head of a model's queue tries
// again without being woken. Most slots free through this gateway's own
// Done and FirstByte, which wake the head at once; the poll catches the
// rest (a replica turning healthy, a reload raising a cap, a lease the
// fleet released itself). Only the head polls, so it costs one timer and
// at most one Pick per flowPoll per model with a queue.
const flowPoll = 50 * time.Millisecond

// Why a queued request was not admitted.
var (
	ErrFlowFull    = errors.New("flow control: the model's queue is full")
	ErrFlowTimeout = errors.New("flow control: flow_control.max_wait passed")
)

// Gate holds requests back while every replica of their model is full
// (flow_control): the gateway's admission, which the endpoint picker
// (transport/extproc) shares. Nil when flow control is off; a nil Gate's
// methods are safe to call. Safe for concurrent use.
type Gate struct {
	maxWait time.Duration
	models  map[string]*flowQueue // by configured model name; fixed at New
}

// flowQueue is one model's queue. Only the request at its head picks;
// the others wait to be woken when it leaves.
type flowQueue struct {
	met *telemetry.Flow
	// n is q.Len(), read without mu by wake.
	n  atomic.Int64
	mu sync.Mutex
	q  *flow.Queue[*waiter] // under mu
}

type waiter struct {
	key  uint64
	wake chan struct{} // capacity 1: wake-ups coalesce
}

// NewGate returns the admission gate of c's flow_control section, nil
// when it is off. met counts its queues.
func NewGate(c *config.Config, met *telemetry.Registry) *Gate {
	fc := c.FlowControl
	if !fc.Enabled {
		return nil
	}
	g := &Gate{maxWait: fc.MaxWait, models: make(map[string]*flowQueue, len(c.Models))}
	for _, m := range c.Models {
		g.models[m.Name] = &flowQueue{met: met.Flow(m.Name), q: flow.New[*waiter](fc.MaxQueued, fc.Fair)}
	}
	return g
}

// Wake tells the head of model's queue that a slot may have freed: call
// it after fleet.Done and fleet.FirstByte.
func (g *Gate) Wake(model string) {
	if g == nil {
		return
	}
	fq := g.models[model]
	if fq == nil || fq.n.Load() == 0 {
		return
	}
	fq.mu.Lock()
	fq.wakeHead()
	fq.mu.Unlock()
}

// wakeHead wakes the head, if any. Call with mu held.
func (fq *flowQueue) wakeHead() {
	if h, ok := fq.q.Peek(); ok {
		select {
		case h.wake <- struct{}{}:
		default:
		}
	}
}

func (fq *flowQueue) head(w *waiter) bool {
	fq.mu.Lock()
	defer fq.mu.Unlock()
	h, ok := fq.q.Peek()
	return ok && h == w
}

// admit queues r, which found every replica full, until a pick succeeds
// (Gate.Admit); the client leaving ends the wait with errClientGone.
func (s *Server) admit(r *request, tried []string, attempt int) (fleet.Decision, error) {
	// The watch cancels ctx when the client leaves; the next attempt's
	// arm replaces it.
	ctx, cancel := context.WithCancelCause(s.base)
	defer cancel(nil)
	r.w.arm("", cancel)
	return s.gate.Admit(ctx, r.model, r.policy.SessionKey, r.deadline, func() (fleet.Decision, error) {
		return s.pick(r, tried, attempt)
	})
}

// Admit queues a request for model with conversation key, which found
// every replica full, until pick (asked again whenever the request heads
// the queue and may find room) succeeds or fails for another reason,
// flow_control.max_wait or deadline passes (ErrFlowTimeout), or ctx ends
// (its cause). A full queue fails at once with ErrFlowFull. A model the
// gate does not know fails with route.ErrOverloaded.
func (g *Gate) Admit(ctx context.Context, model string, key uint64, deadline time.Time, pick func() (fleet.Decision, error)) (fleet.Decision, error) {
	if g == nil {
		return fleet.Decision{}, route.ErrOverloaded
	}
	fq := g.models[model]
	if fq == nil {
		return fleet.Decision{}, route.ErrOverloaded
	}
	w := &waiter{key: key, wake: make(chan struct{}, 1)}
	fq.mu.Lock()
	ok := fq.q.Push(w.key, w)
	if ok {
		fq.n.Add(1)
	}
	fq.mu.Unlock()
	if !ok {
		fq.met.Full.Inc()
		return fleet.Decision{}, ErrFlowFull
	}
	fq.met.Queued.Inc()
	start := time.Now()
	defer func() {
		fq.mu.Lock()
		fq.q.Remove(w.key, w)
		fq.n.Add(-1)
		// The turn passes on, with any wake-up this waiter took.
		fq.wakeHead()
		fq.mu.Unlock()
		fq.met.Queued.Dec()
		fq.met.Wait.Update(time.Since(start).Seconds())
	}()

	limit := time.NewTimer(min(g.maxWait, time.Until(deadline)))
	defer limit.Stop()
	poll := time.NewTimer(flowPoll)
	defer poll.Stop()
	for {
		var pollC <-chan time.Time
		if fq.head(w) {
			d, err := pick()
			if !errors.Is(err, route.ErrOverloaded) {
				return d, err
			}
			poll.Reset(flowPoll)
			pollC = poll.C
		}
		select {
		case <-w.wake:
		case <-pollC:
		case <-limit.C:
			fq.met.TimedOut.Inc()
			return fleet.Decision{}, ErrFlowTimeout
		case <-ctx.Done():
			return fleet.Decision{}, context.Cause(ctx)
		}
	}
}

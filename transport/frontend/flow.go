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
	errFlowFull    = errors.New("flow control: the model's queue is full")
	errFlowTimeout = errors.New("flow control: flow_control.max_wait passed")
)

// gate holds requests back while every replica of their model is full
// (flow_control). Nil when flow control is off.
type gate struct {
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

func newGate(c *config.Config, met *telemetry.Registry) *gate {
	fc := c.FlowControl
	if !fc.Enabled {
		return nil
	}
	g := &gate{maxWait: fc.MaxWait, models: make(map[string]*flowQueue, len(c.Models))}
	for _, m := range c.Models {
		g.models[m.Name] = &flowQueue{met: met.Flow(m.Name), q: flow.New[*waiter](fc.MaxQueued, fc.Fair)}
	}
	return g
}

// wake tells the head of model's queue that a slot may have freed.
func (g *gate) wake(model string) {
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
// or fails for another reason, flow_control.max_wait or the request's
// deadline passes (errFlowTimeout), the client leaves (errClientGone) or
// the gateway shuts down (errShutdown). A full queue fails at once with
// errFlowFull.
func (s *Server) admit(r *request, tried []string, attempt int) (fleet.Decision, error) {
	fq := s.gate.models[r.model]
	if fq == nil {
		return fleet.Decision{}, route.ErrOverloaded
	}
	w := &waiter{key: r.policy.SessionKey, wake: make(chan struct{}, 1)}
	fq.mu.Lock()
	ok := fq.q.Push(w.key, w)
	if ok {
		fq.n.Add(1)
	}
	fq.mu.Unlock()
	if !ok {
		fq.met.Full.Inc()
		return fleet.Decision{}, errFlowFull
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

	// The watch cancels ctx when the client leaves; the next attempt's
	// arm replaces it.
	ctx, cancel := context.WithCancelCause(s.base)
	defer cancel(nil)
	r.w.arm("", cancel)
	limit := time.NewTimer(min(s.gate.maxWait, time.Until(r.deadline)))
	defer limit.Stop()
	poll := time.NewTimer(flowPoll)
	defer poll.Stop()
	for {
		var pollC <-chan time.Time
		if fq.head(w) {
			d, err := s.pick(r, tried, attempt)
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
			return fleet.Decision{}, errFlowTimeout
		case <-ctx.Done():
			return fleet.Decision{}, context.Cause(ctx)
		}
	}
}

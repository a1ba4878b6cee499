package routing

import (
	"slices"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/inferrail/inferrail/actors/replica"
	"github.com/inferrail/inferrail/model/estimate"
	"github.com/inferrail/inferrail/model/policy"
	"github.com/inferrail/inferrail/model/route"
)

// The estimate gather, from the asker to the replica actors and back: the
// asker sends a Pick and waits (Decide); the routing actor collects the
// candidates, sends each replica actor it asks a replica.Estimate naming
// the Gather of that decision and parks the decision; each replica actor
// fills its own slot; the last one, or the asker once the estimate
// deadline has passed, sends the actor Gathered, and the actor decides
// with the replies in and prices the rest from their published state.

// Gather collects the replies of one estimate broadcast. The routing actor
// makes one per decision and reads a slot only once Reply reports it
// filled; each replica actor fills its own slot at most once. Safe for
// concurrent use in that pattern.
type Gather struct {
	query estimate.Query
	slots []slot
	left  atomic.Int32
	// done, when not nil, is called once by the replica that fills the
	// last slot. It must not block.
	done func()
}

var _ replica.Gather = (*Gather)(nil)

// slot is one reply of a Gather: written once, before got is set.
type slot struct {
	reply route.Reply
	got   atomic.Bool
}

// NewGather returns a gather for n replies to q, which calls done (when not
// nil) once the last one is in.
func NewGather(q estimate.Query, n int, done func()) *Gather {
	g := &Gather{query: q, slots: make([]slot, n), done: done}
	g.left.Store(int32(n))
	return g
}

// Query is what the broadcast asks (replica.Gather).
func (g *Gather) Query() *estimate.Query { return &g.query }

// Reply returns slot i's reply and whether it has arrived.
func (g *Gather) Reply(i int) (route.Reply, bool) {
	if !g.slots[i].got.Load() {
		return route.Reply{}, false
	}
	return g.slots[i].reply, true
}

// Fill sets slot i's reply, once (replica.Gather); replica actors call it,
// and tests that stand in for them.
func (g *Gather) Fill(i int, r route.Reply) {
	if i < 0 || i >= len(g.slots) || g.slots[i].got.Load() {
		return
	}
	g.slots[i].reply = r
	g.slots[i].got.Store(true)
	if g.left.Add(-1) == 0 && g.done != nil {
		g.done()
	}
}

// Decide sends m to the routing actor at pid and waits for its answer, until
// m.Deadline at the latest. When gather is set (the actor broadcasts
// estimate requests for m: its policy routes on them and the prompt has
// blocks), it tells the actor to decide once the last estimate is in
// (m.Gathers), or once estimateDeadline (routing.estimate_deadline) has
// passed with the replies it has. It returns the answer, which the caller
// owns with its lease, or nil when m.Deadline passed first: the actor then
// releases whatever it takes. It sets m.Answered and m.Gathers; no
// protoactor future is registered, and one timer serves both deadlines,
// armed only when the actor did not answer in this goroutine
// (mailbox.Inline).
func Decide(root actor.SenderContext, pid *actor.PID, m *Pick, gather bool, estimateDeadline time.Duration) *Picked {
	start := time.Now()
	wait := m.Deadline.Sub(start)
	if wait <= 0 {
		return nil
	}
	m.Answered, m.Gathers = make(chan struct{}, 1), gather
	root.Send(pid, m)
	var timer *time.Timer
	for {
		select {
		case <-m.Answered:
		default:
			if timer == nil {
				first := wait
				if gather {
					first = min(max(estimateDeadline, time.Microsecond), wait)
				}
				timer = time.NewTimer(time.Until(start.Add(first)))
				defer timer.Stop()
			}
			select {
			case <-m.Answered:
			case <-timer.C:
				if gather {
					gather = false
					root.Send(pid, m.gathered())
					if rest := time.Until(m.Deadline); rest > 0 {
						timer.Reset(rest)
						continue
					}
				}
				if m.Abandon() {
					return nil // the actor will release what it takes
				}
				return m.Answer() // answered just as the deadline passed
			}
		}
		if p := m.Answer(); p != nil {
			return p
		}
		// The gather's signal: every estimate is in.
		if gather {
			gather = false
			root.Send(pid, m.gathered())
			if timer != nil {
				timer.Reset(time.Until(m.Deadline))
			}
		}
	}
}

// Explaining sends m to the routing actor at pid and waits for its
// explanation until m.Deadline. As Decide does, it tells the actor to
// explain with the estimates it has once estimateDeadline has passed. It
// returns nil when m.Deadline passed first.
func Explaining(root actor.SenderContext, pid *actor.PID, m *Explain, estimateDeadline time.Duration) *Explanation {
	m.Answered = make(chan *Explanation, 1)
	root.Send(pid, m)
	wait := time.Until(m.Deadline)
	first := min(max(estimateDeadline, time.Microsecond), wait)
	timer := time.NewTimer(first)
	defer timer.Stop()
	for gather := true; ; gather = false {
		select {
		case ex := <-m.Answered:
			return ex
		case <-timer.C:
			if rest := time.Until(m.Deadline); gather && rest > 0 {
				root.Send(pid, &Gathered{Explain: m})
				timer.Reset(rest)
				continue
			}
			return nil
		}
	}
}

// parkKey names a parked question: its Pick, or its Explain. It is a
// struct of pointers rather than the Message interface, so that the map
// never inspects a key's dynamic type (runtime.mapKeyError was 3-4% of
// BenchmarkCostModelActor's CPU at 256 replicas).
type parkKey struct {
	pick    *Pick
	explain *Explain
}

// pending is a Pick or an Explain waiting for its estimates. Only the actor
// touches it.
type pending struct {
	cands   []policy.Candidate
	snaps   []*replica.Snapshot // by replica, as cands[i].Replica indexes them
	gather  *Gather
	offered int
	explain *Explain // set for an explanation rather than a decision
	// ask holds the positions in cands of the candidates asked (all, or a
	// shortlist), in gather slot order; slot maps each candidate to its
	// slot in gather, -1 for one not asked.
	ask  []int
	slot []int32
}

// reply returns candidate i's estimate reply and whether it arrived.
func (pd *pending) reply(i int) (route.Reply, bool) {
	if pd.gather == nil || pd.slot[i] < 0 {
		return route.Reply{}, false
	}
	return pd.gather.Reply(int(pd.slot[i]))
}

// maxSpare is how many decided pending records an actor keeps for reuse:
// one per decision parked at the same time, as many as a burst has.
const maxSpare = 8

// takePending returns a pending record to fill, a reused one if any: a
// decision then copies its candidates without allocating.
func (st *state) takePending() *pending {
	if n := len(st.spare); n > 0 {
		pd := st.spare[n-1]
		st.spare = st.spare[:n-1]
		return pd
	}
	return &pending{}
}

// putPending keeps pd, decided and answered, for reuse. Nothing else may
// hold it or its slices: the Picked it answered copies what it keeps.
func (st *state) putPending(pd *pending) {
	if len(st.spare) >= maxSpare {
		return
	}
	clear(pd.snaps) // let the snapshots go
	pd.snaps, pd.cands, pd.ask = pd.snaps[:0], pd.cands[:0], pd.ask[:0]
	pd.gather, pd.explain, pd.offered = nil, nil, 0
	st.spare = append(st.spare, pd)
}

// broadcast collects m's candidates, sends the estimate query to their
// replica actors and parks m until the replies are in. It reports false
// when there is nothing to ask (no candidate), and the caller decides at
// once.
func (a *routingActor) broadcast(ctx actor.Context, m *Pick) bool {
	now := a.st.Now()
	offered := a.collect(m.Exclude, now)
	return a.park(ctx, m, &m.Request, offered, nil, now)
}

// park copies the collected candidates into a pending record for key (the
// Pick, or the Explain ex) and broadcasts the query for req.
func (a *routingActor) park(ctx actor.Context, key Message, req *policy.Request, offered int, ex *Explain, now time.Time) bool {
	n := len(a.cands)
	if n == 0 {
		clear(a.snaps)
		return false
	}
	pd := a.st.takePending()
	pd.cands = append(pd.cands[:0], a.cands...)
	pd.snaps = append(pd.snaps[:0], a.snaps...)
	pd.offered, pd.explain = offered, ex
	clear(a.snaps)
	root, self := ctx.ActorSystem().Root, ctx.Self()
	var pick *Pick
	if ex == nil {
		pick = key.(*Pick)
	}
	pk := parkKey{pick, ex}
	q := estimate.Query{Blocks: req.Blocks, PromptTokens: req.PromptTokens, BlockSize: route.BlockSize(req)}
	var signal func()
	if pick != nil && pick.Gathers && pick.Answered != nil {
		signal = func() {
			select {
			case pick.Answered <- struct{}{}:
			default: // answered already (the asker's deadline came first)
			}
		}
	} else {
		done := &Gathered{Pick: pick, Explain: ex}
		signal = func() { root.Send(self, done) }
	}
	a.ask(pd, req, now)
	pd.gather = NewGather(q, len(pd.ask), signal)
	a.st.parked[pk] = pd
	a.st.m.decisions.Inc()
	asked := 0
	reqs := make([]replica.Estimate, len(pd.ask)) // one allocation for the broadcast
	for slot, i := range pd.ask {
		e, ok := a.st.replicas[pd.cands[i].Replica].(Estimator)
		if !ok || e.PID() == nil {
			continue
		}
		reqs[slot] = replica.Estimate{Gather: pd.gather, Slot: slot}
		root.Send(e.PID(), &reqs[slot])
		asked++
	}
	if asked == 0 {
		delete(a.st.parked, pk)
		a.finish(ctx, &Gathered{Pick: pick, Explain: ex}, pd)
	}
	return true
}

// ask sets pd.ask to the positions in pd.cands to ask, all of them or the
// routing core's shortlist when there are more than the fanout, and
// pd.slot to match.
func (a *routingActor) ask(pd *pending, req *policy.Request, now time.Time) {
	list := a.st.core.Ask(pd.ask[:0], pd.cands, a.views, req, now)
	if list == nil {
		list = pd.ask[:0]
		for i := range pd.cands {
			list = append(list, i)
		}
	}
	pd.ask = list
	pd.slot = slices.Grow(pd.slot[:0], len(pd.cands))[:len(pd.cands)]
	for i := range pd.slot {
		pd.slot[i] = -1
	}
	for slot, i := range list {
		pd.slot[i] = int32(slot)
	}
}

// gathered decides a parked Pick, or answers a parked Explain, with the
// replies that arrived.
func (a *routingActor) gathered(ctx actor.Context, g *Gathered) {
	key := parkKey{g.Pick, g.Explain}
	if g.Explain != nil {
		key.pick = nil
	}
	pd, ok := a.st.parked[key]
	if !ok {
		return // already decided
	}
	delete(a.st.parked, key)
	a.finish(ctx, g, pd)
}

// finish prices pd's candidates from the replies in, or their published
// state, and decides g's Pick (or answers its Explain).
func (a *routingActor) finish(ctx actor.Context, g *Gathered, pd *pending) {
	now := a.st.Now()
	var req *policy.Request
	if pd.explain != nil {
		req = &pd.explain.Request
	} else {
		req = &g.Pick.Request
	}
	for i := range pd.cands {
		var rp *route.Reply
		if r, ok := pd.reply(i); ok {
			rp = &r
		} else if pd.slot[i] >= 0 {
			a.st.m.misses.Inc()
		}
		a.st.core.Price(&pd.cands[i], ledger(pd.snaps[pd.cands[i].Replica]), req, rp, now)
	}
	if pd.explain != nil {
		a.explained(pd.explain, pd, now)
		return
	}
	m := g.Pick
	switch {
	case !time.Now().Before(m.Deadline):
		a.answer(ctx, m, &Picked{Err: route.ErrDeadline, Policy: a.st.name})
	case m.Log:
		ex := a.explanation(&m.Request, pd, now)
		a.answer(ctx, m, a.logged(ex, a.choose(m, pd.cands, pd.snaps, pd.offered, now)))
		return // the explanation's workings may keep pd's candidates
	default:
		a.answer(ctx, m, a.choose(m, pd.cands, pd.snaps, pd.offered, now))
	}
	a.st.putPending(pd)
}

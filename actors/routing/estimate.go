package routing

import (
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/asynkron/protoactor-go/actor"

	"github.com/inferrail/inferrail/actors/replica"
	"github.com/inferrail/inferrail/model/estimate"
	"github.com/inferrail/inferrail/model/policy"
	"github.com/inferrail/inferrail/model/prefix"
)

// Estimator is a Replica whose actor answers estimate requests. A Replica
// that is not one is priced from its published state alone.
type Estimator interface {
	Replica
	// PID is the replica actor.
	PID() *actor.PID
}

// Gathered tells the routing actor to decide a Pick whose estimates it
// broadcast: sent by the replica that answered last, or by the asker once
// routing.estimate_deadline has passed. The first one decides; later ones
// for the same Pick are ignored.
type Gathered struct{ Pick *Pick }

func (*Gathered) routingMsg() {}

// A Gathered can arrive after its routing actor stopped.
func (*Gathered) IgnoreDeadLetterLogging() {}

// pending is a Pick waiting for its estimates. Only the actor touches it.
type pending struct {
	cands   []policy.Candidate
	snaps   []*replica.Snapshot
	gather  *replica.Gather
	offered int
	explain *Explain // set for an explanation rather than a decision
	asked   []bool   // which candidates were asked, when not all were
}

// forgetDeparted drops the unapplied assignments of replicas that left the
// model's set: nothing will apply them.
func (a *routingActor) forgetDeparted() {
	if len(a.st.unapplied) == 0 {
		return
	}
	live := make(map[*replica.Shadow]bool, len(a.st.replicas))
	for _, r := range a.st.replicas {
		live[r.Snapshot().Shadow] = true
	}
	for sh := range a.st.unapplied {
		if !live[sh] {
			delete(a.st.unapplied, sh)
		}
	}
}

// recentOwners is how many recent replicas are remembered per root prefix,
// and maxRecent how many root prefixes, before the memory starts over.
const (
	recentOwners = 4
	maxRecent    = 1 << 16
)

// roots returns the root prefixes a prompt's blocks are remembered under:
// its first 2 and its first 16 blocks (fewer when it has fewer).
func roots(blocks []prefix.Hash) (short, long prefix.Hash) {
	return blocks[min(len(blocks), 2)-1], blocks[min(len(blocks), 16)-1]
}

// remember records that a prompt with blocks went to the replica with key.
func (a *routingActor) remember(blocks []prefix.Hash, key uint64) {
	if a.st.Fanout <= 0 || len(blocks) == 0 {
		return
	}
	if len(a.st.recent) >= maxRecent {
		clear(a.st.recent)
	}
	short, long := roots(blocks)
	for _, r := range [...]prefix.Hash{short, long} {
		old := a.st.recent[r]
		next := [recentOwners]uint64{key}
		k := 1
		for _, o := range old {
			if o != 0 && o != key && k < recentOwners {
				next[k] = o
				k++
			}
		}
		a.st.recent[r] = next
	}
}

// hints marks the candidates that recently got the prompt's root prefix or
// are the conversation's.
func (a *routingActor) hints(cands []policy.Candidate, blocks []prefix.Hash) []bool {
	short, long := roots(blocks)
	s, l := a.st.recent[short], a.st.recent[long]
	h := make([]bool, len(cands))
	for i := range cands {
		c := &cands[i]
		if c.Session {
			h[i] = true
			continue
		}
		for k := range recentOwners {
			if s[k] != 0 && s[k] == c.Key || l[k] != 0 && l[k] == c.Key {
				h[i] = true
				break
			}
		}
	}
	return h
}

// assigned is one assignment the actor made that its replica had not applied
// when it last answered.
type assigned struct {
	seq     uint64
	prefill time.Duration
	chain   []prefix.Hash // the assigned prompt's blocks
}

// maxUnapplied bounds the assignments remembered per replica. A replica
// that applies nothing for that long is stuck, and its published queue is
// what prices it.
const maxUnapplied = 256

type actorMetrics struct {
	misses, decisions                   *metrics.Counter
	boundedLoad, kvPressure, kvWaived   *metrics.Counter
	steerSession, steerHot, steerPrefix *metrics.Counter
}

func newActorMetrics(set *metrics.Set, model string) *actorMetrics {
	c := func(name, labels string) *metrics.Counter {
		return set.GetOrCreateCounter(name + `{model="` + model + `"` + labels + `}`)
	}
	return &actorMetrics{
		misses:       c("inferrail_estimate_deadline_misses_total", ""),
		decisions:    c("inferrail_estimate_gathers_total", ""),
		boundedLoad:  c("inferrail_routing_guards_total", `,guard="bounded_load"`),
		kvPressure:   c("inferrail_routing_guards_total", `,guard="kv_pressure"`),
		kvWaived:     c("inferrail_routing_guards_total", `,guard="kv_waived"`),
		steerSession: c("inferrail_routing_steered_total", `,reason="session"`),
		steerHot:     c("inferrail_routing_steered_total", `,reason="hot_prefix"`),
		steerPrefix:  c("inferrail_routing_steered_total", `,reason="no_prefix"`),
	}
}

// candidate builds replica i's candidate from its snapshot: the gateway's
// counts, and for the cache-aware policies (or shadows to price) its key,
// running requests and, while fresh, the engine's KV usage.
func (a *routingActor) candidate(i int, s *replica.Snapshot, now time.Time) policy.Candidate {
	c := s.Counters
	cand := policy.Candidate{Replica: i, InFlight: c.InFlight(), Pending: c.Pending()}
	if !a.st.Estimates && a.st.Shadows == nil {
		return cand
	}
	cand.Key = policy.ReplicaKey(s.ID)
	cand.Running = max(cand.InFlight-cand.Pending, 0)
	if r, ok := s.FreshLoad(now, a.st.MaxAge); ok {
		cand.Running = int(r.Running)
		cand.KVUsage, cand.Fresh = r.KVUsage, true
	}
	return cand
}

// price fills c's predicted cache and queued prefill: from the replica's
// reply when r is not nil, else from its published state (no cached
// tokens); then adds what this actor assigned there that the replica had not
// applied yet.
func (a *routingActor) price(c *policy.Candidate, s *replica.Snapshot, req *policy.Request, r *replica.Reply, now time.Time) {
	sh := s.Shadow
	if sh == nil {
		return
	}
	applied := sh.Applied()
	if r != nil {
		r.Fill(c)
		applied = max(applied, r.Applied)
	} else {
		c.QueuedPrefill = sh.Queued(now)
	}
	recs := a.st.unapplied[sh]
	k := 0
	for _, x := range recs {
		if x.seq > applied {
			recs[k] = x
			k++
		}
	}
	clear(recs[k:])
	recs = recs[:k]
	if len(recs) == 0 {
		delete(a.st.unapplied, sh)
		return
	}
	a.st.unapplied[sh] = recs
	bs := blockSize(req)
	limit := 0
	if req.PromptTokens > 0 {
		limit = min(len(req.Blocks), (req.PromptTokens-1)/bs)
	}
	for _, x := range recs {
		c.QueuedPrefill += x.prefill
		n := commonBlocks(x.chain, req.Blocks[:limit])
		c.CachedTokens = max(c.CachedTokens, n*bs)
	}
}

func blockSize(req *policy.Request) int {
	if req.BlockSize > 0 {
		return req.BlockSize
	}
	return 16
}

// commonBlocks counts the leading blocks two chains share. Chained hashes
// make the first difference final.
func commonBlocks(x, y []prefix.Hash) int {
	n := min(len(x), len(y))
	for i := 0; i < n; i++ {
		if x[i] != y[i] {
			return i
		}
	}
	return n
}

// assign prices the winner's prefill, takes its assignment number and
// makes the Attempt the asker sends to the replica.
func (a *routingActor) assign(p *Picked, w *policy.Candidate, req *policy.Request, now time.Time) {
	sh := p.Replica.Shadow
	if sh == nil || len(req.Blocks) == 0 {
		return
	}
	est := a.st.CostModel.Estimate(req.PromptTokens, w.CachedTokens, w.QueuedPrefill, w.Running)
	p.CachedTokens, p.Estimate, p.Estimated = min(w.CachedTokens, req.PromptTokens), est, true
	at := &replica.Attempt{Blocks: req.Blocks, Prefill: est.Prefill, Seq: sh.Next()}
	p.Attempt = at
	a.remember(req.Blocks, w.Key)
	if recs := a.st.unapplied[sh]; len(recs) < maxUnapplied {
		a.st.unapplied[sh] = append(recs, assigned{seq: at.Seq, prefill: est.Prefill, chain: req.Blocks})
	}
	a.count()
}

// record makes the attempt of a decision made without estimates (Records),
// for the replica actor to record and to price from its own prediction.
// The decision itself predicted nothing: p.Estimated stays false.
func (a *routingActor) record(p *Picked, req *policy.Request) {
	sh := p.Replica.Shadow
	if sh == nil || len(req.Blocks) == 0 {
		return
	}
	cm, prompt := a.st.CostModel, req.PromptTokens
	p.Attempt = &replica.Attempt{Blocks: req.Blocks, Seq: sh.Next(), PromptTokens: prompt, BlockSize: blockSize(req),
		Price: func(cached int) time.Duration { return cm.Estimate(prompt, cached, 0, 0).Prefill }}
}

// count records the cost model's guards and steering for the decision just
// made.
func (a *routingActor) count() {
	m := a.st.m
	switch p := a.st.Policy.(type) {
	case *policy.CostModel:
		d := p.Last()
		if d.BoundedLoad > 0 {
			m.boundedLoad.Inc()
		}
		if d.KVPressure > 0 {
			m.kvPressure.Inc()
		}
		if d.KVWaived {
			m.kvWaived.Inc()
		}
		switch d.Steer {
		case policy.SteerSession:
			m.steerSession.Inc()
		case policy.SteerHotPrefix:
			m.steerHot.Inc()
		}
	}
}

// broadcast sends m's query to every candidate's replica actor and parks m
// until the replies are in. It reports false when there is nothing to ask
// (no candidate answers estimates), and the caller decides at once.
func (a *routingActor) broadcast(ctx actor.Context, m *Pick) bool {
	now := a.st.Now()
	offered := a.offer(m, now)
	return a.park(ctx, m, offered, nil)
}

// park copies the collected candidates into a pending record on m and
// broadcasts the query.
func (a *routingActor) park(ctx actor.Context, m *Pick, offered int, ex *Explain) bool {
	n := len(a.cands)
	if n == 0 {
		clear(a.snaps)
		return false
	}
	pd := &pending{
		cands:   append([]policy.Candidate(nil), a.cands...),
		snaps:   append([]*replica.Snapshot(nil), a.snaps...),
		offered: offered,
		explain: ex,
	}
	clear(a.snaps)
	req := &m.Request
	pd.gather = replica.NewGather(estimate.Query{Blocks: req.Blocks, PromptTokens: req.PromptTokens, BlockSize: blockSize(req)}, n)
	root, self := ctx.ActorSystem().Root, ctx.Self()
	pd.gather.Done = func() { root.Send(self, &Gathered{Pick: m}) }
	m.pend = pd
	a.st.m.decisions.Inc()
	ask := a.ask(pd, req)
	asked := 0
	for _, i := range ask {
		e, ok := a.st.replicas[pd.cands[i].Replica].(Estimator)
		if !ok || e.PID() == nil {
			continue
		}
		root.Send(e.PID(), &replica.Estimate{Gather: pd.gather, Slot: i})
		asked++
	}
	if asked == 0 {
		m.pend = nil
		a.finish(ctx, m, pd)
	}
	return true
}

// ask returns the positions in pd.cands to ask: all of them, or a shortlist
// when there are more than the fanout. With a shortlist it sizes the
// gather to the asked ones and marks them in pd.asked.
func (a *routingActor) ask(pd *pending, req *policy.Request) []int {
	n := len(pd.cands)
	if a.st.Fanout <= 0 || n <= a.st.Fanout {
		all := make([]int, n)
		for i := range all {
			all[i] = i
		}
		return all
	}
	now := a.st.Now()
	for i := range pd.cands {
		if sh := pd.snaps[i].Shadow; sh != nil {
			pd.cands[i].QueuedPrefill = sh.Queued(now)
		}
	}
	list := policy.Shortlist(nil, pd.cands, a.hints(pd.cands, req.Blocks), a.st.Fanout, a.st.CostModel)
	pd.asked = make([]bool, n)
	for _, i := range list {
		pd.asked[i] = true
	}
	pd.gather.Expect(len(list))
	return list
}

// gathered decides a parked Pick with the replies that arrived.
func (a *routingActor) gathered(ctx actor.Context, g *Gathered) {
	m := g.Pick
	pd := m.pend
	if pd == nil {
		return // already decided
	}
	m.pend = nil
	a.finish(ctx, m, pd)
}

func (a *routingActor) finish(ctx actor.Context, m *Pick, pd *pending) {
	now := a.st.Now()
	for i := range pd.cands {
		var rp *replica.Reply
		if r, ok := pd.gather.Reply(i); ok {
			rp = &r
		} else if pd.asked == nil || pd.asked[i] {
			a.st.m.misses.Inc()
		}
		a.price(&pd.cands[i], pd.snaps[i], &m.Request, rp, now)
	}
	if pd.explain != nil {
		a.explained(pd.explain, pd, now)
		return
	}
	if !time.Now().Before(m.Deadline) {
		a.answer(ctx, m, &Picked{Err: ErrDeadline, Policy: a.st.name})
		return
	}
	if m.Log {
		ex := a.explanation(&m.Request, pd, now)
		a.answer(ctx, m, a.logged(ex, a.choose(m, pd.cands, pd.snaps, pd.offered, now)))
		return
	}
	a.answer(ctx, m, a.choose(m, pd.cands, pd.snaps, pd.offered, now))
}

package routing

import (
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/asynkron/protoactor-go/actor"

	"github.com/inferrail/inferrail/actors/mailbox"

	"github.com/inferrail/inferrail/actors/replica"
	"github.com/inferrail/inferrail/model/cost"
	"github.com/inferrail/inferrail/model/policy"
	"github.com/inferrail/inferrail/model/route"
	"github.com/inferrail/inferrail/model/shadow"
)

// Config is one routing actor's setup. The actor owns Policy and Rand from
// then on: nothing else may use them.
type Config struct {
	// Model is the configured model name the actor routes.
	Model string
	// Policy chooses among the candidates.
	Policy policy.Policy
	// Rand is the policy's random source, seeded from routing.seed and the
	// model's index so that a fixed seed replays the same choices.
	Rand *rand.Rand
	// Now is the clock ejections are timed by (the replica actors'). Nil
	// means time.Now. Deadlines are always read from the wall clock.
	Now func() time.Time
	// Logger gets unhandled messages. Nil discards them.
	Logger *slog.Logger
	// Unhandled counts messages the actor does not handle. Nil counts into
	// a counter of its own.
	Unhandled *metrics.Counter

	// Load makes the candidates carry the engines' load (running and
	// waiting requests, KV usage) and the replicas' pending tokens without
	// the estimate broadcast, for a scheduling profile whose plugins read
	// them (sched.SignalLoad).
	Load bool
	// Estimates turns on the estimate broadcast: for a prompt with blocks,
	// the actor asks every candidate's replica actor for its predicted cache
	// and queue before the policy decides, and the winner's attempt is
	// recorded in its shadow index. The cache-aware policies need it; the
	// baselines skip it.
	Estimates bool
	// Records makes a policy that skips the broadcast record its decisions
	// all the same, for a model whose other arms route on estimates: the
	// shadow indexes and prefill queues must see every request routed to
	// the replicas, whichever arm routed it. The replica actor prices the
	// prefill from its own prediction (replica.Attempt.Price).
	Records bool
	// CostModel prices the winner's prefill for its prefill queue.
	CostModel cost.Model
	// Auto prices each replica with its own online fit of CostModel's
	// prefill, when it has one (routing.cost_model: auto; replica.Fit).
	Auto bool
	// Fanout is routing.estimate_fanout: at most this many replicas are
	// asked per decision (route.Shortlist); 0 asks all.
	Fanout int
	// MaxAge is load.max_age: an engine report older than that is not
	// trusted for KV usage and running requests.
	MaxAge time.Duration
	// Source, when not nil, is the PCG behind Rand. Explain copies it to
	// peek at the next draw, so that an explanation names the replica the
	// next decision on the same state picks. Without it Explain draws from
	// a copy of nothing and may name another replica on a tie.
	Source *rand.PCG
	// Metrics counts deadline misses, guards and steering, labelled with
	// the model. Nil counts into a set of its own.
	Metrics *metrics.Set
	// Trials, when not nil, gets every decision that picked a replica and
	// reached its asker: the request, a copy of the candidates the policy
	// chose among and its pick, for the model's shadow policies. The
	// candidates then carry running requests, KV usage and the published
	// queue even without the estimate broadcast, so that the cost model can
	// price the picks; the policy's decision is the same either way.
	Trials Trials
}

// Trials takes decisions for a model's shadow policies (the fleet's trial
// worker), called trials here so as not to be confused with the replicas'
// shadow state (replica.Shadow). Offer never blocks: a decision it has no room for is dropped and
// counted. It owns d once called.
type Trials interface {
	Offer(d *shadow.Decision)
}

// Props returns the props of the routing actor for cfg. A restarted actor
// keeps the policy, its random source, the routing core's memory, the
// decisions waiting for their estimates and the last ReplicasChanged.
func Props(cfg Config) *actor.Props {
	if cfg.Policy == nil || cfg.Rand == nil {
		panic("BUG: routing.Props: nil Policy or Rand")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Unhandled == nil {
		cfg.Unhandled = metrics.NewSet().NewCounter(`inferrail_actor_unhandled_messages_total{actor="routing"}`)
	}
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.NewSet()
	}
	st := &state{Config: cfg, name: cfg.Policy.Name(), log: cfg.Logger.With("model", cfg.Model),
		m:      newActorMetrics(cfg.Metrics, cfg.Model, cfg.Policy.Name()),
		core:   route.New(route.Config{Policy: cfg.Policy, Rand: cfg.Rand, Cost: cfg.CostModel, Fanout: cfg.Fanout}),
		detail: cfg.Estimates || cfg.Trials != nil || cfg.Load,
		parked: make(map[parkKey]*pending)}
	// Picks and their Gathered run in the sender's goroutine when the
	// actor is idle (mailbox.Inline), and so do the estimate requests to
	// idle replica actors.
	return actor.PropsFromProducer(func() actor.Actor { return &routingActor{st: st} }, actor.WithMailbox(mailbox.New))
}

// state is what outlives a routing actor's restarts. Only the current
// incarnation touches it, inside Receive.
type state struct {
	Config
	name     string // Policy.Name()
	log      *slog.Logger
	replicas []Replica
	m        *actorMetrics
	// core is the model's routing core: the policy, the shortlist's
	// memory and the unapplied assignments.
	core *route.Core
	// detail: candidates carry what the cache-aware policies read (or
	// what prices a decision for the shadows).
	detail bool
	// parked holds the Picks and Explains waiting for their estimates.
	parked map[parkKey]*pending
	// spare holds decided pending records for reuse (takePending).
	spare []*pending
	// filtered holds the reasons a profile's filters set every replica
	// aside that were logged, so that each is logged once.
	filtered map[string]bool
}

// routingActor answers Pick for one model.
type routingActor struct {
	st *state
	// Reused between decisions so that deciding does not allocate: views[i]
	// and snaps[i] are replica i of st.replicas as the decision saw it.
	cands []policy.Candidate
	views []route.View
	snaps []*replica.Snapshot
	// req is the request being decided as the policy sees it: the Pick's,
	// with Now set.
	req policy.Request
	// ranked is a decision's ranking, positions in its candidates.
	ranked []int
	// pooled prices the calibrating replicas without a fit of their own
	// (route.PoolFits).
	pooled cost.Model
}

// Receive handles one message. It never blocks.
func (a *routingActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *Pick:
		a.pick(ctx, m)
	case *Gathered:
		a.gathered(ctx, m)
	case *Explain:
		a.explain(ctx, m)
	case *ReplicasChanged:
		a.st.replicas = m.Replicas
		a.forgetDeparted()
	case *actor.Started, *actor.Stopping, *actor.Stopped, *actor.Restarting:
	case *actor.Touch:
		// protoactor answers it once it is processed: a barrier for tests.
	case *crash:
		panic("BUG: routing: crash requested by a test")
	default:
		a.st.Unhandled.Inc()
		a.st.log.Warn("routing: unhandled message", "type", fmt.Sprintf("%T", m))
	}
}

func (a *routingActor) pick(ctx actor.Context, m *Pick) {
	var p *Picked
	if !time.Now().Before(m.Deadline) {
		p = &Picked{Err: route.ErrDeadline, Policy: a.st.name}
	} else if a.st.Estimates && len(m.Request.Blocks) > 0 {
		if a.broadcast(ctx, m) {
			return // decided once the replies are in (gathered)
		}
		p = a.decide(m)
	} else {
		p = a.decide(m)
	}
	a.answer(ctx, m, p)
}

// answer hands p to m's asker, or releases its lease if the asker left.
func (a *routingActor) answer(ctx actor.Context, m *Pick, p *Picked) {
	sd := p.trial
	p.trial = nil
	if !m.settle(p) {
		// The asker stopped waiting: give the slots back, say nothing.
		if p.Lease != nil {
			p.Lease.Release()
		}
		return
	}
	if ctx.Sender() != nil { // a Pick sent without a future is read through Answer
		ctx.Respond(p)
	}
	if sd != nil {
		a.st.Trials.Offer(sd)
	}
}

// see reads every replica's snapshot into a.snaps and its view, as the
// routing core reads it, into a.views.
func (a *routingActor) see(now time.Time) {
	a.views, a.snaps = a.views[:0], a.snaps[:0]
	for _, r := range a.st.replicas {
		s := r.Snapshot()
		c := s.Counters
		// Filled in place, not built apart and copied in (route.collect's
		// candidates the same way).
		a.views = append(a.views, route.View{})
		v := &a.views[len(a.views)-1]
		v.ID, v.Serves, v.Healthy, v.Ejected = s.ID, s.Serves(a.st.Model), s.Healthy, s.Ejected(now)
		v.Room, v.InFlight, v.Pending, v.Labels, v.Ledger = c.HasRoom(), c.InFlight(), c.Pending(), s.Labels, ledger(s)
		if a.st.detail {
			v.Key = policy.ReplicaKey(s.ID)
			if s.Shadow != nil {
				v.PendingTokens = s.Shadow.PendingTokens()
			}
			if s.LoadFresh(now, a.st.MaxAge) {
				l := &s.Load
				v.Fresh, v.Running, v.KVUsage, v.Waiting = true, int(l.Running), l.KVUsage, int(l.Waiting)
			}
			v.Shared = s.SharedEngine
			if f := s.Shadow.Fit(); a.st.Auto && f != nil {
				v.Model, v.Calibrating = f.Priced(), true
			}
		}
		a.snaps = append(a.snaps, s)
	}
	if a.st.Auto && a.st.detail {
		route.PoolFits(a.views, &a.pooled)
	}
}

// collect reads the replicas (see) and collects the candidates into
// a.cands, returning how many replicas qualified before the room check.
func (a *routingActor) collect(exclude []string, now time.Time) int {
	a.see(now)
	var offered int
	a.cands, offered = route.Collect(a.cands[:0], a.views, exclude, a.st.detail)
	return offered
}

// ledger is s's published shadow state as the routing core reads it; nil
// (not a nil *replica.Shadow) when it has none.
func ledger(s *replica.Snapshot) route.Ledger {
	if s.Shadow == nil {
		return nil
	}
	return s.Shadow
}

// decide chooses a replica for m from the replicas' published state and
// takes a lease on it.
func (a *routingActor) decide(m *Pick) *Picked {
	now := a.st.Now()
	offered := a.collect(m.Exclude, now)
	defer clear(a.snaps) // let old snapshots go
	if a.st.detail {
		for i := range a.cands {
			a.st.core.Price(&a.cands[i], a.views[a.cands[i].Replica].Ledger, &m.Request, nil, now)
		}
	}
	if m.Log {
		ex := a.explanation(&m.Request, &pending{cands: a.cands, snaps: a.snaps, offered: offered}, now)
		return a.logged(ex, a.choose(m, a.cands, a.snaps, offered, now))
	}
	return a.choose(m, a.cands, a.snaps, offered, now)
}

// logged attaches ex, the explanation of the decision p, for the decision
// log. The winner is the replica chosen: the policy's pick, or the next
// best when a lease could not be taken on it.
func (a *routingActor) logged(ex *Explanation, p *Picked) *Picked {
	switch {
	case p.Replica != nil:
		ex.Winner = p.Replica.ID
	case p.Err != nil:
		ex.Winner, ex.Err = "", p.Err
	}
	p.Explanation = ex
	return p
}

// choose runs the routing core's policy over cands (snaps holds the
// snapshot of each candidate's replica) and takes a lease on its choice,
// choosing again without a candidate that filled up meanwhile: another
// routing actor (another model's, or another arm of a split) can fill it
// since the snapshots were read.
func (a *routingActor) choose(m *Pick, cands []policy.Candidate, snaps []*replica.Snapshot, offered int, now time.Time) *Picked {
	a.req = m.Request
	if a.req.Now.IsZero() {
		a.req.Now = now
	}
	req := &a.req
	var lease *replica.Lease
	cands, k, err := a.st.core.Choose(req, cands, offered, func(c *policy.Candidate) bool {
		var ok bool
		lease, ok = snaps[c.Replica].Counters.TryAcquire()
		return ok
	})
	p := &Picked{Err: err, Policy: a.st.name}
	if errors.Is(err, route.ErrFilteredOut) {
		a.filteredOut(err)
	}
	if err == nil {
		p.Replica, p.Lease = snaps[cands[k].Replica], lease
		if m.Rank {
			a.ranked = a.st.core.Ranking(a.ranked[:0], cands, k)
			p.Ranking = make([]string, len(a.ranked))
			for j, i := range a.ranked {
				p.Ranking[j] = snaps[cands[i].Replica].ID
			}
		}
		if a.st.Estimates {
			a.assign(p, &cands[k], req)
		} else if a.st.Records {
			a.record(p, req)
		}
		if a.st.Trials != nil {
			p.trial = &shadow.Decision{Policy: a.st.name, Request: *req, Cands: slices.Clone(cands), Routed: k}
		}
	}
	a.req = policy.Request{} // the blocks are the Pick's: keep none
	return p
}

// assign records the winner's assignment in the routing core and makes the
// Attempt the asker sends to the replica.
func (a *routingActor) assign(p *Picked, w *policy.Candidate, req *policy.Request) {
	as, ok := a.st.core.Assign(w, ledger(p.Replica), req)
	if !ok {
		return
	}
	p.CachedTokens, p.Estimate, p.Estimated = as.CachedTokens, as.Estimate, true
	p.Attempt = &replica.Attempt{Blocks: req.Blocks, Prefill: as.Estimate.Prefill, Seq: as.Seq,
		Tokens: max(req.PromptTokens-as.CachedTokens, 0), Cached: as.CachedTokens, Running: w.Running,
		BlockSize: route.BlockSize(req)}
	a.count()
}

// record makes the attempt of a decision made without estimates (Records),
// for the replica actor to record and to price from its own prediction.
// The decision itself predicted nothing: p.Estimated stays false.
func (a *routingActor) record(p *Picked, req *policy.Request) {
	p.Attempt = Recorded(p.Replica.Shadow, req, a.st.CostModel)
}

// Recorded is the attempt of req on the replica whose shadow is sh, to
// record in its index and price from its own prediction with cm; nil for
// a replica without a shadow or a prompt without blocks. Decisions made
// without estimates record their attempt so, and so does an attempt that
// moved to another replica (fleet.Fleet.Moved).
func Recorded(sh *replica.Shadow, req *policy.Request, cm cost.Model) *replica.Attempt {
	if sh == nil || len(req.Blocks) == 0 {
		return nil
	}
	prompt := req.PromptTokens
	return &replica.Attempt{Blocks: req.Blocks, Seq: sh.Next(), PromptTokens: prompt, BlockSize: route.BlockSize(req),
		Price: func(cached int) time.Duration { return cm.Estimate(prompt, cached, 0, 0).Prefill }}
}

// filteredOut counts a decision whose profile's filters set every
// replica aside, and logs each reason once: a profile that matches no
// replica (a label selector, a role filter) is a config to fix.
func (a *routingActor) filteredOut(err error) {
	a.st.m.filteredOut.Inc()
	msg := err.Error()
	if a.st.filtered[msg] {
		return
	}
	if a.st.filtered == nil {
		a.st.filtered = make(map[string]bool)
	}
	a.st.filtered[msg] = true
	a.st.log.Warn("routing: the scheduling profile's filters set every replica aside; such requests are answered 503. "+
		"Check the replicas' labels (replicas[].labels, llm-d.ai/role) against the profile's filters",
		"policy", a.st.name, "err", err)
}

// forgetDeparted drops the unapplied assignments of replicas that left the
// model's set: nothing will apply them.
func (a *routingActor) forgetDeparted() {
	live := make([]route.Ledger, 0, len(a.st.replicas))
	for _, r := range a.st.replicas {
		if l := ledger(r.Snapshot()); l != nil {
			live = append(live, l)
		}
	}
	a.st.core.Keep(live)
}

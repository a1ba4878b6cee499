package routing

import (
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/asynkron/protoactor-go/actor"

	"github.com/inferrail/inferrail/actors/replica"
	"github.com/inferrail/inferrail/model/cost"
	"github.com/inferrail/inferrail/model/policy"
	"github.com/inferrail/inferrail/model/prefix"
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
	// Fanout is routing.estimate_fanout: at most this many replicas are
	// asked per decision (policy.Shortlist); 0 asks all.
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
	// Shadows, when not nil, gets every decision that picked a replica and
	// reached its asker: the request, a copy of the candidates the policy
	// chose among and its pick, for the model's shadow policies. The
	// candidates then carry running requests, KV usage and the published
	// queue even without the estimate broadcast, so that the cost model can
	// price the picks; the policy's decision is the same either way.
	Shadows Shadows
}

// Shadows takes decisions for a model's shadow policies (the fleet's shadow
// worker). Offer never blocks: a decision it has no room for is dropped and
// counted. It owns d once called.
type Shadows interface {
	Offer(d *shadow.Decision)
}

// Props returns the props of the routing actor for cfg. A restarted actor
// keeps the policy, its random source and the last ReplicasChanged.
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
		m: newActorMetrics(cfg.Metrics, cfg.Model), unapplied: make(map[*replica.Shadow][]assigned),
		recent: make(map[prefix.Hash][recentOwners]uint64)}
	return actor.PropsFromProducer(func() actor.Actor { return &routingActor{st: st} })
}

// state is what outlives a routing actor's restarts. Only the current
// incarnation touches it, inside Receive.
type state struct {
	Config
	name     string // Policy.Name()
	log      *slog.Logger
	replicas []Replica
	m        *actorMetrics
	// unapplied holds, per replica, the assignments this actor made that the
	// replica had not applied when it last answered.
	unapplied map[*replica.Shadow][]assigned
	// recent maps a root prefix (see roots) to the keys of the replicas
	// this actor last sent it to, most recent first: the shortlist's hints.
	recent map[prefix.Hash][recentOwners]uint64
}

// routingActor answers Pick for one model.
type routingActor struct {
	st *state
	// Reused between decisions so that deciding does not allocate:
	// cands[i] was built from snaps[i].
	cands []policy.Candidate
	snaps []*replica.Snapshot
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
		p = &Picked{Err: ErrDeadline, Policy: a.st.name}
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
	sd := p.shadow
	p.shadow = nil
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
		a.st.Shadows.Offer(sd)
	}
}

// decide chooses a replica for m and takes a lease on it.
func (a *routingActor) decide(m *Pick) *Picked {
	now := a.st.Now()
	offered := a.offer(m, now)
	defer clear(a.snaps) // let old snapshots go
	if a.st.Estimates || a.st.Shadows != nil {
		for i := range a.cands {
			a.price(&a.cands[i], a.snaps[i], &m.Request, nil, now)
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

// choose runs the policy over cands (built from snaps) and takes a lease on
// its choice, choosing again without a candidate that filled up meanwhile.
func (a *routingActor) choose(m *Pick, cands []policy.Candidate, snaps []*replica.Snapshot, offered int, now time.Time) *Picked {
	if m.Request.Now.IsZero() {
		m.Request.Now = now
	}
	for len(cands) > 0 {
		k, err := a.st.Policy.Pick(&m.Request, cands, a.st.Rand)
		if err != nil || k < 0 || k >= len(cands) {
			break
		}
		s := snaps[k]
		if lease, ok := s.Counters.TryAcquire(); ok {
			p := &Picked{Replica: s, Lease: lease, Policy: a.st.name}
			if a.st.Estimates {
				a.assign(p, &cands[k], &m.Request, now)
			} else if a.st.Records {
				a.record(p, &m.Request)
			}
			if a.st.Shadows != nil {
				p.shadow = &shadow.Decision{Policy: a.st.name, Request: m.Request, Cands: slices.Clone(cands), Routed: k}
			}
			return p
		}
		// Another routing actor (another model's, or another arm of a
		// split) filled it since collect looked: drop it and choose
		// again among the rest.
		last := len(cands) - 1
		cands[k], snaps[k] = cands[last], snaps[last]
		cands, snaps = cands[:last], snaps[:last]
	}
	if offered == 0 {
		return &Picked{Err: ErrNoReplica, Policy: a.st.name}
	}
	return &Picked{Err: ErrOverloaded, Policy: a.st.name}
}

// offer collects m's candidates (collect). When every healthy replica of
// the model is ejected, which the ejection budget allows only when health
// changed after the ejections, it offers the ejected ones rather than
// nothing, so the pool never empties. It returns how many were offered
// before the room check.
func (a *routingActor) offer(m *Pick, now time.Time) int {
	offered, live := a.collect(m, now, false)
	if live == 0 {
		offered, _ = a.collect(m, now, true)
	}
	return offered
}

// collect fills a.cands and a.snaps with the replicas that serve the model,
// pass their health checks, were not tried by m and have room; ejected
// replicas only when ejected is true, and then only those. It returns how
// many replicas qualified before the room check, and how many serve the
// model, pass their health checks and are not ejected, tried or not.
func (a *routingActor) collect(m *Pick, now time.Time, ejected bool) (offered, live int) {
	a.cands, a.snaps = a.cands[:0], a.snaps[:0]
	for i, r := range a.st.replicas {
		s := r.Snapshot()
		if !s.Healthy || !s.Serves(a.st.Model) {
			continue
		}
		out := s.Ejected(now)
		if !out {
			live++
		}
		if out != ejected || tried(m.Exclude, s.ID) {
			continue
		}
		offered++
		c := s.Counters
		if !c.HasRoom() {
			continue
		}
		a.cands = append(a.cands, a.candidate(i, s, now))
		a.snaps = append(a.snaps, s)
	}
	return offered, live
}

func tried(exclude []string, id string) bool {
	for _, x := range exclude {
		if x == id {
			return true
		}
	}
	return false
}

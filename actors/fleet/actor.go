package fleet

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/asynkron/protoactor-go/actor"

	"github.com/inferrail/inferrail/actors/replica"
	"github.com/inferrail/inferrail/actors/routing"
	"github.com/inferrail/inferrail/model/cost"
	"github.com/inferrail/inferrail/model/policy"
)

// member is one replica of the fleet as published in a view. Immutable.
type member struct {
	h   *replica.Handle
	pid *actor.PID
}

// Snapshot returns the member's latest snapshot (routing.Replica).
func (m *member) Snapshot() *replica.Snapshot { return m.h.Snapshot() }

// PID returns the member's actor (routing.Estimator).
func (m *member) PID() *actor.PID { return m.pid }

// view is the fleet's membership as published: immutable once stored.
type view struct {
	byID  map[string]*member
	order []*member // static replicas in config order, each DNS group's members in address order, each source's
}

// entry is the fleet actor's own record of a member.
type entry struct {
	h     *replica.Handle
	pid   *actor.PID // the member's actor; nil until spawned
	owner string     // ownerStatic, ownerDNSPrefix+group, or a discovery source's name
	ep    Endpoint   // what it was built from; a change replaces the member
}

// modelState is one routing actor as the fleet actor spawns it: one arm of
// a configured model's split.
type modelState struct {
	name      string        // the model
	actorName string        // routing-<model index>, then -<arm index> past the first arm
	arm       *arm          // Fleet's record of it; Start sets its routing PID
	policy    policy.Policy // owned by the routing actor once spawned
	rng       *rand.Rand    // likewise
	src       *rand.PCG     // rng's source, which Explain peeks at
	pid       *actor.PID    // the routing actor
	estimates bool
	load      bool
	// records: the arm skips the broadcast but another arm of the model
	// routes on estimates, so its decisions are recorded too
	// (routing.Config.Records).
	records   bool
	costModel cost.Model
	auto      bool // routing.cost_model: auto for the model
	fanout    int  // routing.estimate_fanout
	// trials is the model's trial worker, fed every decision; nil
	// without shadow policies.
	trials *trialWorker
}

// state is what outlives the fleet actor's restarts: a restarted fleet actor
// respawns every routing and replica actor from it, with the same handles,
// so counters survive. Only the current incarnation touches it, inside
// Receive; Start reads it once ready is closed, before anything else runs.
type state struct {
	log        *slog.Logger
	now        func() time.Time
	resolver   Resolver
	replicaCfg replica.Config
	unhandled  *metrics.Counter // the fleet actor's
	routingCnt *metrics.Counter // the routing actors'
	set        *metrics.Set
	maxAge     time.Duration // load.max_age

	models  []*modelState
	static  []string // static replica ids in config order
	groups  []*group
	sources []*source // in name order
	entries map[string]*entry

	view        *atomic.Pointer[view]
	sourcesView *atomic.Pointer[[]Source] // Fleet.Sources
	goroutines  *sync.WaitGroup           // probers and resolvers; joined by Fleet.Stop

	ready   chan struct{} // closed once the first incarnation has started
	started bool
	closing atomic.Bool // set by Fleet.Stop: an incarnation started now spawns nothing
}

// fleetActor owns the fleet's membership.
type fleetActor struct {
	st        *state
	resolvers []*resolverRun // by group; this incarnation's
	stopping  bool
}

// Receive handles one message. It never blocks.
func (a *fleetActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *resolved:
		a.resolved(ctx, m)
	case *setEndpoints:
		a.setEndpoints(ctx, m)
	case *sourceFailing:
		a.sourceFailing(m)
	case *actor.Terminated:
		a.terminated(m)
	case *actor.Started:
		a.started(ctx)
	case *actor.Stopping:
		a.stopping = true
		a.stopResolvers()
	case *actor.Restarting:
		a.stopping = true
		a.stopResolvers()
		a.st.log.Error("fleet actor restarting after a panic: respawning every routing and replica actor")
	case *actor.Stopped:
	case *actor.Touch:
		// protoactor answers it once it is processed: the barrier
		// Fleet.Settle waits on.
	case *reconfigure:
		a.reconfigure(ctx, m)
	case *retire:
		for _, ms := range m.models {
			ctx.Poison(ms.pid)
		}
	case *crash:
		panic("BUG: fleet: crash requested by a test")
	default:
		a.st.unhandled.Inc()
		a.st.log.Warn("fleet: unhandled message", "type", fmt.Sprintf("%T", m))
	}
}

// started spawns the routing actors, then a replica actor for every member,
// publishes the membership and starts the resolvers.
func (a *fleetActor) started(ctx actor.Context) {
	st := a.st
	if st.closing.Load() {
		// Restarted while the fleet stops (a panic in Stopping): start
		// nothing that Stop would not join.
		return
	}
	for _, m := range st.models {
		if err := a.spawnRouting(ctx, m); err != nil {
			// Names are free once the previous incarnation's children
			// have stopped, which protoactor waits for.
			st.log.Error("fleet: spawn routing actor", "model", m.name, "policy", m.arm.policy, "err", err)
			continue
		}
	}
	for _, id := range a.order() {
		a.spawnReplica(ctx, id, st.entries[id])
	}
	a.publish(ctx, nil)
	a.resolvers = make([]*resolverRun, len(st.groups))
	send, self := actor.SenderContext(ctx.ActorSystem().Root), ctx.Self()
	for i, g := range st.groups {
		rctx, cancel := context.WithCancel(context.Background())
		run := &resolverRun{cancel: cancel}
		a.resolvers[i] = run
		r, host, every := st.resolver, g.host, g.cfg.Refresh
		st.goroutines.Go(func() { resolveLoop(rctx, run, send, self, r, i, host, every) })
	}
	if !st.started {
		st.started = true
		close(st.ready)
	}
}

// spawnRouting spawns m's routing actor and sets m.pid.
func (a *fleetActor) spawnRouting(ctx actor.Context, m *modelState) error {
	st := a.st
	var trials routing.Trials
	if m.trials != nil {
		trials = m.trials // a nil *trialWorker would not be a nil interface
	}
	pid, err := ctx.SpawnNamed(routing.Props(routing.Config{
		Model:     m.name,
		Policy:    m.policy,
		Rand:      m.rng,
		Now:       st.now,
		Logger:    st.log,
		Unhandled: st.routingCnt,
		Estimates: m.estimates,
		Load:      m.load,
		Records:   m.records,
		CostModel: m.costModel,
		Auto:      m.auto,
		MaxAge:    st.maxAge,
		Fanout:    m.fanout,
		Source:    m.src,
		Metrics:   st.set,
		Trials:    trials,
	}), m.actorName)
	if err != nil {
		return err
	}
	m.pid = pid
	return nil
}

func (a *fleetActor) stopResolvers() {
	for _, r := range a.resolvers {
		r.cancel()
	}
	a.resolvers = nil
}

func (a *fleetActor) spawnReplica(ctx actor.Context, id string, e *entry) {
	// Join the ejection budget now rather than when the new actor gets to
	// its Started message: a sibling that starts first and fails requests
	// at once must count this one among the healthy, or it finds nobody to
	// spare it and is never ejected. The actor joins again when it starts,
	// which changes nothing the first time and resets it after a restart.
	s := e.h.Snapshot()
	a.st.replicaCfg.Budget.JoinAs(id, s.Models, e.h)
	e.pid = ctx.SpawnPrefix(replica.Props(e.h, a.st.replicaCfg), "replica-"+id+"-")
}

// order returns the member ids: static replicas in config order, then each
// group's members, then each discovery source's.
func (a *fleetActor) order() []string {
	ids := slices.Clone(a.st.static)
	for _, g := range a.st.groups {
		ids = append(ids, g.ids...)
	}
	for _, s := range a.st.sources {
		ids = append(ids, s.ids...)
	}
	return ids
}

// publish stores a new view and sends ReplicasChanged to the routing actors
// of models, or of every model when models is nil.
func (a *fleetActor) publish(ctx actor.Context, models []string) {
	st := a.st
	ids := a.order()
	v := &view{byID: make(map[string]*member, len(ids)), order: make([]*member, 0, len(ids))}
	for _, id := range ids {
		e := st.entries[id]
		m := &member{h: e.h, pid: e.pid}
		v.byID[id] = m
		v.order = append(v.order, m)
	}
	st.view.Store(v)
	st.calibrate(v)
	for _, ms := range st.models {
		if ms.pid == nil || (models != nil && !slices.Contains(models, ms.name)) {
			continue
		}
		var reps []routing.Replica
		for _, m := range v.order {
			if m.h.Snapshot().Serves(ms.name) {
				reps = append(reps, m)
			}
		}
		ctx.Send(ms.pid, &routing.ReplicasChanged{Replicas: reps})
	}
}

// resolved applies one lookup of a group (state.apply): members that stay
// keep their actor and state, new ones get an actor, and those that left
// are stopped once the routing actors no longer offer them. A failed
// lookup keeps the last set.
func (a *fleetActor) resolved(ctx actor.Context, m *resolved) {
	if m.group >= len(a.resolvers) || m.run != a.resolvers[m.group] {
		return // from a stopped resolver
	}
	st := a.st
	g := st.groups[m.group]
	if m.err != nil {
		if !g.failing {
			g.failing = true
			st.log.Warn("fleet: DNS lookups failing; keeping the last members", "group", g.cfg.Name,
				"host", g.host, "members", len(g.ids), "err", m.err)
		}
		return
	}
	if g.failing {
		g.failing = false
		st.log.Info("fleet: DNS lookups answer again", "group", g.cfg.Name, "host", g.host)
	}
	c := st.apply(ownerDNSPrefix+g.cfg.Name, g.ids, g.endpoints(st.log, m.addrs))
	if !c.moved {
		return
	}
	g.ids = c.ids
	a.commit(ctx, c, g.cfg.Models)
	st.log.Info("fleet: DNS group changed", "group", g.cfg.Name, "members", len(c.ids), "joined", c.joined, "left", c.leftIDs)
}

// terminated handles a child that stopped. Members that left and routing
// actors of a stopping fleet are expected; a current member or a routing
// actor stopping otherwise means its supervisor gave up after repeated
// panics.
func (a *fleetActor) terminated(m *actor.Terminated) {
	if a.stopping {
		return
	}
	for id, e := range a.st.entries {
		if e.pid != nil && e.pid.Equal(m.Who) {
			a.st.log.Error("fleet: replica actor stopped after repeated panics; it stays out of rotation", "replica", id)
			return
		}
	}
	for _, ms := range a.st.models {
		if ms.pid != nil && ms.pid.Equal(m.Who) {
			a.st.log.Error("fleet: routing actor stopped after repeated panics; its model (or arm of its split) gets no decisions", "model", ms.name,
				"policy", ms.arm.policy)
			return
		}
	}
}

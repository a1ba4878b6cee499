package fleet

import (
	"context"
	"errors"
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
	"github.com/inferrail/inferrail/config"
	"github.com/inferrail/inferrail/model/estimate"
	"github.com/inferrail/inferrail/model/policy"
	"github.com/inferrail/inferrail/model/route"
)

// startTimeout bounds Start's wait for the fleet actor's first start, which
// only a fleet actor that panics on every start could miss.
const startTimeout = 10 * time.Second

// Options are what Start needs beyond the config.
type Options struct {
	// Prober checks the engines (transport/health over HTTP). Nil turns
	// active health checks off: replicas are healthy as far as probes go,
	// and no model cards are fetched.
	Prober Prober
	// Scraper reads the engines' /metrics pages (transport/scrape). Nil
	// turns load scraping off.
	Scraper replica.Scraper
	// Events subscribes replicas with kv_events to their engines' KV event
	// streams (transport/kvevents). Nil turns KV events off: shadow indexes
	// follow routing decisions alone.
	Events replica.EventSource
	// VocabSizes are the sizes of the models' tokenizer vocabularies
	// (transport/tokenize), by configured model name: a replica's KV
	// events with token ids past it are foreign (replica.Config.EventChecks).
	// A model missing, or at 0, is not checked.
	VocabSizes map[string]int
	// NoTokenizer lists the models, by configured name, without a
	// tokenizer (replica.Config.NoTokenizer).
	NoTokenizer map[string]bool
	// Resolver resolves the DNS groups. Required when the config has any.
	Resolver Resolver
	// Logger gets membership, health and ejection changes. Nil discards.
	Logger *slog.Logger
	// Now is the clock passive ejections are timed by. Nil means time.Now.
	// Deadlines always use the wall clock.
	Now func() time.Time
	// Metrics is where the fleet registers its counters
	// (inferrail_replica_restarts_total, inferrail_ejections_total,
	// inferrail_actor_unhandled_messages_total). Nil keeps them private.
	Metrics *metrics.Set
	// RoutingMetrics is where the routing actors count, per model, the
	// replicas that missed the estimate deadline
	// (inferrail_estimate_deadline_misses_total), the broadcasts
	// (inferrail_estimate_gathers_total), guards
	// (inferrail_routing_guards_total) and steering
	// (inferrail_routing_steered_total), and where the shadow policies
	// count (inferrail_shadow_*). Nil keeps them private.
	RoutingMetrics *metrics.Set
	// TrialQueue is how many decisions may wait for a model's shadow
	// worker before new ones are dropped. 0 takes DefaultTrialQueue.
	TrialQueue int
	// ShadowLog, when not nil, gets the shadow log (observability.
	// shadow_log): a config line for each generation that builds shadow
	// policies, and a line for each decision they replay (see
	// model/shadow). The shadows wait for it, never the requests.
	TrialLog TrialLog

	// extraTrial, when not nil, adds its policy to every model's shadows:
	// a test's way to stall the trial worker.
	extraTrial func() policy.Policy
	// ArmPolicy, when not nil, builds every arm's policy in place of its
	// profile: a benchmark's way to route each model with a profile it
	// builds itself, on one fleet, and a test's way to route with a policy
	// of its own (one that refuses with policy.ErrNotAdmitted, say). The
	// gateway leaves it nil.
	ArmPolicy func(cfg *config.Config, m *config.Model, name string) (policy.Policy, error)
}

// Fleet is the running set of gateway actors for one config. Its methods are
// safe for concurrent use. Nothing it returns waits on a mailbox without a
// deadline: Pick is bounded by the request's deadline, Done sends and
// returns, and the read methods load published snapshots.
type Fleet struct {
	sys *actor.ActorSystem
	pid *actor.PID // the fleet actor

	// table is the models as routed now; Reconfigure swaps it. A request
	// reads it once per Pick.
	table *atomic.Pointer[table]
	view  *atomic.Pointer[view]
	st    *state // the fleet actor's; Fleet touches only st.closing and st.sourcesView
	seed  uint64 // the seed for routing.seed 0
	opts  Options
	log   *slog.Logger

	// reconfigMu serializes Reconfigure, which runs off the request path;
	// gen counts its successes (under reconfigMu).
	reconfigMu sync.Mutex
	gen        int
	// ctx ends when the fleet stops: the trial workers and the goroutines
	// retiring replaced routing actors watch it.
	ctx context.Context

	goroutines *sync.WaitGroup
	stopped    atomic.Bool
	stopOnce   sync.Once
	// stopTrials ends the trial workers' goroutines (joined with
	// goroutines).
	stopTrials context.CancelFunc
}

// table is the configured models as one config routes them. Immutable once
// stored in Fleet.table.
type table struct {
	models []*model          // config order
	byName map[string]*model // names and aliases
	// estimateDeadline is routing.estimate_deadline.
	estimateDeadline time.Duration
}

// model is a configured model as Fleet sees it. Immutable once its table is
// stored.
type model struct {
	name      string
	aliases   []string
	split     policy.Split
	arms      []*arm // as split.Arms()
	estimates bool   // some arm broadcasts estimate requests
	tokens    bool   // some arm routes on the prompt's tokens
	// shadows runs the model's shadow policies; nil without any.
	trials *trialWorker
	// trialKey names the shadow policies and their settings: a reload
	// that leaves it alone keeps the worker.
	trialKey string
}

// arm is one policy of a model's split, with its own routing actor. A model
// without a split has one arm. Immutable once its table is stored.
type arm struct {
	policy  string
	percent int
	routing *actor.PID
	// estimates: the arm's routing actor broadcasts estimate requests,
	// because its policy routes on them or a shadow policy of the model
	// needs them (see Start).
	estimates bool
	// load: its policy reads the engines' load (routing.Config.Load).
	load bool
	// key is everything the routing actor was built from: a reload that
	// leaves it alone keeps the actor, and with it the policy's state.
	key string
	ms  *modelState // the routing actor as the fleet actor spawns it
}

// arm returns the arm a request with key falls in.
func (m *model) arm(key uint64) *arm { return m.arms[m.split.Arm(key)] }

// armNamed returns the arm of policy name, if the model has one.
func (m *model) armNamed(name string) (*arm, bool) {
	for _, a := range m.arms {
		if a.policy == name {
			return a, true
		}
	}
	return nil, false
}

// Start starts the actors for cfg: a routing actor per policy of each
// model's split (one per model without a split), and a replica actor per
// configured replica and per address of each DNS group, every group
// resolved once before Start returns (a group whose first lookup fails
// starts empty and is retried every refresh). The arms of a split share the
// replica actors: the cache-aware arms record their decisions in the same
// shadow indexes. A model with shadow policies gets a trial worker, fed
// by all its arms. It fails on a config it cannot route: a model whose
// policy is not implemented yet. Stop releases everything Start started.
//
// A model with a shadow that routes on estimates (sched.SignalEstimates:
// prefix_hash, kv_aware, cost_model, a profile with a prefix plugin) has
// every arm broadcast estimate requests, so the shadow
// sees predicted caches and the replicas record every decision. A
// cache-blind arm still decides as without shadows, from the same random
// stream: the baselines ignore what the broadcast adds. Its decisions are
// then priced (Decision.Predicted) like a cache-aware arm's. Each shadow
// policy draws from a stream of its own, seeded from routing.seed.
func Start(cfg *config.Config, opts Options) (*Fleet, error) {
	if cfg == nil || len(cfg.Models) == 0 {
		return nil, errors.New("fleet: no models configured")
	}
	if opts.Prober != nil && cfg.Health.Interval <= 0 {
		return nil, fmt.Errorf("fleet: health.interval %v is not positive", cfg.Health.Interval)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	set := opts.Metrics
	if set == nil {
		set = metrics.NewSet()
	}
	// routing.seed 0: draw one, so gateways side by side differ. A reload
	// that sets routing.seed to 0 keeps this one.
	seed := rand.Uint64()

	st := &state{
		log:       log,
		now:       now,
		resolver:  opts.Resolver,
		unhandled: set.GetOrCreateCounter(`inferrail_actor_unhandled_messages_total{actor="fleet"}`),
		routingCnt: set.GetOrCreateCounter(
			`inferrail_actor_unhandled_messages_total{actor="routing"}`),
		entries:     make(map[string]*entry),
		view:        new(atomic.Pointer[view]),
		sourcesView: new(atomic.Pointer[[]Source]),
		goroutines:  new(sync.WaitGroup),
		ready:       make(chan struct{}),
	}
	st.replicaCfg = replica.Config{
		Health:     cfg.Health,
		Budget:     replica.NewBudget(cfg.Health.MaxEjectionPercent),
		Now:        now,
		Logger:     log,
		Goroutines: st.goroutines,
		Metrics:    replica.NewMetrics(set),

		IndexCapacity: cfg.Index.DefaultCapacityBlocks,
	}
	st.set = opts.RoutingMetrics
	if st.set == nil {
		st.set = metrics.NewSet()
	}
	st.maxAge = cfg.Load.MaxAge
	if opts.Prober != nil {
		st.replicaCfg.Prober = opts.Prober
	}
	st.replicaCfg.Events = opts.Events
	st.replicaCfg.SpeculativeTTL, st.replicaCfg.MaxSilence = cfg.KVEvents.SpeculativeTTL, cfg.KVEvents.MaxSilence
	st.replicaCfg.NoTokenizer = opts.NoTokenizer
	st.replicaCfg.EventChecks = make(map[string]estimate.EventChecks, len(cfg.Models))
	for _, m := range cfg.Models {
		st.replicaCfg.EventChecks[m.Name] = estimate.EventChecks{BlockSize: m.BlockSize, VocabSize: opts.VocabSizes[m.Name]}
	}
	if opts.Scraper != nil {
		st.replicaCfg.Scraper = opts.Scraper
		st.replicaCfg.Load = cfg.Load
	}

	f := &Fleet{table: new(atomic.Pointer[table]), view: st.view, st: st, goroutines: st.goroutines, seed: seed,
		opts: opts, log: log}
	t, models, workers, err := f.plan(cfg, nil)
	if err != nil {
		return nil, err
	}
	st.models = models
	for _, r := range cfg.Replicas {
		if _, dup := st.entries[r.ID]; dup {
			return nil, fmt.Errorf("fleet: replica id %q is used twice", r.ID)
		}
		st.entries[r.ID] = newEntry(staticEndpoint(r), ownerStatic)
		st.static = append(st.static, r.ID)
	}
	for i := range cfg.Discovery.DNS {
		g, err := newGroup(&cfg.Discovery.DNS[i])
		if err != nil {
			return nil, err
		}
		st.groups = append(st.groups, g)
	}
	if len(st.groups) > 0 && opts.Resolver == nil {
		return nil, errors.New("fleet: discovery.dns needs a Resolver")
	}
	st.resolveFirst()

	sctx, stopTrials := context.WithCancel(context.Background())
	f.ctx, f.stopTrials = sctx, stopTrials
	f.logTrials(workers)
	for _, w := range workers {
		f.startTrials(w)
	}
	f.sys = actor.NewActorSystem(
		actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return log.With("component", "protoactor") }),
		// A Pick that reaches a stopped routing actor fails with
		// ErrDeadLetter and is handled here; no log line needed.
		actor.WithDeadLetterRequestLogging(false),
	)
	props := actor.PropsFromProducer(func() actor.Actor { return &fleetActor{st: st} },
		actor.WithSupervisor(replica.Supervisor()))
	pid, err := f.sys.Root.SpawnNamed(props, "fleet")
	if err != nil {
		f.sys.Shutdown()
		stopTrials()
		st.goroutines.Wait()
		return nil, fmt.Errorf("fleet: spawn: %w", err)
	}
	f.pid = pid
	select {
	case <-st.ready:
	case <-time.After(startTimeout):
		f.Stop()
		return nil, errors.New("fleet: the fleet actor did not start")
	}
	for _, m := range st.models {
		if m.pid == nil {
			f.Stop()
			return nil, fmt.Errorf("fleet: model %s: %s routing actor did not start", m.name, m.arm.policy)
		}
		m.arm.routing = m.pid
	}
	f.table.Store(t)
	return f, nil
}

// trialStream is the random stream of shadow policy k of model i. The arms
// draw from streams i | j<<32 (model i, arm j), which never set bit 31.
func trialStream(i, k int) uint64 { return uint64(i) | 1<<31 | uint64(k)<<32 }

// resolveFirst looks every DNS group up once, in parallel, before any actor
// starts. A group whose lookup fails starts empty.
func (st *state) resolveFirst() {
	type result struct {
		addrs []string
		err   error
	}
	res := make([]result, len(st.groups))
	var wg sync.WaitGroup
	for i, g := range st.groups {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), lookupTimeout(g.cfg.Refresh))
			defer cancel()
			res[i].addrs, res[i].err = st.resolver.LookupHost(ctx, g.host)
		})
	}
	wg.Wait()
	for i, g := range st.groups {
		if res[i].err != nil {
			st.log.Warn("fleet: first DNS lookup failed; the group starts empty", "group", g.cfg.Name, "host", g.host, "err", res[i].err)
			continue
		}
		g.ids = st.apply(ownerDNSPrefix+g.cfg.Name, nil, g.endpoints(st.log, res[i].addrs)).ids
	}
}

// Pick asks the routing actor of the model's arm the request falls in (by
// req.Policy.Key, see policy.Split) for a replica for one attempt and
// returns the decision with its lease, which the caller ends with Done. It
// sends one message and waits for its answer (routing.Decide, which also
// keeps routing.estimate_deadline for the estimate broadcast), until
// req.Deadline at the latest (a zero Deadline has passed). A decision is
// never returned after the deadline: one that arrives late is released and
// route.ErrDeadline returned. The routing errors come back as the routing
// actor answered them (route.ErrNoReplica, route.ErrOverloaded).
func (f *Fleet) Pick(req PickRequest) (Decision, error) {
	t := f.table.Load()
	m, ok := t.byName[req.Model]
	if !ok {
		return Decision{}, ErrUnknownModel
	}
	if f.stopped.Load() {
		return Decision{}, ErrStopped
	}
	a := m.arm(req.Policy.Key)
	msg := &routing.Pick{Request: req.Policy, Deadline: req.Deadline, Log: req.Log, Rank: req.Rank}
	if len(req.Exclude) > 0 {
		// The actor may read it after Pick has given up waiting.
		msg.Exclude = slices.Clone(req.Exclude)
	}
	p := routing.Decide(f.sys.Root, a.routing, msg, a.estimates && len(req.Policy.Blocks) > 0, t.estimateDeadline)
	if p == nil {
		return Decision{}, route.ErrDeadline // the actor will release what it takes
	}
	if p.Err != nil {
		return Decision{}, p.Err
	}
	if !time.Now().Before(req.Deadline) {
		p.Lease.Release()
		if p.Attempt != nil {
			// The routing actor counted it as assigned: tell the replica
			// it came and went, so its queue stays right.
			if mem, ok := f.view.Load().byID[p.Replica.ID]; ok {
				f.sys.Root.Send(mem.pid, &replica.Assign{Attempt: p.Attempt})
				f.sys.Root.Send(mem.pid, &replica.RequestDone{Outcome: replica.OutcomeCancelled, Attempt: p.Attempt})
			}
		}
		return Decision{}, route.ErrDeadline
	}
	d := Decision{Replica: p.Replica.ID, URL: p.Replica.URL, Policy: p.Policy, Lease: p.Lease, Explanation: p.Explanation, Ranking: p.Ranking}
	if p.Attempt != nil {
		if mem, ok := f.view.Load().byID[p.Replica.ID]; ok && mem.pid != nil {
			d.attempt, d.pid = p.Attempt, mem.pid
			f.sys.Root.Send(mem.pid, &replica.Assign{Attempt: p.Attempt})
		}
		if p.Estimated && !req.Unpriced {
			d.Predicted, d.CachedTokens, d.Estimate = true, p.CachedTokens, p.Estimate.Total()
		}
	}
	return d, nil
}

// Moved hands the attempt d over to replica id, which served it in d's
// place: an endpoint picker learns so from Envoy when it fell back to a
// later endpoint of the list (GIE's x-gateway-destination-endpoint-served).
// d's lease goes back and its shadow record on d's replica ends as
// cancelled, which says nothing of that replica; id gets a lease on its
// counters whatever their caps (the request is there already), so that it
// counts the request in flight, its first byte and its outcome, and, for a
// prompt with blocks (req, the request the decision was made for), a
// record in its index priced from its own prediction. The returned
// decision replaces d: the caller calls FirstByte and Done on it, never on
// d. It reports false, changing nothing, when id is d's replica or not a
// member serving the model.
func (f *Fleet) Moved(d Decision, model, id string, req policy.Request) (Decision, bool) {
	if id == d.Replica {
		return d, false
	}
	mem, ok := f.view.Load().byID[id]
	if !ok {
		return d, false
	}
	snap := mem.h.Snapshot()
	if !snap.Serves(model) {
		return d, false
	}
	if d.Lease != nil {
		d.Lease.Release()
	}
	if d.attempt != nil {
		f.sys.Root.Send(d.pid, &replica.RequestDone{Outcome: replica.OutcomeCancelled, Attempt: d.attempt})
	}
	moved := Decision{Replica: id, URL: snap.URL, Policy: d.Policy, Lease: snap.Counters.Acquire(), Ranking: d.Ranking}
	if m, ok := f.table.Load().byName[model]; ok && mem.pid != nil && m.arm(req.Key).ms != nil {
		if at := routing.Recorded(snap.Shadow, &req, m.arm(req.Key).ms.costModel); at != nil {
			moved.attempt, moved.pid = at, mem.pid
			f.sys.Root.Send(mem.pid, &replica.Assign{Attempt: at})
		}
	}
	return moved, true
}

// FirstByte records that an attempt's response head arrived: it gives back
// the lease's pending slot and takes the attempt off its replica's prefill
// queue.
func (f *Fleet) FirstByte(d Decision) {
	if d.Lease != nil {
		d.Lease.FirstByte()
	}
	if d.attempt != nil {
		f.sys.Root.Send(d.pid, &replica.FirstByte{Attempt: d.attempt})
	}
}

// Explain asks a routing actor of the model what it would decide for req
// now, routing nothing: the actor of the arm named pol, or when pol is
// empty of the arm req falls in, as Pick would. It fails with
// ErrUnknownPolicy when the model has no arm named pol. It waits until
// deadline at the latest.
func (f *Fleet) Explain(model, pol string, req policy.Request, deadline time.Time) (*routing.Explanation, error) {
	t := f.table.Load()
	m, ok := t.byName[model]
	if !ok {
		return nil, ErrUnknownModel
	}
	a := m.arm(req.Key)
	if pol != "" {
		if a, ok = m.armNamed(pol); !ok {
			return nil, ErrUnknownPolicy
		}
	}
	if f.stopped.Load() {
		return nil, ErrStopped
	}
	ex := routing.Explaining(f.sys.Root, a.routing, &routing.Explain{Request: req, Deadline: deadline}, t.estimateDeadline)
	if ex == nil {
		return nil, route.ErrDeadline
	}
	return ex, nil
}

// UsesEstimates reports whether a policy of the model (any arm of its
// split) routes on predicted cache or the prompt's tokens, so its requests
// are worth tokenizing.
func (f *Fleet) UsesEstimates(model string) bool {
	m, ok := f.table.Load().byName[model]
	return ok && m.tokens
}

// Arms returns the policies routing model (a configured name or an alias)
// and each one's percent of its traffic, sorted by policy name: one arm of
// 100 for a model without a split. Nil for an unknown model.
func (f *Fleet) Arms(model string) []policy.Arm {
	m, ok := f.table.Load().byName[model]
	if !ok {
		return nil
	}
	return slices.Clone(m.split.Arms())
}

// Done ends an attempt: it releases the decision's lease (if the caller has
// not) and reports the outcome to the replica's actor, fire-and-forget. Call
// it exactly once per decision Pick returned.
func (f *Fleet) Done(d Decision, o Outcome) {
	if d.Lease != nil {
		d.Lease.Release()
	}
	if d.attempt != nil {
		f.doneAttempt(d, o)
		return
	}
	m, ok := f.view.Load().byID[d.Replica]
	if !ok {
		return // the replica left the fleet
	}
	var ro replica.Outcome
	switch o {
	case OutcomeOK:
		// A success only matters to the actor when it ends a failure
		// streak or forgives an earlier ejection. Most requests are neither,
		// and skipping their message saves the request path an actor send
		// (a goroutine wake-up) per request. A failure still in flight when
		// the snapshot was read can make one success go unreported; failure
		// streaks across concurrent requests have no order to keep anyway.
		if s := m.h.Snapshot(); s.RequestFailures == 0 && s.Ejections == 0 {
			return
		}
		ro = replica.OutcomeOK
	case OutcomeFailed:
		ro = replica.OutcomeFailed
	default:
		return // says nothing of the replica
	}
	f.sys.Root.Send(m.pid, &replica.RequestDone{Outcome: ro})
}

// doneAttempt reports the end of an attempt that was assigned to its
// replica's shadow index: always, since the index and queue need to know.
func (f *Fleet) doneAttempt(d Decision, o Outcome) {
	ro := replica.OutcomeOK
	switch o {
	case OutcomeFailed:
		ro = replica.OutcomeFailed
	case OutcomeCancelled:
		ro = replica.OutcomeCancelled
	case OutcomeWithdrawn:
		ro = replica.OutcomeWithdrawn
	}
	f.sys.Root.Send(d.pid, &replica.RequestDone{Outcome: ro, Attempt: d.attempt})
}

// Resolve returns the configured model a client's model name means: the
// name itself or the model it is an alias of. The empty name resolves when
// exactly one model is configured.
func (f *Fleet) Resolve(name string) (model string, ok bool) {
	t := f.table.Load()
	if name == "" {
		if len(t.models) == 1 {
			return t.models[0].name, true
		}
		return "", false
	}
	if m, ok := t.byName[name]; ok {
		return m.name, true
	}
	return "", false
}

// Models lists every configured model, each followed by its aliases, in
// config order, with the card the first replica serving it (in membership
// order) published for it, or nil while no probe has fetched one.
func (f *Fleet) Models() []ModelInfo {
	v := f.view.Load()
	var out []ModelInfo
	for _, m := range f.table.Load().models {
		var card []byte
		for _, mem := range v.order {
			s := mem.h.Snapshot()
			if c := s.Cards[m.name]; c != nil && s.Serves(m.name) {
				card = c
				break
			}
		}
		out = append(out, ModelInfo{ID: m.name, Model: m.name, Card: card})
		for _, a := range m.aliases {
			out = append(out, ModelInfo{ID: a, Model: m.name, Card: card})
		}
	}
	return out
}

// Snapshot returns the latest snapshot of replica id, if it is a member.
func (f *Fleet) Snapshot(id string) (*replica.Snapshot, bool) {
	m, ok := f.view.Load().byID[id]
	if !ok {
		return nil, false
	}
	return m.h.Snapshot(), true
}

// Replicas returns the latest snapshot of every member: static replicas in
// config order, then each DNS group's members in address order, then each
// discovery source's members in its order (sources by name).
func (f *Fleet) Replicas() []*replica.Snapshot {
	v := f.view.Load()
	out := make([]*replica.Snapshot, len(v.order))
	for i, m := range v.order {
		out[i] = m.h.Snapshot()
	}
	return out
}

// Stop stops every actor and joins every goroutine the fleet started. Leases
// still held keep working. Pick returns ErrStopped afterwards; Done still
// releases. Stop is idempotent.
func (f *Fleet) Stop() {
	f.stopOnce.Do(func() {
		f.stopped.Store(true)
		f.st.closing.Store(true)
		if err := f.sys.Root.StopFuture(f.pid).Wait(); err != nil {
			f.sys.Logger().Error("fleet: stop", "err", err)
		}
		f.stopTrials()
		f.goroutines.Wait()
		f.sys.Shutdown()
	})
}

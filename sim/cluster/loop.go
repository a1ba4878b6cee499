package cluster

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"github.com/zeebo/xxh3"

	"github.com/inferrail/inferrail/model/cost"
	"github.com/inferrail/inferrail/model/estimate"
	"github.com/inferrail/inferrail/model/kvevent"
	engload "github.com/inferrail/inferrail/model/load"
	"github.com/inferrail/inferrail/model/policy"
	"github.com/inferrail/inferrail/model/prefix"
	"github.com/inferrail/inferrail/model/route"
	"github.com/inferrail/inferrail/model/sched"
	"github.com/inferrail/inferrail/sim/engine"
)

// epoch is virtual time zero as the policies see it (Request.Now). Only
// differences matter; a fixed epoch keeps runs reproducible.
var epoch = time.Date(2026, time.January, 1, 0, 0, 0, 0, time.UTC)

// streamRouting is the stream of the policy's PCG generator. The workload
// draws from its own generators, seeded with the same Seed (workload.Start).
const streamRouting = 0x726f7574696e6721 // "routing!"

// load is what an engine's metrics page says about its load.
type load struct {
	running, waiting int
	kvUsage          float64
}

// streamBalance is the stream of the load balancer's generator
// (BalanceRandom).
const streamBalance = 0x62616c616e636521 // "balance!"

// replica is one simulated engine.
type replica struct {
	id  string
	i   int    // its position in run.reps
	key uint64 // policy.Candidate.Key: a stable hash of id
	eng *engine.Engine

	// The step in flight: planned at its start, applied at end.
	busy bool
	end  time.Duration
	step engine.StepResult
	// held are the engine's events held back (Faults.WithholdFor).
	held []kvevent.Event

	// now is the engine's state at its last step boundary, which is what
	// a scrape between boundaries reads (Step already holds the state at
	// the end of the step in flight). seen is what the last scrape read,
	// at seenAt.
	now    load
	seen   load
	seenAt time.Duration
	seenOK bool
}

// shadow is what one gateway instance keeps about one engine: its
// estimates and its own counts of what it routed there.
type shadow struct {
	est *estimate.Replica
	// events maps the engine's KV events onto est (Config.KVEvents).
	events *estimate.Events

	inFlight int // routed by this instance and not finished
	pending  int // routed by this instance and no first token yet
	// pendingTokens is the prompt tokens less those predicted cached of
	// the pending requests (route.View.PendingTokens).
	pendingTokens int
	// seq is the last assignment number taken: the replica applies each
	// assignment as it is made (its ledger, route.Ledger).
	seq uint64
	// shared judges, scrape by scrape, whether the engine runs other
	// instances' requests too, as the replica actor does (load.Shared),
	// from started (requests ever routed there) and, as of the last
	// scrape, lastStarted, lastInFlight and the engine's lastQueries.
	shared               engload.Shared
	started, lastStarted int
	lastInFlight         int
	lastQueries          int64
	scraped              bool
	// model is est.Fit's model in effect, which prices the replica, when
	// it has a Fit (Config.AutoCalibrate); routed counts the requests this
	// instance routed there, and fits are its fit's trace (Result.Fits).
	model  cost.Model
	fixed  bool // model is Config.ReplicaCostModels'
	fitted bool // model is est.Fit's fit, not the configured values
	routed int
	fits   []FitPoint
}

// observe feeds one scrape of the engine, st, to the shared-engine check,
// as the replica actor's scrape loop does.
func (p *shadow) observe(st engine.Stats) {
	o := engload.SharedScrape{Engine: float64(st.Running + st.Waiting), Ours: p.inFlight, Steady: true,
		Idle: p.scraped && p.lastInFlight == 0 && p.started == p.lastStarted}
	if p.scraped {
		o.Queries = float64(st.PrefixQueries - p.lastQueries)
	}
	p.shared.Observe(o)
	p.lastStarted, p.lastInFlight, p.lastQueries, p.scraped = p.started, p.inFlight, st.PrefixQueries, true
}

// Next takes the replica's next assignment number (route.Ledger).
func (p *shadow) Next() uint64 { p.seq++; return p.seq }

// Applied is the last assignment number taken: the simulator applies an
// assignment as soon as it is made (route.Ledger).
func (p *shadow) Applied() uint64 { return p.seq }

// Queued is the replica's prefill queue at now (route.Ledger).
func (p *shadow) Queued(now time.Time) time.Duration { return p.est.Queue.Queued(now) }

var _ route.Ledger = (*shadow)(nil)

// gate is one gateway instance (Config.Instances): its routing core and
// what it keeps about each engine, reps[i] about run.reps[i].
type gate struct {
	// core is the gateway's routing core, deciding as a routing actor
	// does: the policy, the shortlist and the pricing.
	core *route.Core
	pcg  *rand.PCG // the policy's random source
	reps []*shadow

	views  []route.View
	pooled cost.Model // route.PoolFits
	cands  []policy.Candidate
	listed []int // scratch: the shortlist (Config.Fanout)
	asked  []bool
}

// inflight is the fleet's view of one routed request.
type inflight struct {
	rec int     // index in run.recs
	sh  *shadow // what the instance that routed it keeps about its replica
	// assigned reports that it is recorded on sh's estimate.Replica.
	assigned  bool
	firstByte bool
	// tokens is what the request adds to its replica's pending tokens
	// until its first byte.
	tokens int
	// timing measures its prefill for its replica's fit, when it has one.
	timing estimate.Timing
}

// run is one simulation's state. It is owned by Run.
type run struct {
	cfg  *Config
	reps []*replica
	// gates are the gateway instances, each with its own routing core;
	// gates[0] is the only one unless Config.Instances says more.
	gates    []*gate
	balance  *rand.Rand   // the load balancer's draws (BalanceRandom)
	dead     int          // the instance killed (Faults.KillAt), -1 while none is
	aware    bool         // the policy routes on estimates (sched.SignalEstimates): decisions are priced and assigned
	informed bool         // priced from the engines' true state (Informed)
	truth    []cost.Model // scratch: each replica's true model (inform)
	detail   bool         // candidates carry keys, load and pending tokens (it routes on estimates or load)
	root     prefix.Hash
	bs       int
	scrape   time.Duration
	maxAge   time.Duration
	feed     *feed
	next     arrival
	hasNext  bool
	arrived  int

	hasher prefix.Hasher
	blocks []prefix.Hash
	oracle map[prefix.Hash]struct{}
	seq    []uint32      // scratch: a prompt and its output, for the oracle
	seqBlk []prefix.Hash // scratch: their blocks
	others []int         // scratch: the other instances' picks

	now        time.Duration
	released   bool // the withheld events went out (Faults.WithholdFor)
	nextScrape time.Duration
	steps      int
	idleSteps  int // consecutive steps that did nothing, to catch a stuck engine

	recs      []Record
	estimates []time.Duration // Result.Estimates

	// speeds are Faults.SpeedChange by time, speed the next one's index.
	speeds []SpeedChange
	speed  int

	// onPick, when set (tests), sees every routing decision.
	onPick func(r *run, req *policy.Request, cands []policy.Candidate, winner int)
	// onShortlist, when set (tests), sees every decision made on a
	// shortlist: the candidates with every replica asked, and a copy of
	// the policy's random source, which Pick draws from next, before the
	// pick.
	onShortlist func(req *policy.Request, full []policy.Candidate, src rand.PCG)
}

// newRun prepares cfg's run, routed by its scheduler.
func newRun(cfg *Config) (*run, error) {
	s, err := cfg.scheduler()
	if err != nil {
		return nil, err
	}
	return newRunOf(cfg, s, s.Signals())
}

// newRunOf prepares cfg's run routed by pol, which routes on signals; a
// second instance and those after it route by a fresh scheduler of cfg's.
func newRunOf(cfg *Config, pol policy.Policy, signals sched.Signal) (*run, error) {
	model := cfg.Model
	if model == "" {
		model = DefaultModel
	}
	r := &run{
		cfg:      cfg,
		balance:  rand.New(rand.NewPCG(cfg.Seed, streamBalance)),
		dead:     -1,
		aware:    signals&sched.SignalEstimates != 0,
		informed: cfg.Policy == Informed,
		detail:   signals&(sched.SignalEstimates|sched.SignalLoad) != 0,
		root:     prefix.Root(model, "", ""),
		bs:       cfg.Engine.BlockSize,
		scrape:   cfg.ScrapeInterval,
		maxAge:   cfg.MaxAge,
		oracle:   make(map[prefix.Hash]struct{}),
	}
	if r.scrape == 0 {
		r.scrape = DefaultScrapeInterval
	}
	if r.maxAge == 0 {
		r.maxAge = DefaultMaxAge
	}
	for i := range cfg.Replicas {
		eng, err := engine.New(cfg.engine(i))
		if err != nil {
			return nil, err
		}
		id := "r" + strconv.Itoa(i)
		r.reps = append(r.reps, &replica{id: id, i: i, key: policy.ReplicaKey(id), eng: eng})
	}
	for k := range cfg.instances() {
		if k > 0 {
			s, err := cfg.scheduler()
			if err != nil {
				return nil, err
			}
			pol = s
		}
		// Each instance draws from its own stream; the first from the one
		// a run of one instance always used.
		pcg := rand.NewPCG(cfg.Seed, streamRouting+uint64(k))
		g := &gate{
			core: route.New(route.Config{Policy: pol, Rand: rand.New(pcg), Cost: cfg.costParams().Model, Fanout: cfg.Fanout}),
			pcg:  pcg,
		}
		for range cfg.Replicas {
			// The gateway sizes a replica's index by the KV capacity its
			// engine reports.
			sh := &shadow{est: estimate.New(cfg.Engine.NumBlocks)}
			if cfg.AutoCalibrate {
				sh.est.Fit = cost.NewOnline(cfg.costParams().Model)
				sh.model, sh.fitted = sh.est.Fit.InEffect()
			}
			if m, ok := cfg.ReplicaCostModels[len(g.reps)]; ok {
				sh.model, sh.fixed = m, true
			}
			if cfg.KVEvents {
				sh.events = estimate.NewEvents(model, estimate.EventChecks{})
			}
			g.reps = append(g.reps, sh)
		}
		r.gates = append(r.gates, g)
	}
	r.speeds = slices.Clone(cfg.Faults.SpeedChange)
	slices.SortStableFunc(r.speeds, func(a, b SpeedChange) int { return cmp.Compare(a.At, b.At) })
	r.feed = newFeed(cfg.Workload, cfg.Seed, cfg.Rate, cfg.KeepBillingHeader)
	r.pull()
	return r, nil
}

// pull fetches the next arrival, unless arrivals have stopped.
func (r *run) pull() {
	if r.cfg.Requests > 0 && r.arrived >= r.cfg.Requests {
		r.hasNext = false
		return
	}
	r.next = r.feed.next()
	r.hasNext = r.cfg.Duration == 0 || r.next.at < r.cfg.Duration
}

// Event kinds, in the order they are handled at equal times: a step's
// tokens are out before a scrape reads the engine, and both before a
// request arriving at the same instant is routed.
const (
	evStep = iota
	evFault
	evScrape
	evArrival
	evNone
)

// loop runs the discrete-event simulation until every request has
// finished.
func (r *run) loop() error {
	for {
		kind, at, rep := evNone, time.Duration(math.MaxInt64), (*replica)(nil)
		for _, p := range r.reps {
			if p.busy && p.end < at {
				kind, at, rep = evStep, p.end, p
			}
		}
		if r.hasNext && r.next.at < at {
			kind, at = evArrival, r.next.at
		}
		if kind == evNone {
			return r.release()
		}
		if ft, ok := r.nextFault(); ok && ft <= at {
			kind, at = evFault, ft
		}
		if r.nextScrape < at || r.nextScrape == at && kind == evArrival {
			kind, at = evScrape, r.nextScrape
		}
		r.now = at
		switch kind {
		case evStep:
			if err := r.finishStep(rep); err != nil {
				return err
			}
		case evFault:
			if err := r.fault(); err != nil {
				return err
			}
		case evScrape:
			for i, p := range r.reps {
				p.seen, p.seenAt, p.seenOK = p.now, at, true
				// The shared-engine check reads the engine as it is: a
				// real engine's gauges drop a finished request with the
				// step that finished it, where p.now, the last step's
				// start, still counts it while the engine idles.
				st := p.eng.Stats()
				for _, g := range r.gates {
					g.reps[i].observe(st)
				}
			}
			r.nextScrape += r.scrape
		case evArrival:
			if err := r.arrive(); err != nil {
				return err
			}
		}
	}
}

// nextFault is when the next fault happens: the kill, or the end of the
// withholding, while they are ahead.
func (r *run) nextFault() (time.Duration, bool) {
	f := &r.cfg.Faults
	at, ok := time.Duration(math.MaxInt64), false
	if f.KillAt > 0 && r.dead < 0 && f.KillAt >= r.now {
		at, ok = f.KillAt, true
	}
	if r.speed < len(r.speeds) && r.speeds[r.speed].At < at {
		at, ok = r.speeds[r.speed].At, true
	}
	if end := f.WithholdFrom + f.WithholdFor; f.WithholdFor > 0 && !r.released && end >= r.now && end < at {
		at, ok = end, true
	}
	return at, ok
}

// fault applies the fault due now.
func (r *run) fault() error {
	f := &r.cfg.Faults
	if f.KillAt > 0 && r.dead < 0 && f.KillAt == r.now {
		r.kill()
		return nil
	}
	if r.speed < len(r.speeds) && r.speeds[r.speed].At == r.now {
		r.changeSpeed(r.speeds[r.speed])
		r.speed++
		return nil
	}
	return r.release()
}

// release ends the withholding: every held event goes out.
func (r *run) release() error {
	if r.released {
		return nil
	}
	r.released = true
	for _, p := range r.reps {
		if len(p.held) > 0 {
			r.publish(p, nil)
		}
	}
	return nil
}

// startStep plans p's next step at the current time.
func (r *run) startStep(p *replica) error {
	running, waiting, kv := p.eng.Load()
	p.now = load{running: running, waiting: waiting, kvUsage: kv}
	p.step = p.eng.Step(r.now)
	if !r.cfg.KVEvents {
		p.step.Events = nil // nobody reads them; drop them early
	}
	p.end = r.now + p.step.Duration
	p.busy = true
	r.steps++
	if p.step.ScheduledTokens == 0 && len(p.step.Outputs) == 0 {
		// A step may only drain KV events; a run of steps that does
		// nothing at all means the engine cannot make progress.
		if r.idleSteps++; r.idleSteps > 1000 {
			return fmt.Errorf("BUG: replica %s: engine makes no progress at %v (%+v)", p.id, r.now, p.eng.Stats())
		}
	} else {
		r.idleSteps = 0
	}
	return nil
}

// finishStep applies the outputs of p's step, which ends now, and starts
// the next one if the engine has work.
func (r *run) finishStep(p *replica) error {
	now := epoch.Add(r.now)
	for _, o := range p.step.Outputs {
		f := o.Req.Ctx.(*inflight)
		rec := &r.recs[f.rec]
		if o.NewTokens > 0 && !f.firstByte {
			rec.FirstToken = o.Req.FirstToken
			rec.CachedTokens = o.Req.CachedTokens
			r.calibrate(f, rec, now)
			f.sh.firstByte(f, now)
		}
		if o.Done {
			if !f.firstByte {
				// The gateway settles an attempt that ends without a
				// first byte the same way (replica.attemptEnded).
				f.sh.firstByte(f, now)
			}
			rec.Finished = o.Req.Finished
			rec.CachedTokens = o.Req.CachedTokens
			rec.Preemptions = o.Req.Preemptions
			rec.OutputTokens = o.Req.Generated
			f.sh.inFlight--
		}
	}
	if r.cfg.KVEvents && len(p.step.Events) > 0 {
		// The engine publishes a step's events as it ends, and every
		// instance follows every engine's events; held back ones go out
		// first once the withholding ends.
		if r.cfg.Faults.withheld(r.now) {
			p.held = append(p.held, p.step.Events...)
		} else {
			r.publish(p, p.step.Events)
		}
	}
	p.step = engine.StepResult{}
	p.busy = false
	if !p.eng.Idle() {
		return r.startStep(p)
	}
	return nil
}

// publish delivers events of p's engine to every instance, after those
// held back (Faults.WithholdFor), in the order the engine made them.
func (r *run) publish(p *replica, events []kvevent.Event) {
	if len(p.held) > 0 {
		events = append(p.held, events...)
		p.held = nil
	}
	b := &kvevent.Batch{Events: events}
	for _, g := range r.gates {
		sh := g.reps[p.i]
		sh.events.Apply(b, sh.est.Index)
	}
}

// kill is Faults.KillAt: the instance takes no more requests, and those it
// has in flight are lost.
func (r *run) kill() {
	k := r.cfg.Faults.KillInstance
	r.dead = k
	for i := range r.recs {
		rec := &r.recs[i]
		if rec.Instance == k && !rec.Rejected && rec.Finished == 0 {
			rec.Lost = true
		}
	}
}

// firstByte settles f, routed to p, at its first byte (or its end without
// one): it no longer waits for a response head.
func (p *shadow) firstByte(f *inflight, now time.Time) {
	f.firstByte = true
	p.pending--
	p.pendingTokens -= f.tokens
	if f.assigned {
		p.est.FirstByte(now)
	}
}

// arrive routes the next request as the gateway would, through the
// instance the load balancer hands it to, and gives it to the chosen
// engine. With several instances it also asks every other instance where
// it would have sent the request, changing nothing, and records how many
// would have chosen another replica.
func (r *run) arrive() error {
	in := r.next
	r.arrived++
	r.pull()

	idx := len(r.recs)
	id := strconv.Itoa(idx)
	gi := r.spread(idx)
	r.recs = append(r.recs, Record{
		Class:        in.class,
		Arrival:      in.at,
		PromptTokens: len(in.prompt),
		Replica:      -1,
		Instance:     gi,
		WarmUp:       in.at < r.cfg.WarmUp,
	})
	rec := &r.recs[idx]
	r.estimates = append(r.estimates, 0)

	r.blocks = r.hasher.Chain(r.blocks[:0], r.root, in.prompt, r.bs)
	rec.OracleTokens = r.shared(r.blocks, len(in.prompt))
	r.record(in.prompt, in.output)
	routed := in.prompt
	if in.route != nil {
		// The gateway hashes another text than the engine computes
		// (Config.KeepBillingHeader).
		routed = in.route
		r.blocks = r.hasher.Chain(r.blocks[:0], r.root, routed, r.bs)
	}

	now := epoch.Add(r.now)
	key := in.session
	if key == 0 {
		key = xxh3.HashString(id)
	}
	preq := policy.Request{
		Key:          key,
		PromptTokens: len(routed),
		Blocks:       r.blocks,
		BlockSize:    r.bs,
		SessionKey:   in.session,
		Now:          now,
		SLO:          r.cfg.SLO,
	}
	g := r.gates[gi]
	var offered int
	if offered = r.offer(g, &preq, now); len(g.cands) == 0 {
		rec.Rejected = true // every replica at MaxConcurrency
		return nil
	}
	r.others = r.others[:0]
	if len(r.gates) > 1 {
		// Asked before the pick, so that every instance sees the same
		// engines and the pick's own assignment is in none of them.
		for hi, h := range r.gates {
			if hi == gi {
				continue
			}
			if w, ok := r.wouldPick(h, &preq, now); ok {
				rec.Asked++
				r.others = append(r.others, w)
			}
		}
	}
	cands, w, err := g.core.Choose(&preq, g.cands, offered, func(*policy.Candidate) bool { return true })
	if err != nil {
		// Every replica takes what it is offered, so only a profile whose
		// filters left nothing gets here: the gateway answers 503 and
		// sends nothing to any engine.
		rec.Rejected = true
		return nil
	}
	if r.onPick != nil {
		r.onPick(r, &preq, cands, w)
	}
	c := &cands[w]
	p := r.reps[c.Replica]
	sh := g.reps[c.Replica]
	rec.Replica = c.Replica
	for _, o := range r.others {
		if o != c.Replica {
			rec.Disagreed++
		}
	}
	rec.PredictedTokens = min(c.CachedTokens, len(in.prompt))
	f := &inflight{rec: idx, sh: sh, tokens: len(routed) - min(c.CachedTokens, len(routed))}
	if r.aware {
		// As the routing actor assigns: the winner's estimated prefill
		// joins its queue and the prompt's blocks its index. The receipt
		// is only needed to take back a failed attempt, and a simulated
		// engine never fails one.
		if as, ok := g.core.Assign(c, sh, &preq); ok {
			sh.est.Assign(r.blocks, as.Estimate.Prefill, now)
			f.assigned = true
			rec.Predicted = true
			r.estimates[idx] = as.Estimate.Total()
			if sh.est.Fit != nil {
				f.timing = sh.est.Time(len(routed)-as.CachedTokens, as.CachedTokens, c.Running, now)
				if sh.routed++; sh.routed%FitEvery == 0 {
					sh.trace(now)
				}
			}
		}
	}
	sh.inFlight++
	sh.started++
	sh.pending++
	sh.pendingTokens += f.tokens

	er := &engine.Request{
		ID:      id,
		Root:    r.root,
		Prompt:  in.prompt,
		Output:  in.output,
		Reason:  "length",
		Arrival: r.now,
	}
	er.Ctx = f
	if err := p.eng.Add(er); err != nil {
		return fmt.Errorf("replica %s: %w", p.id, err)
	}
	if !p.busy {
		return r.startStep(p)
	}
	return nil
}

// spread is the load balancer: the instance that routes request n, one of
// those alive.
func (r *run) spread(n int) int {
	k := len(r.gates)
	if k == 1 {
		return 0
	}
	if r.dead >= 0 {
		k--
	}
	i := n % k
	if r.cfg.Balance == BalanceRandom {
		i = r.balance.IntN(k)
	}
	if r.dead >= 0 && i >= r.dead {
		i++
	}
	return i
}

// offer fills g.cands with the candidates g offers req, priced when the
// policy routes on estimates, and returns how many qualifying replicas
// there were.
func (r *run) offer(g *gate, req *policy.Request, now time.Time) int {
	r.see(g)
	var offered int
	g.cands, offered = route.Collect(g.cands[:0], g.views, nil, r.detail)
	if len(g.cands) > 0 && r.aware {
		r.price(g, req, now)
		if r.informed {
			r.inform(g, req)
		}
	}
	return offered
}

// wouldPick is the replica instance g would route req to, changing none of
// its state: its policy explains the decision with a copy of its random
// source. It reports false when g would route it nowhere, or when its
// policy cannot explain (a policy passed in by a test).
func (r *run) wouldPick(g *gate, req *policy.Request, now time.Time) (int, bool) {
	s, ok := g.core.Policy.(*sched.Scheduler)
	if !ok {
		return 0, false
	}
	if r.offer(g, req, now); len(g.cands) == 0 {
		return 0, false
	}
	src := *g.pcg
	ex, err := s.Explain(req, g.cands, rand.New(&src))
	if err != nil || ex.Primary < 0 {
		return 0, false
	}
	w := ex.Profiles[ex.Primary].Winner
	if w < 0 {
		return 0, false
	}
	return g.cands[w].Replica, true
}

// see builds g's view of every replica as the gateway's routing actor reads
// it from a replica's snapshot: healthy and not ejected (a simulated engine
// never fails), with room while g has fewer than MaxConcurrency in flight
// there (the breaker), g's counts, and the engine's load while the last
// scrape is fresh.
func (r *run) see(g *gate) {
	g.views = g.views[:0]
	for i, p := range r.reps {
		sh := g.reps[i]
		v := route.View{ID: p.id, Key: p.key, Serves: true, Healthy: true,
			Room:     r.cfg.MaxConcurrency == 0 || sh.inFlight < r.cfg.MaxConcurrency,
			InFlight: sh.inFlight, Pending: sh.pending, PendingTokens: sh.pendingTokens, Ledger: sh}
		if sh.fitted || sh.fixed {
			v.Model = &sh.model
		}
		v.Calibrating = sh.est.Fit != nil
		if p.seenOK && r.now-p.seenAt <= r.maxAge {
			v.Fresh, v.Running, v.Waiting, v.KVUsage = true, p.seen.running, p.seen.waiting, p.seen.kvUsage
		}
		// As the replica actor publishes it: an index that follows the
		// engines' events is not misled by the others' requests.
		v.Shared = sh.shared.Active() && !r.cfg.KVEvents
		g.views = append(g.views, v)
	}
	if r.cfg.AutoCalibrate {
		route.PoolFits(g.views, &g.pooled)
	}
}

// price fills g's candidates' predictions as the routing actor does: for a
// prompt with blocks, each replica asked (every one, or the routing core's
// shortlist past Config.Fanout) answers with g's estimate, and the rest are
// priced from their queues alone, with nothing cached.
func (r *run) price(g *gate, req *policy.Request, now time.Time) {
	if len(req.Blocks) == 0 {
		// The routing actor broadcasts only for a prompt with blocks;
		// without, it prices each replica from its published queue.
		for i := range g.cands {
			g.core.Price(&g.cands[i], g.reps[g.cands[i].Replica], req, nil, now)
		}
		return
	}
	q := estimate.Query{Blocks: req.Blocks, PromptTokens: req.PromptTokens, BlockSize: req.BlockSize}
	g.listed = g.core.Ask(g.listed[:0], g.cands, g.views, req, now)
	shortlisted := g.listed != nil
	if shortlisted && r.onShortlist != nil && g == r.gates[0] {
		full := append([]policy.Candidate(nil), g.cands...)
		for i := range full {
			g.reps[full[i].Replica].est.Estimate(&q, now).Fill(&full[i])
		}
		r.onShortlist(req, full, *g.pcg)
	}
	g.asked = g.asked[:0]
	for range g.cands {
		g.asked = append(g.asked, !shortlisted)
	}
	for _, i := range g.listed {
		g.asked[i] = true
	}
	for i := range g.cands {
		sh := g.reps[g.cands[i].Replica]
		if !g.asked[i] {
			g.core.Price(&g.cands[i], sh, req, nil, now)
			continue
		}
		reply := route.Reply{Reply: sh.est.Estimate(&q, now), Applied: sh.seq}
		g.core.Price(&g.cands[i], sh, req, &reply, now)
	}
}

// shared returns the oracle's cached tokens for a prompt whose full blocks
// hash to blocks: its longest prefix of full blocks that any earlier
// request computed, within one token of the whole prompt as an engine
// computes the last token anyway. Chained hashes name whole prefixes, so
// the recorded set is closed under prefixes and the longest shared prefix
// is the leading run of hits.
func (r *run) shared(blocks []prefix.Hash, promptTokens int) int {
	limit := min(len(blocks), (promptTokens-1)/r.bs)
	n := 0
	for n < limit {
		if _, ok := r.oracle[blocks[n]]; !ok {
			break
		}
		n++
	}
	return n * r.bs
}

// record adds to the oracle's cache the full blocks a request computes: its
// prompt's and its output's but the last token's, which an engine samples
// and never computes, as the engine caches generated blocks (vLLM's
// request block hasher) that a conversation's next turn resends.
func (r *run) record(prompt, output []uint32) {
	r.seq = append(append(r.seq[:0], prompt...), output[:max(len(output)-1, 0)]...)
	r.seqBlk = r.hasher.Chain(r.seqBlk[:0], r.root, r.seq, r.bs)
	for _, h := range r.seqBlk {
		r.oracle[h] = struct{}{}
	}
}

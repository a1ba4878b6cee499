package fleet

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/zeebo/xxh3"

	"github.com/inferrail/inferrail/model/cost"
	"github.com/inferrail/inferrail/model/estimate"
	"github.com/inferrail/inferrail/model/kvevent"
	"github.com/inferrail/inferrail/model/policy"
	"github.com/inferrail/inferrail/model/prefix"
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
	running int
	kvUsage float64
}

// replica is one simulated engine with what the gateway keeps about it.
type replica struct {
	id  string
	key uint64 // policy.Candidate.Key: a stable hash of id
	eng *engine.Engine
	est *estimate.Replica
	// events maps the engine's KV events onto est (Config.KVEvents).
	events *estimate.Events

	// The step in flight: planned at its start, applied at end.
	busy bool
	end  time.Duration
	step engine.StepResult

	inFlight int // routed and not finished
	pending  int // routed and no first token yet

	// now is the engine's state at its last step boundary, which is what
	// a scrape between boundaries reads (Step already holds the state at
	// the end of the step in flight). seen is what the last scrape read,
	// at seenAt.
	now    load
	seen   load
	seenAt time.Duration
	seenOK bool
}

// inflight is the fleet's view of one routed request.
type inflight struct {
	rec       int  // index in run.recs
	assigned  bool // recorded on its replica's estimate.Replica
	firstByte bool
}

// run is one simulation's state. It is owned by Run.
type run struct {
	cfg     *Config
	reps    []*replica
	pol     policy.Policy
	aware   bool       // the policy routes on estimates (actors/fleet.cacheAware)
	pcg     *rand.PCG  // the policy's random source, behind rng
	rng     *rand.Rand // the policy's
	model   cost.Model // prices the prefill queued on a replica
	root    prefix.Hash
	bs      int
	scrape  time.Duration
	maxAge  time.Duration
	feed    *feed
	next    arrival
	hasNext bool
	arrived int

	hasher prefix.Hasher
	blocks []prefix.Hash
	cands  []policy.Candidate
	oracle map[prefix.Hash]struct{}
	seq    []uint32      // scratch: a prompt and its output, for the oracle
	seqBlk []prefix.Hash // scratch: their blocks

	// The shortlist (Config.Fanout): the routing actor's memory of which
	// replicas recently got a root prefix, and scratch space.
	recent map[prefix.Hash][recentOwners]uint64
	hinted []bool
	listed []int

	now        time.Duration
	nextScrape time.Duration
	steps      int
	idleSteps  int // consecutive steps that did nothing, to catch a stuck engine

	recs []Record

	// onPick, when set (tests), sees every routing decision.
	onPick func(r *run, req *policy.Request, cands []policy.Candidate, winner int)
	// onShortlist, when set (tests), sees every decision made on a
	// shortlist: the candidates with every replica asked, and the draw the
	// policy's Pick takes, before the pick.
	onShortlist func(req *policy.Request, full []policy.Candidate, draw uint64)
}

func newRun(cfg *Config) (*run, error) {
	pol, err := cfg.policy()
	if err != nil {
		return nil, err
	}
	model := cfg.Model
	if model == "" {
		model = DefaultModel
	}
	pcg := rand.NewPCG(cfg.Seed, streamRouting)
	r := &run{
		cfg:    cfg,
		pol:    pol,
		aware:  policy.CacheAware(pol.Name()),
		pcg:    pcg,
		rng:    rand.New(pcg),
		model:  cfg.costParams().Model,
		root:   prefix.Root(model, "", ""),
		bs:     cfg.Engine.BlockSize,
		scrape: cfg.ScrapeInterval,
		maxAge: cfg.MaxAge,
		oracle: make(map[prefix.Hash]struct{}),
		recent: make(map[prefix.Hash][recentOwners]uint64),
	}
	if r.scrape == 0 {
		r.scrape = DefaultScrapeInterval
	}
	if r.maxAge == 0 {
		r.maxAge = DefaultMaxAge
	}
	for i := range cfg.Replicas {
		eng, err := engine.New(cfg.Engine)
		if err != nil {
			return nil, err
		}
		id := "r" + strconv.Itoa(i)
		r.reps = append(r.reps, &replica{
			id:  id,
			key: policy.ReplicaKey(id),
			eng: eng,
			// The gateway sizes a replica's index by the KV capacity its
			// engine reports.
			est: estimate.New(cfg.Engine.NumBlocks),
		})
		if cfg.KVEvents {
			r.reps[i].events = estimate.NewEvents(model, estimate.EventChecks{})
		}
	}
	r.feed = newFeed(cfg.Workload, cfg.Seed, cfg.Rate)
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
			return nil
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
		case evScrape:
			for _, p := range r.reps {
				p.seen, p.seenAt, p.seenOK = p.now, at, true
			}
			r.nextScrape += r.scrape
		case evArrival:
			if err := r.arrive(); err != nil {
				return err
			}
		}
	}
}

// startStep plans p's next step at the current time.
func (r *run) startStep(p *replica) error {
	st := p.eng.Stats()
	p.now = load{running: st.Running, kvUsage: st.KVUsage}
	p.step = p.eng.Step(r.now)
	if p.events == nil {
		p.step.Events = nil // nobody reads them; drop them early
	}
	p.end = r.now + p.step.Duration
	p.busy = true
	r.steps++
	if p.step.ScheduledTokens == 0 && len(p.step.Outputs) == 0 {
		// A step may only drain KV events; a run of steps that does
		// nothing at all means the engine cannot make progress.
		if r.idleSteps++; r.idleSteps > 1000 {
			return fmt.Errorf("BUG: replica %s: engine makes no progress at %v (%+v)", p.id, r.now, st)
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
			f.firstByte = true
			rec.FirstToken = o.Req.FirstToken
			rec.CachedTokens = o.Req.CachedTokens
			p.pending--
			if f.assigned {
				p.est.FirstByte(now)
			}
		}
		if o.Done {
			if !f.firstByte {
				// The gateway settles an attempt that ends without a
				// first byte the same way (replica.attemptEnded).
				f.firstByte = true
				p.pending--
				if f.assigned {
					p.est.FirstByte(now)
				}
			}
			rec.Finished = o.Req.Finished
			rec.CachedTokens = o.Req.CachedTokens
			rec.Preemptions = o.Req.Preemptions
			rec.OutputTokens = o.Req.Generated
			p.inFlight--
		}
	}
	if p.events != nil && len(p.step.Events) > 0 {
		// The engine publishes a step's events as it ends.
		p.events.Apply(&kvevent.Batch{Events: p.step.Events}, p.est.Index)
	}
	p.step = engine.StepResult{}
	p.busy = false
	if !p.eng.Idle() {
		return r.startStep(p)
	}
	return nil
}

// arrive routes the next request as the gateway would and hands it to the
// chosen engine.
func (r *run) arrive() error {
	in := r.next
	r.arrived++
	r.pull()

	idx := len(r.recs)
	id := strconv.Itoa(idx)
	r.recs = append(r.recs, Record{
		Class:        in.class,
		Arrival:      in.at,
		PromptTokens: len(in.prompt),
		Replica:      -1,
		WarmUp:       in.at < r.cfg.WarmUp,
	})
	rec := &r.recs[idx]

	r.blocks = r.hasher.Chain(r.blocks[:0], r.root, in.prompt, r.bs)
	rec.OracleTokens = r.shared(r.blocks, len(in.prompt))
	r.record(in.prompt, in.output)

	now := epoch.Add(r.now)
	q := estimate.Query{Blocks: r.blocks, PromptTokens: len(in.prompt), BlockSize: r.bs}
	r.cands = r.cands[:0]
	for i, p := range r.reps {
		if r.cfg.MaxConcurrency > 0 && p.inFlight >= r.cfg.MaxConcurrency {
			continue // the breaker: no room (replica.Counters.HasRoom)
		}
		r.cands = append(r.cands, r.candidate(i, p, &q, now))
	}
	if len(r.cands) == 0 {
		rec.Rejected = true
		return nil
	}
	key := in.session
	if key == 0 {
		key = xxh3.HashString(id)
	}
	preq := policy.Request{
		Key:          key,
		PromptTokens: len(in.prompt),
		Blocks:       r.blocks,
		BlockSize:    r.bs,
		SessionKey:   in.session,
		Now:          now,
	}
	if r.shortlisting() {
		r.shortlist(&preq, now)
	}
	w, err := r.pol.Pick(&preq, r.cands, r.rng)
	if err != nil {
		return fmt.Errorf("request %s: pick: %w", id, err)
	}
	if r.onPick != nil {
		r.onPick(r, &preq, r.cands, w)
	}
	c := &r.cands[w]
	p := r.reps[c.Replica]
	rec.Replica = c.Replica
	rec.PredictedTokens = min(c.CachedTokens, len(in.prompt))
	f := &inflight{rec: idx}
	if r.aware && len(r.blocks) > 0 {
		// As routing.assign: the winner's estimated prefill joins its
		// queue and the prompt's blocks its index. The receipt is only
		// needed to take back a failed attempt, and a simulated engine
		// never fails one.
		est := r.model.Estimate(len(in.prompt), c.CachedTokens, c.QueuedPrefill, c.Running)
		p.est.Assign(r.blocks, est.Prefill, now)
		f.assigned = true
		rec.Predicted = true
		r.remember(r.blocks, c.Key)
	}
	p.inFlight++
	p.pending++

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

// candidate builds replica i's candidate as the gateway's routing actor
// does (routing.candidate and routing.price): its own counts for every
// policy; for the cache-aware ones also its key, its running requests (the
// engine's while the last scrape is fresh, else those past their first
// token) with the engine's KV usage, and the replica's estimate for the
// prompt.
func (r *run) candidate(i int, p *replica, q *estimate.Query, now time.Time) policy.Candidate {
	c := policy.Candidate{Replica: i, InFlight: p.inFlight, Pending: p.pending}
	if !r.aware {
		return c
	}
	c.Key = p.key
	c.Running = max(c.InFlight-c.Pending, 0)
	if p.seenOK && r.now-p.seenAt <= r.maxAge {
		c.Running, c.KVUsage, c.Fresh = p.seen.running, p.seen.kvUsage, true
	}
	if len(q.Blocks) > 0 {
		// The routing actor broadcasts only for a prompt with blocks;
		// without, it prices the replica from its published queue, which
		// the estimate also reports.
		p.est.Estimate(q, now).Fill(&c)
	} else {
		c.QueuedPrefill = p.est.Queue.Queued(now)
	}
	return c
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

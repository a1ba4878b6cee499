package policy

import (
	"math"
	"math/rand/v2"
	"time"

	"github.com/inferrail/inferrail/model/cost"
)

var _ Explainer = (*CostModel)(nil)

// HotPrefixParams configures hot-prefix replication (routing.hot_prefix).
type HotPrefixParams struct {
	// Enabled turns replication on.
	Enabled bool
	// Blocks is how many leading blocks make a root prefix (fewer when the
	// prompt has fewer). At most 0 takes 16.
	Blocks int
	// Window is the sketch's decay window. At most 0 takes 10s.
	Window time.Duration
	// Utilization is the share of one replica's time a root prefix may need
	// before it gets another owner. At most 0 takes 0.5.
	Utilization float64
	// SketchDepth and SketchWidth size the count-min sketch; at most 0
	// takes 4 rows of 2048 counters (64 KiB).
	SketchDepth, SketchWidth int
}

// CostModelParams configures cost_model: the routing section's epsilon,
// kappa, short_prompt_tokens, session_affinity, cost_model and hot_prefix.
type CostModelParams struct {
	// Model prices prefill: cost.Model(cfg.CostModel) converts.
	Model cost.Model
	// Epsilon bounds load: no replica gets more than
	// ceil((1 + Epsilon) * (in_flight + 1) / n) requests. Negative is 0.
	Epsilon float64
	// Kappa is the KV usage above which a replica is set aside for prompts
	// with more than ShortPromptTokens to compute there, unless all are.
	Kappa             float64
	ShortPromptTokens int
	// SessionAffinity sends a conversation back to its last replica while
	// the guards allow it.
	SessionAffinity bool
	// SessionSlots sizes the session table (rounded up to a power of two);
	// at most 0 takes 16384. Conversations that collide in it forget their
	// replica, which only costs affinity.
	SessionSlots int
	// HotPrefix configures hot-prefix replication.
	HotPrefix HotPrefixParams
	// ColdRendezvous places a cold prompt on its first block's rendezvous
	// owner among the near-best (see CostModel), so that several gateway
	// instances place a new prefix alike.
	ColdRendezvous bool
	// ColdWhenShared turns the rendezvous on while a candidate's engine is
	// found shared with another router (Candidate.Shared, anyShared).
	ColdWhenShared bool
	// SLOAdmission refuses a request with an SLO (Request.SLO) that no
	// candidate is predicted to meet (Admits): Pick returns ErrNotAdmitted.
	SLOAdmission bool
	// AdmissionWaitFactor multiplies a replica's wait when the admission
	// judges it (see Admits); below 1 is 1.
	AdmissionWaitFactor float64
	// RecomputeWeight prices the prefill a candidate would compute beyond
	// the least any allowed candidate would (see CostModel): the fleet's
	// extra work, which near capacity delays the requests behind it.
	// Negative is 0, which prices this request's time to first token alone.
	RecomputeWeight float64
}

// DefaultCostModelParams returns the routing section's defaults.
func DefaultCostModelParams() CostModelParams {
	return CostModelParams{
		Model:               cost.Default(),
		Epsilon:             1.0,
		Kappa:               0.92,
		ShortPromptTokens:   256,
		ColdWhenShared:      true,
		RecomputeWeight:     2,
		SLOAdmission:        true,
		AdmissionWaitFactor: 3,
		HotPrefix: HotPrefixParams{
			Enabled:     true,
			Blocks:      16,
			Window:      10 * time.Second,
			Utilization: 0.5,
		},
	}
}

// CostModel picks the candidate with the lowest estimated time to first
// token (cost.Model.Estimate) among those the load guards allow:
//
//   - bounded load: none that would hold more than cost.Cap requests;
//   - KV pressure: none whose fresh KV usage exceeds Kappa for a prompt with
//     more than ShortPromptTokens to compute there, unless every candidate
//     within the cap does (the guard is then waived), and only when some
//     candidate within the cap that is not under pressure holds all but at
//     most ShortPromptTokens of what the pressured one has cached. Moving a
//     prompt off the replica holding its prefix makes another replica
//     recompute it, which under sustained load costs the fleet more than
//     the pressure it relieves.
//
// A root prefix (the first HotPrefix.Blocks blocks) whose prefill demand,
// measured in a decaying count-min sketch, needs more than
// HotPrefix.Utilization of a replica gets cost.Owners owners, the highest
// rendezvous weights for the root; each owner is priced as holding the
// longest part of the root any owner holds, so the estimate shares a hot
// prefix among its owners by their queues. With SessionAffinity, a request
// naming its conversation goes back to the conversation's last replica
// (from the policy's table, or Candidate.Session) while the guards allow.
// Ties go to fewer in flight, then to chance.
//
// With an SLO on the request, the candidates predicted to meet it come
// before those predicted to miss it, and with SLOAdmission a request none
// is predicted to meet is refused (costslo.go).
//
// Each candidate's estimate is then priced RecomputeWeight times the
// prefill it would compute beyond the candidate that would compute the
// least (the one holding the most of the prompt, all else equal); a
// candidate without a cache prediction (Candidate.Unpredicted) is priced
// on its estimate alone, as what it holds is unknown. The
// estimate alone minimizes this request's time to first token, and sends
// it off the replica holding its prefix whenever that replica's queue is
// longer than the recompute: the other replica's prefill is then spent
// twice over the fleet, and near capacity every request behind it waits
// for it. The estimate alone kept less of the cache than llm-d's "sticky
// until saturated" in 8 of 10 cells (bench/results/llmd-2026-12-01.md) and
// collapsed first under overload; a weight of 2 kept more requests within
// the SLO than that composition on all five workloads at the rates where
// both fall below 100% (bench/results/capacity-2026-12-08.md, its last section).
//
// With ColdRendezvous, or while a candidate's engine is found shared with
// another router (Candidate.Shared), a cold prompt, of which no candidate the guards
// allow is predicted to hold a single token, goes to the highest
// rendezvous weight for its first block among the near-best: those whose
// estimate is within half a cold prefill of the prompt (the best one's) of
// the lowest. Several gateway instances see the same engines but each its
// own queue of assignments, so their lowest estimates differ; the
// rendezvous makes them place a new prefix alike, where chance and their
// own loads would scatter it (issue 17). The band bounds what agreeing
// costs: at most half a prefill more, once, against recomputing the prefix
// on every replica it scattered to. A prompt whose root the hot-prefix
// sketch saw lately (coldSeen) is not new but evicted, and is left to the
// estimate, so that evicted prefixes move to the replicas with room rather
// than back to an owner that cannot hold them. It is off by default: it
// still ignores the in-flight tie-break for new prefixes, which costs a lone
// instance hit rate and tail latency under load (W2 0.730 → 0.698, W1 p99
// TTFT 818 ms → 987 ms in bench/results/instances-2026-12-01.md).
//
// Each Pick adds the winner's estimated prefill to the sketch under the
// prompt's root and records the winner for the conversation; Explain does
// neither. A CostModel is owned by one routing actor and is not safe for
// concurrent use.
type CostModel struct {
	p        CostModelParams
	sketch   *cost.Sketch
	sessions []sessionSlot
	scratch  costScratch
	last     Decision
}

type sessionSlot struct{ session, key uint64 }

// NewCostModel returns a cost_model policy with params p, zero values
// taking the defaults noted on the fields.
func NewCostModel(p CostModelParams) *CostModel {
	d := DefaultCostModelParams().HotPrefix
	hp := &p.HotPrefix
	if hp.Blocks <= 0 {
		hp.Blocks = d.Blocks
	}
	if hp.Window <= 0 {
		hp.Window = d.Window
	}
	if !(hp.Utilization > 0) {
		hp.Utilization = d.Utilization
	}
	if hp.SketchDepth <= 0 {
		hp.SketchDepth = 4
	}
	if hp.SketchWidth <= 0 {
		hp.SketchWidth = 2048
	}
	if p.SessionSlots <= 0 {
		p.SessionSlots = 1 << 14
	}
	slots := 1
	for slots < p.SessionSlots {
		slots <<= 1
	}
	p.SessionSlots = slots
	m := &CostModel{p: p, last: Decision{Winner: -1}}
	if hp.Enabled {
		m.sketch = cost.NewSketch(hp.SketchDepth, hp.SketchWidth, hp.Window)
	}
	if p.SessionAffinity {
		m.sessions = make([]sessionSlot, slots)
	}
	return m
}

// Name returns "cost_model".
func (*CostModel) Name() string { return "cost_model" }

// Params returns the policy's params, defaults filled in.
func (p *CostModel) Params() CostModelParams { return p.p }

// Last returns the decision of the latest Pick, for metrics
// (routing_guards_total, routing_steered_total).
func (p *CostModel) Last() Decision { return p.last }

// Pick returns the candidate with the lowest estimate the guards allow,
// and records the decision. It draws one rng.Uint64().
func (p *CostModel) Pick(req *Request, cands []Candidate, rng *rand.Rand) (int, error) {
	if len(cands) == 0 {
		p.last = Decision{Winner: -1}
		return -1, ErrNoCandidate
	}
	if p.p.SLOAdmission && !Admits(req, cands, &p.p.Model, p.p.AdmissionWaitFactor) {
		p.last = Decision{Winner: -1}
		return -1, ErrNotAdmitted
	}
	d := p.decide(req, cands, rng.Uint64(), &p.scratch, nil)
	p.last = d
	p.Commit(req, cands, d.Winner)
	return d.Winner, nil
}

// Explain returns what Pick would decide with draw, changing nothing.
func (p *CostModel) Explain(req *Request, cands []Candidate, draw uint64) (Explanation, error) {
	ex := Explanation{Policy: p.Name(), Workings: WorkingsEstimate, Decision: Decision{Winner: -1}}
	if len(cands) == 0 {
		return ex, ErrNoCandidate
	}
	ex.Cands = explainBase(cands)
	var scratch costScratch
	ex.Decision = p.decide(req, cands, draw, &scratch, ex.Cands)
	return ex, nil
}

// ExplainAmong is DecideAmong explained: what it decides with draw, and
// every candidate's estimate, changing nothing. The candidates not at
// positions in keep Guard GuardNone; the caller knows which filter set
// them aside.
func (p *CostModel) ExplainAmong(req *Request, cands []Candidate, in []int, draw uint64) Explanation {
	ex := Explanation{Policy: p.Name(), Workings: WorkingsEstimate, Decision: Decision{Winner: -1}, Cands: explainBase(cands)}
	if len(in) == 0 {
		return ex
	}
	var s costScratch
	among(&s, cands, in)
	p.rank(req, cands, draw, &s, ex.Cands, &ex.Decision)
	for i := range ex.Cands {
		if ex.Cands[i].Guard == guardFiltered {
			ex.Cands[i].Guard = GuardNone
		}
	}
	return ex
}

// DecideAmong is cost_model's decision without its load guards: the
// candidate with the lowest estimate among those at positions in (the
// others set aside before it, by the scheduling pipeline's filters), with
// hot-prefix credit, session affinity and the tie-breaks of Pick. Hot
// prefixes are still measured over every candidate, as in Pick. draw is the
// decision's one random draw. The Decision's guard fields (Cap,
// BoundedLoad, KVPressure, KVWaived) are left zero, and Winner is -1 when
// in is empty. It changes no state: Commit records the decision.
func (p *CostModel) DecideAmong(req *Request, cands []Candidate, in []int, draw uint64) Decision {
	if len(in) == 0 {
		return Decision{Winner: -1}
	}
	s := &p.scratch
	among(s, cands, in)
	d := Decision{Winner: -1}
	p.rank(req, cands, draw, s, nil, &d)
	return d
}

// among marks in s the candidates not at positions in as set aside.
func among(s *costScratch, cands []Candidate, in []int) {
	s.guard = s.guard[:0]
	for range cands {
		s.guard = append(s.guard, guardFiltered)
	}
	for _, i := range in {
		s.guard[i] = GuardNone
	}
}

// Commit records a decision whose winner is cands[winner]: its estimated
// prefill goes into the hot-prefix sketch under the prompt's root, and the
// winner becomes the conversation's replica. Pick commits its own
// decisions; a caller of DecideAmong commits the one it routes by.
func (p *CostModel) Commit(req *Request, cands []Candidate, winner int) {
	w := &cands[winner]
	if p.sketch != nil && len(req.Blocks) > 0 {
		c := min(max(w.CachedTokens, 0), max(req.PromptTokens, 0))
		p.sketch.Add(req.Now, p.root(req), w.Cost(&p.p.Model).PrefillSecs(req.PromptTokens-c, c))
	}
	if p.sessions != nil && req.SessionKey != 0 {
		p.sessions[p.slot(req.SessionKey)] = sessionSlot{req.SessionKey, candKey(w)}
	}
}

// root is the key of the prompt's root prefix: its first HotPrefix.Blocks
// blocks, or all it has. req.Blocks must not be empty.
func (p *CostModel) root(req *Request) uint64 {
	return hashKey(req.Blocks[min(len(req.Blocks), p.p.HotPrefix.Blocks)-1])
}

func (p *CostModel) slot(session uint64) int { return int(mix(session) & uint64(len(p.sessions)-1)) }

// session returns the replica key remembered for the request's
// conversation.
func (p *CostModel) session(req *Request) (uint64, bool) {
	if p.sessions == nil || req.SessionKey == 0 {
		return 0, false
	}
	s := p.sessions[p.slot(req.SessionKey)]
	return s.key, s.session == req.SessionKey
}

// costScratch is the working memory of one decision.
type costScratch struct {
	weights         []uint64 // per candidate, for the hot prefix
	selected        []uint64 // weights reordered by kthLargest
	all, within, ok []int
	guard           []Guard
}

// guardFiltered marks, in DecideAmong, a candidate a filter set aside. It
// never reaches a Decision or an Explanation.
const guardFiltered Guard = "filtered"

// BoundedLoad is cost_model's bounded-load guard over the candidates at
// positions in: it appends to dst the positions of those that may take one
// more request under cost.Cap of the requests in flight on them all, and
// returns the cap. The least loaded always may. A candidate's load is the
// larger of this gateway's requests in flight there and its engine's fresh
// running and waiting count (guardLoad): with several gateway instances in
// front of the same engines, each instance's own count is a fraction of
// the load, and a cap from fractions set aside the replica holding the
// prefix far too early (in the fleet simulator two instances kept 0.966
// of one instance's hit rate on W1 by their own counts, 0.999 by the
// engines'; bench/results/instances-2026-12-01.md).
func BoundedLoad(dst []int, cands []Candidate, in []int, epsilon float64) ([]int, int) {
	total := 0
	for _, i := range in {
		total += guardLoad(&cands[i])
	}
	capN := cost.Cap(total, len(in), epsilon)
	for _, i := range in {
		if cost.WithinCap(guardLoad(&cands[i]), capN) {
			dst = append(dst, i)
		}
	}
	return dst, capN
}

// guardLoad is the load the bounded-load guard counts on c: the requests
// this gateway has in flight there, or, when more, the requests its
// engine last reported running and waiting. An engine behind several
// gateway instances serves all of theirs, and each instance's own count
// is a share of it.
func guardLoad(c *Candidate) int {
	n := max(c.InFlight, 0)
	if c.Fresh {
		n = max(n, c.Running+c.Waiting)
	}
	return n
}

// KVPressure is cost_model's KV pressure guard over the candidates at
// positions in (those within the bounded-load cap, in cost_model): it
// appends to dst the positions of those it does not set aside. It sets
// aside a candidate whose fresh KV usage is over kappa for a prompt of
// prompt tokens with more than short to compute there, unless every
// candidate is (then it reports waived and keeps them all), and only when
// another candidate not under pressure holds all but at most short of what
// it has cached.
func KVPressure(dst []int, cands []Candidate, in []int, prompt int, kappa float64, short int) ([]int, bool) {
	prompt = max(prompt, 0)
	pressured, bestFree := 0, -1
	for _, i := range in {
		c := &cands[i]
		if own := cachedTokens(c, prompt); cost.Pressured(c.KVUsage, c.Fresh, kappa, prompt-own, short) {
			pressured++
		} else {
			bestFree = max(bestFree, own)
		}
	}
	if len(in) > 0 && pressured == len(in) {
		return append(dst, in...), true
	}
	for _, i := range in {
		c := &cands[i]
		own := cachedTokens(c, prompt)
		if own-bestFree <= short && cost.Pressured(c.KVUsage, c.Fresh, kappa, prompt-own, short) {
			continue
		}
		dst = append(dst, i)
	}
	return dst, false
}

// cachedTokens is how many of a prompt of prompt tokens c is predicted to
// hold.
func cachedTokens(c *Candidate, prompt int) int { return min(max(c.CachedTokens, 0), prompt) }

// rank is one candidate's place in the order: estimate, then fewer in
// flight, then chance.
type rank struct {
	i     int
	total time.Duration
	est   cost.Estimate
}

// ahead reports whether candidate a (with total ta) comes before b.
func ahead(cands []Candidate, draw uint64, a int, ta time.Duration, b int, tb time.Duration) bool {
	if ta != tb {
		return ta < tb
	}
	return fewerThenChance(cands, a, b, draw)
}

// decide is the decision, a pure function of its inputs and the policy's
// state (read only): the load guards, then rank; s is working memory.
func (p *CostModel) decide(req *Request, cands []Candidate, draw uint64, s *costScratch, ex []Explained) Decision {
	s.all = s.all[:0]
	for i := range cands {
		s.all = append(s.all, i)
	}
	var d Decision
	s.within, d.Cap = BoundedLoad(s.within[:0], cands, s.all, p.p.Epsilon)
	s.ok, d.KVWaived = KVPressure(s.ok[:0], cands, s.within, req.PromptTokens, p.p.Kappa, p.p.ShortPromptTokens)
	s.guard = s.guard[:0]
	for range cands {
		s.guard = append(s.guard, GuardBoundedLoad)
	}
	for _, i := range s.within {
		s.guard[i] = GuardKVPressure
	}
	for _, i := range s.ok {
		s.guard[i] = GuardNone
	}
	d.BoundedLoad = len(cands) - len(s.within)
	d.KVPressure = len(s.within) - len(s.ok)
	p.rank(req, cands, draw, s, ex, &d)
	return d
}

// rank decides among the candidates s.guard does not set aside: the lowest
// estimate with hot-prefix credit, unless the conversation's replica is
// among them, ties to fewer in flight, then to chance. It sets d's Winner,
// Steer, Term and Owners, and for an explanation ex each candidate's
// workings.
func (p *CostModel) rank(req *Request, cands []Candidate, draw uint64, s *costScratch, ex []Explained, d *Decision) {
	n := len(cands)
	base := p.p.Model // a local copy: priced through it, the estimate stays inlined
	prompt := max(req.PromptTokens, 0)

	// Hot prefix: the owners are the k highest rendezvous weights for the
	// root, at or above threshold, credited with the most of the root any
	// of them holds.
	var root, threshold uint64
	credit := 0
	if p.sketch != nil && len(req.Blocks) > 0 {
		root = p.root(req)
		if k := cost.Owners(p.sketch.Rate(req.Now, root), p.p.HotPrefix.Utilization, n); k > 1 {
			d.Owners = k
			rb := min(len(req.Blocks), p.p.HotPrefix.Blocks)
			rootTokens := min(rb*blockSize(req), prompt)
			// Each candidate's weight once, in s.weights; the threshold is
			// selected from a copy.
			w := s.weights[:0]
			for i := range cands {
				w = append(w, hrw(root, candKey(&cands[i])))
			}
			s.weights = w
			s.selected = append(s.selected[:0], w...)
			threshold = kthLargest(s.selected, k)
			for i := range cands {
				if w[i] >= threshold {
					credit = max(credit, min(cands[i].CachedTokens, rootTokens))
				}
			}
		}
	}
	owner := func(i int) bool { return d.Owners > 0 && s.weights[i] >= threshold }

	// The tokens each candidate is priced as holding: its own, or for a
	// hot prefix's owner the most of the root any owner holds.
	priced := func(i int) int {
		pt := cachedTokens(&cands[i], prompt)
		if owner(i) {
			pt = max(pt, min(credit, prompt))
		}
		return pt
	}
	// The least prefill any allowed candidate with a cache prediction would
	// compute, for the recompute price. Under one cost model the prefill
	// falls as the priced tokens rise, so it is the prefill of the most
	// priced; a replica with its own model (Candidate.Model) is priced
	// apart.
	weight := recomputeFixed(p.p.RecomputeWeight)
	least := time.Duration(-1)
	if weight > 0 {
		most := -1
		for i := range cands {
			c := &cands[i]
			if s.guard[i] != GuardNone || c.Unpredicted {
				continue
			}
			if pt := priced(i); c.Model == nil {
				most = max(most, pt)
			} else if f := c.Model.Prefill(prompt-pt, pt); least < 0 || f < least {
				least = f
			}
		}
		if most >= 0 {
			if f := base.Prefill(prompt-most, most); least < 0 || f < least {
				least = f
			}
		}
	}

	sessKey, sessOK := p.session(req)
	best, second, raw, sess := rank{i: -1}, rank{i: -1}, rank{i: -1}, rank{i: -1}
	for i := range cands {
		c := &cands[i]
		own := cachedTokens(c, prompt)
		pt := priced(i)
		isOwner := owner(i)
		m := &base
		if c.Model != nil {
			m = c.Model
		}
		est := m.Estimate(prompt, pt, c.QueuedPrefill, c.Running)
		var extra time.Duration
		if least >= 0 && !c.Unpredicted {
			extra = recompute(weight, est.Prefill-least)
		}
		t := est.Total() + extra
		miss := hasSLO(req) && misses(req, m, c, est.Total()) // the estimate's own wait
		if miss {
			t += sloTier
		}
		guard := s.guard[i]
		isSess := p.p.SessionAffinity && (c.Session || sessOK && candKey(c) == sessKey)
		if ex != nil {
			e := &ex[i]
			e.PricedTokens, e.Owner, e.Estimate, e.Guard = pt, isOwner, est, guard
			e.Session, e.Recompute, e.MissesSLO = isSess, extra, miss
		}
		if guard != GuardNone {
			continue
		}
		r := rank{i, t, est}
		switch {
		case best.i < 0 || ahead(cands, draw, i, t, best.i, best.total):
			best, second = r, best
		case second.i < 0 || ahead(cands, draw, i, t, second.i, second.total):
			second = r
		}
		if isSess && (sess.i < 0 || ahead(cands, draw, i, t, sess.i, sess.total)) {
			sess = r
		}
		if d.Owners > 0 {
			rt := t
			if pt != own {
				re := m.Estimate(prompt, own, c.QueuedPrefill, c.Running)
				rt = re.Total()
				if least >= 0 && !c.Unpredicted {
					rt += recompute(weight, re.Prefill-least)
				}
			}
			if raw.i < 0 || ahead(cands, draw, i, rt, raw.i, raw.total) {
				raw = rank{i: i, total: rt}
			}
		}
	}
	if best.i < 0 {
		// Unreachable: the least loaded candidate is always within the cap,
		// the KV guard is waived when it would set all aside, and
		// DecideAmong returns before rank when it has no candidate.
		panic("BUG: policy: cost_model: no candidate within the guards")
	}
	win, runner := best, second
	switch {
	case sess.i >= 0:
		d.Steer = SteerSession
		if sess.i != best.i {
			win, runner = sess, best
		}
	case d.Owners > 0 && raw.i != best.i && cachedTokens(&cands[best.i], prompt) < min(credit, prompt):
		d.Steer = SteerHotPrefix
	default:
		if c := p.cold(req, cands, s.guard, best); c.i >= 0 && c.i != best.i {
			d.Steer = SteerCold
			win, runner = c, best
		}
	}
	d.Winner = win.i
	if runner.i >= 0 {
		d.Term = term(win.est, runner.est)
	}
}

// cold is the cold-prefix rendezvous (see CostModel), when on: for a prompt with a
// full block of which no candidate guard allows is predicted to hold any
// token, and whose root prefix the hot-prefix sketch has not seen lately,
// the candidate of highest rendezvous weight for its first block among
// those within half a cold prefill of best's estimate; rank{i: -1} for a
// prompt that is not cold.
func (p *CostModel) cold(req *Request, cands []Candidate, guard []Guard, best rank) rank {
	shared := p.p.ColdWhenShared && anyShared(cands)
	if !p.p.ColdRendezvous && !shared || len(req.Blocks) == 0 {
		return rank{i: -1}
	}
	if !shared && p.sketch != nil && p.sketch.Count(req.Now, p.root(req)) > coldSeen {
		return rank{i: -1}
	}
	for i := range cands {
		if guard[i] == GuardNone && cands[i].CachedTokens > 0 {
			return rank{i: -1}
		}
	}
	prompt := max(req.PromptTokens, 0)
	limit := best.total + best.est.Prefill/coldBand
	root := hashKey(req.Blocks[0])
	win, weight := rank{i: -1}, uint64(0)
	for i := range cands {
		c := &cands[i]
		if guard[i] != GuardNone {
			continue
		}
		est := c.Cost(&p.p.Model).Estimate(prompt, 0, c.QueuedPrefill, c.Running)
		if t := est.Total(); t <= limit {
			if w := hrw(root, candKey(c)); win.i < 0 || w > weight {
				win, weight = rank{i, t, est}, w
			}
		}
	}
	return win
}

// anyShared reports whether a candidate's engine is shared with another
// router (Candidate.Shared): with ColdWhenShared the rendezvous is then on
// whatever ColdRendezvous says. It is the agreement several instances without KV
// events need, and a lone instance, whose engines are never found shared,
// never pays for it (issue 32). While it holds, a prompt seen lately and
// predicted nowhere also goes to its owner: most such prompts were placed
// by the other router, not evicted, and the first ones an instance saw
// were placed before it found the engines shared. In the fleet simulator
// (bench/agree TestSharedEnginesRendezvous: two instances, 12 system
// prompts on three engines of 400 blocks) that took two instances from
// 0.845× one's hit rate to 0.909×.
func anyShared(cands []Candidate) bool {
	for i := range cands {
		if cands[i].Shared {
			return true
		}
	}
	return false
}

// coldSeen is the demand (prefill seconds, decayed) the hot-prefix sketch
// must hold for a prompt's root for the rendezvous to take it as seen
// lately and leave it to the estimate: a root routed once with a prefill of
// 10 ms, within about 9 windows (90 s at the default 10 s). Such a prompt,
// predicted nowhere now, was evicted. Rendezvous sends it back to the owner
// that evicted it whatever room the others have, so that an owner of more
// prefixes than it holds evicts forever while another has room: in
// TestTwoGatewaysAgree's fleet (12 prefixes, 3 engines of 4), whose
// sequential client leaves every estimate tied, the owners held 8, 3 and 1
// of them and one gateway's hit rate fell from 0.871 to 0.698 with the
// rendezvous; placed by the estimate instead, evicted prefixes move to the
// engines with room (0.904). A prefix new to the gateway is still placed by
// the rendezvous, which is where several gateway instances without KV
// events agree: its first placement.
const coldSeen = 1e-6

// coldBand divides a cold prompt's prefill into the band of the
// rendezvous: within half a prefill of the lowest estimate. In the fleet
// simulator (one seed of W1 and W2, two instances) a whole prefill bought
// two instances no more than half did, and no band at all (ties only) left
// their picks nearly as scattered as without the rendezvous.
const coldBand = 2

// term returns the term on which w leads r the most, TermNone if on none.
func term(w, r cost.Estimate) Term {
	t, lead := TermNone, time.Duration(0)
	if x := r.Queue - w.Queue; x > lead {
		t, lead = TermQueue, x
	}
	if x := r.Prefill - w.Prefill; x > lead {
		t, lead = TermPrefill, x
	}
	if x := r.Tier - w.Tier; x > lead {
		t = TermTierLoad
	}
	return t
}

// recomputeScale is the fixed-point scale of a recompute weight: weights
// are priced to 1/1024, in integer arithmetic (a float multiply per
// candidate cost the decision a tenth of its time).
const recomputeScale = 10

// recomputeFixed is weight in fixed point, at most math.MaxInt32 (a
// weight of two million).
func recomputeFixed(weight float64) int64 {
	return int64(min(max(weight, 0)*(1<<recomputeScale), math.MaxInt32))
}

// recompute is the recompute price of extra prefill at fixed-point weight
// w: w times it, saturating, and 0 for none.
func recompute(w int64, extra time.Duration) time.Duration {
	if extra <= 0 || w <= 0 {
		return 0
	}
	if int64(extra) > math.MaxInt64/w {
		return math.MaxInt64
	}
	return time.Duration(int64(extra) * w >> recomputeScale)
}

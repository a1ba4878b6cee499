package sched

import (
	"math"

	"github.com/inferrail/inferrail/model/policy"
)

// endpointsParam is llm-d's pickers' one parameter: how many endpoints
// they return, the rest as fallbacks. Inferrail routes to one replica and
// picks again for a retry.
var endpointsParam = Param{Name: "maxNumOfEndpoints", Default: 1, Doc: "Endpoints llm-d returns; Inferrail routes to one and picks again on a retry, so more only warns."}

func decodeEndpoints(f *Fields) {
	switch n := f.Int("maxNumOfEndpoints"); {
	case n < 1:
		f.Fail("maxNumOfEndpoints", "want at least 1, got %d", n)
	case n > 1:
		f.Warn("maxNumOfEndpoints", "Inferrail routes to one replica and picks again on a retry; %d has no effect", n)
	}
}

var maxScorePicker = Type{
	Name: "max-score-picker", Kind: KindPicker,
	Doc:    "Picks the best total score; ties uniformly at random.",
	Params: []Param{endpointsParam},
	New:    func(f *Fields) any { decodeEndpoints(f); return maxScore{} },
}

type maxScore struct{}

// Pick finds the best total and how many candidates share it, then
// draws one of those ties uniformly (policy.PickTie).
func (maxScore) Pick(c *Cycle, in []int, totals []float64) int {
	best, ties := 0, 1
	for k := 1; k < len(in); k++ {
		switch t := totals[k]; {
		case t > totals[best]:
			best, ties = k, 1
		case t == totals[best]:
			ties++
		}
	}
	top := totals[best]
	return in[policy.PickTie(c.Rng, best, len(in), ties, func(k int) bool { return totals[k] == top })]
}

var randomPicker = Type{
	Name: "random-picker", Kind: KindPicker,
	Doc:    "Picks uniformly at random, whatever the scores.",
	Params: []Param{endpointsParam},
	New:    func(f *Fields) any { decodeEndpoints(f); return uniform{} },
}

type uniform struct{}

func (uniform) Pick(c *Cycle, in []int, _ []float64) int { return in[c.Rng.IntN(len(in))] }

var weightedRandomPicker = Type{
	Name: "weighted-random-picker", Kind: KindPicker,
	Doc: "Picks at random in proportion to the total scores (A-Res sampling: the largest " +
		"U^(1/score)); uniformly when no score is above 0.",
	Params: []Param{endpointsParam},
	New:    func(f *Fields) any { decodeEndpoints(f); return weightedRandom{} },
}

type weightedRandom struct{}

func (weightedRandom) Pick(c *Cycle, in []int, totals []float64) int {
	best, bestKey := -1, 0.0
	for k, t := range totals {
		if !(t > 0) {
			continue
		}
		u := c.Rng.Float64()
		if u == 0 {
			u = 1e-10 // as llm-d: a zero draw would tie with the unscored
		}
		if key := math.Pow(u, 1/t); best < 0 || key > bestKey {
			best, bestKey = k, key
		}
	}
	if best < 0 {
		return uniform{}.Pick(c, in, totals)
	}
	return in[best]
}

var p2cPicker = Type{
	Name: "p2c-picker", Kind: KindPicker, Own: true,
	Doc: "The power of two choices: draws two distinct replicas at random and picks the better " +
		"total score, ties at random (the p2c policy, with active-request-scorer).",
	New: func(*Fields) any { return twoChoices{} },
}

type twoChoices struct{}

// Pick draws as policy.P2C does.
func (twoChoices) Pick(c *Cycle, in []int, totals []float64) int {
	n := len(in)
	if n == 1 {
		return in[0]
	}
	i := c.Rng.IntN(n)
	j := c.Rng.IntN(n - 1)
	if j >= i {
		j++ // uniform over the others
	}
	switch a, b := totals[i], totals[j]; {
	case a > b:
		return in[i]
	case b > a:
		return in[j]
	case c.Rng.IntN(2) == 0:
		return in[i]
	default:
		return in[j]
	}
}

// The pickers below are policies that are no score: they run
// model/policy's own decision over the candidates the filters leave.

// among returns the candidates at positions in: c.Cands itself when in is
// all of them (in is an ordered subset), else a copy in buf.
func among(buf *[]policy.Candidate, c *Cycle, in []int) []policy.Candidate {
	if len(in) == len(c.Cands) {
		return c.Cands
	}
	b := (*buf)[:0]
	for _, i := range in {
		b = append(b, c.Cands[i])
	}
	*buf = b
	return b
}

// pick runs p over the candidates at positions in and returns the
// winner's position in c.Cands.
func pick(p policy.Policy, buf *[]policy.Candidate, c *Cycle, in []int) int {
	k, err := p.Pick(c.Req, among(buf, c, in), c.Rng)
	if err != nil {
		panic("BUG: sched: " + p.Name() + " has no candidate: " + err.Error())
	}
	return in[k]
}

// explained is pick explained, for a policy whose Pick draws one
// rng.Uint64 and decides from it alone (policy.Explainer), as prefix_hash
// and kv_aware do; the decision's steering goes into c.Decision.
func explained(p policy.Explainer, buf *[]policy.Candidate, c *Cycle, in []int) (int, policy.Explanation) {
	e, err := p.Explain(c.Req, among(buf, c, in), c.Rng.Uint64())
	if err != nil {
		panic("BUG: sched: " + p.Name() + " has no candidate: " + err.Error())
	}
	e = subset(c, in, e)
	c.Decision.Steer = e.Steer
	return e.Winner, e
}

var roundRobinPicker = Type{
	Name: "round-robin-picker", Kind: KindPicker, Own: true,
	Doc: "Picks the replicas in turn, by their index, skipping those the filters set aside (the " +
		"round_robin policy); the first pick starts at a random one.",
	New: func(*Fields) any { return &rotation{} },
}

// rotation is policy.RoundRobin: Pick turns a copy, and Picked keeps it.
type rotation struct {
	rr, next policy.RoundRobin
	buf      []policy.Candidate
}

func (r *rotation) Pick(c *Cycle, in []int, _ []float64) int {
	r.next = r.rr
	return pick(&r.next, &r.buf, c, in)
}

func (r *rotation) Picked(*Cycle, int) { r.rr = r.next }

var prefixHashPicker = Type{
	Name: "prefix-hash-picker", Kind: KindPicker, Own: true, Signals: SignalEstimates | SignalTokens,
	Doc: "Consistent hashing of the prompt's first blocks (rendezvous hashing), whatever the load; " +
		"a prompt of no full block by the power of two choices (the prefix_hash policy). It routes on " +
		"the prompt's blocks alone, and asks for the estimate broadcast, as prefix_hash always has, so " +
		"that each decision's predicted cache is known.",
	Params: []Param{{Name: "blocks", Default: policy.DefaultPrefixHashParams().Blocks, Doc: "Leading full blocks hashed (routing.prefix_hash.blocks)."}},
	New: func(f *Fields) any {
		n := f.Int("blocks")
		if n < 1 {
			f.Fail("blocks", "want at least 1, got %d", n)
		}
		return &hashed{p: policy.NewPrefixHash(policy.PrefixHashParams{Blocks: n})}
	},
}

type hashed struct {
	p   *policy.PrefixHash
	buf []policy.Candidate
}

func (h *hashed) Pick(c *Cycle, in []int, _ []float64) int { return pick(h.p, &h.buf, c, in) }

// explainPick is Pick explained, with each candidate's rendezvous weight.
func (h *hashed) explainPick(c *Cycle, in []int, _ []float64) (int, policy.Explanation) {
	return explained(h.p, &h.buf, c, in)
}

var kvAwarePicker = Type{
	Name: "kv-aware-picker", Kind: KindPicker, Own: true, Signals: SignalEstimates | SignalTokens,
	Doc: "The best cacheWeight·cached/prompt − loadWeight·in flight/busiest, ties to fewer in " +
		"flight, then to chance (the kv_aware policy).",
	Params: []Param{
		{Name: "cacheWeight", Default: policy.DefaultKVAwareParams().CacheWeight, Doc: "Weight of the share of the prompt cached, at least 0 (routing.kv_aware.cache_weight)."},
		{Name: "loadWeight", Default: policy.DefaultKVAwareParams().LoadWeight, Doc: "Weight of the requests in flight against the busiest's, at least 0 (routing.kv_aware.load_weight)."},
	},
	New: func(f *Fields) any {
		p := policy.KVAwareParams{CacheWeight: f.Float("cacheWeight"), LoadWeight: f.Float("loadWeight")}
		if p.CacheWeight < 0 {
			f.Fail("cacheWeight", "want at least 0, got %v", p.CacheWeight)
		}
		if p.LoadWeight < 0 {
			f.Fail("loadWeight", "want at least 0, got %v", p.LoadWeight)
		}
		if p.CacheWeight == 0 && p.LoadWeight == 0 {
			f.Fail("cacheWeight", "cacheWeight and loadWeight are both 0: set one")
		}
		return &kvAware{p: policy.NewKVAware(p)}
	},
}

type kvAware struct {
	p   *policy.KVAware
	buf []policy.Candidate
}

func (k *kvAware) Pick(c *Cycle, in []int, _ []float64) int { return pick(k.p, &k.buf, c, in) }

// explainPick is Pick explained, with each candidate's score.
func (k *kvAware) explainPick(c *Cycle, in []int, _ []float64) (int, policy.Explanation) {
	return explained(k.p, &k.buf, c, in)
}

var singleProfileHandler = Type{
	Name: "single-profile-handler", Kind: KindHandler,
	Doc: "Runs the one profile, whose pick routes the request.",
	New: func(*Fields) any { return singleProfile{} },
}

type singleProfile struct{}

func (singleProfile) Next(_ *Cycle, profiles []*Profile, done []Result) []*Profile {
	if len(done) > 0 {
		return nil
	}
	return profiles[:1]
}

func (singleProfile) Primary([]Result) int { return 0 }

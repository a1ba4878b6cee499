package cluster

import (
	"github.com/inferrail/inferrail/model/cost"
	"github.com/inferrail/inferrail/model/policy"
	"github.com/inferrail/inferrail/sim/engine"
)

// Informed is the informed upper bound's policy name: cost_model deciding
// on each engine's true state instead of the gateway's estimates. Only the
// fleet simulator knows that state, so only Config.Policy accepts the
// name; it is no gateway policy (sched.Policies does not list it, and the
// gateway's config refuses it as it refuses any unknown policy).
//
// Each candidate is priced with what its engine's queue holds for the
// prompt (engine.Engine.Outlook): the tokens cached, or computed by a
// request ahead of it, and the prefill queued ahead of it, plus the rest of
// the step in flight; its running and waiting requests and KV usage as of
// now; and its true latency parameters (CostModel, with the
// decode step a prefill shares, which no config key sets). The decision is
// cost_model's own code (sched.New of cost_model, Config.CostModel's
// params), fed these inputs: the gap between the two is what better
// estimates can still win.
const Informed = "cost_model_informed"

// informedBase is the built-in policy Informed decides with.
const informedBase = "cost_model"

// CostModel is cost_model's model for an engine: its true prefill
// parameters, and a running request's share of a decode step as the decode
// interference, as an operator who calibrated would configure it.
func CostModel(c engine.Config) cost.Model {
	l := c.Latency
	return cost.Model{
		PrefillTokenSecs:       l.PrefillToken.Seconds(),
		PrefillPairSecs:        l.PrefillPair / 1e9,
		PrefillFixedSecs:       l.PrefillFixed.Seconds(),
		DecodeInterferenceSecs: l.DecodeSeq.Seconds(),
		DecodeTokenSecs:        l.DecodeToken.Seconds(),
	}
}

// trueModel is the cost model of an engine's latency as the engine prices
// a step with a prefill chunk among n decodes: the chunk, plus
// DecodeToken + (n−1)·DecodeSeq, which is DecodeStepSecs +
// n·DecodeInterferenceSecs.
func trueModel(c engine.Config) cost.Model {
	m := CostModel(c)
	l := c.Latency
	if l.Zero {
		return cost.Model{}
	}
	m.DecodeStepSecs = max(l.DecodeToken-l.DecodeSeq, 0).Seconds()
	return m
}

// inform overwrites g's candidates' predictions for req with their
// engines' true state (Informed). truth holds each replica's true model,
// which a candidate points to.
func (r *run) inform(g *gate, req *policy.Request) {
	if len(r.truth) != len(r.reps) {
		r.truth = make([]cost.Model, len(r.reps))
	}
	for i := range g.cands {
		c := &g.cands[i]
		p := r.reps[c.Replica]
		c.Running, c.Waiting, c.KVUsage = p.eng.Load()
		c.Fresh = true
		q, ahead := p.eng.Outlook(req.Blocks, req.PromptTokens)
		c.CachedTokens = ahead
		if p.busy {
			q += p.end - r.now
		}
		c.QueuedPrefill = q
		r.truth[c.Replica] = trueModel(p.eng.Config())
		c.Model = &r.truth[c.Replica]
	}
}

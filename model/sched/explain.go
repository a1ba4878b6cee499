package sched

import "github.com/inferrail/inferrail/model/policy"

// Explanation is what a Scheduler would decide for a request, per profile
// it runs. It is a fresh value the caller owns.
type Explanation struct {
	// Scheduler is the Scheduler's name.
	Scheduler string
	// Primary is the position in Profiles of the result that routes the
	// request, -1 when there is none.
	Primary int
	// Profiles are the profile runs, in the order the handler ran them.
	Profiles []ProfileExplained
	// Err is an AdmitError when an admitter refused the request before
	// any profile ran (Profiles is then empty).
	Err error
}

// ProfileExplained is one profile's run, with its effect on each
// candidate.
type ProfileExplained struct {
	// Profile and Picker are the profile's name and its picker's.
	Profile, Picker string
	// Winner is the position in the candidates of the pick, -1 when Err is
	// not nil.
	Winner int
	// Err is a FilteredError when the filters left nothing.
	Err error
	// Decision summarizes the run as policy.CostModel's explanation does:
	// the pick, cost_model's guards (their cap and counts, from
	// bounded-load-filter and kv-pressure-filter) and what steered its
	// picker.
	Decision policy.Decision
	// Workings names what the picker filled in of each replica's
	// Workings: a picker made of a policy's decision (cost-model-picker,
	// kv-aware-picker, prefix-hash-picker) explains it in that policy's
	// terms; the others fill in nothing.
	Workings policy.Workings
	// Replicas has one entry per candidate, in the candidates' order.
	Replicas []ReplicaExplained
}

// ReplicaExplained is what one profile made of one candidate.
type ReplicaExplained struct {
	// Replica is the candidate's Replica index (the caller's).
	Replica int
	// Filter names the filter (its plugin name) that set the candidate
	// aside; "" when it reached the scorers.
	Filter string
	// Guard is cost_model's name for that filter when it is one of its
	// guards (bounded_load, kv_pressure).
	Guard policy.Guard
	// Scores are each scorer's score, in the profile's order; empty when
	// a filter set the candidate aside.
	Scores []ScoreExplained
	// Total is the candidate's weighted mean score (the weights normalized
	// to sum 1), which the picker compares.
	Total float64
	// Picked reports the profile's pick.
	Picked bool
	// Workings are the picker's, in its policy's terms, for the parts the
	// profile's Workings name.
	Workings policy.Explained
}

// ScoreExplained is one scorer's score of one candidate.
type ScoreExplained struct {
	// Scorer is the scorer's plugin name.
	Scorer string
	// Raw is the score as the scorer gave it; Weight is the profile's
	// weight for the scorer, as configured; Weighted is Raw clamped to
	// [0, 1] times the weight's share of the profile's weights, its part of
	// Total.
	Raw, Weight, Weighted float64
}

// start sets up the explanation of p's run over cands.
func (ex *ProfileExplained) start(p *Profile, cands []policy.Candidate) {
	ex.Profile, ex.Picker, ex.Winner = p.name, p.picker.name, -1
	ex.Replicas = make([]ReplicaExplained, len(cands))
	for i := range cands {
		ex.Replicas[i].Replica = cands[i].Replica
	}
}

// setAside marks the positions of in that are not in out (an ordered
// subsequence of in) as set aside by f.
func (ex *ProfileExplained) setAside(in, out []int, f namedFilter) {
	var g policy.Guard
	if gf, ok := f.f.(guardFilter); ok {
		g = gf.guard()
	}
	j := 0
	for _, i := range in {
		if j < len(out) && out[j] == i {
			j++
			continue
		}
		ex.Replicas[i].Filter, ex.Replicas[i].Guard = f.name, g
	}
}

// guardFilter is a filter that is one of cost_model's load guards.
type guardFilter interface{ guard() policy.Guard }

// explainingPicker is a picker made of a policy's own decision, which
// explains its pick in that policy's terms.
type explainingPicker interface {
	// explainPick is Pick explained: the same draws from c.Rng and the
	// same pick, with the policy's workings per candidate of c.Cands (in
	// their order), changing no state.
	explainPick(c *Cycle, in []int, totals []float64) (int, policy.Explanation)
}

// picked records a pick in the explanation, with the picker's workings
// when it explains them.
func (ex *ProfileExplained) picked(c *Cycle, in []int, totals []float64, win int, pex *policy.Explanation) {
	for k, i := range in {
		ex.Replicas[i].Total = totals[k]
	}
	ex.Winner = win
	ex.Replicas[win].Picked = true
	ex.Decision = c.Decision
	ex.Decision.Winner = win
	if pex != nil {
		ex.Workings = pex.Workings
		for i := range ex.Replicas {
			g := ex.Replicas[i].Guard
			ex.Replicas[i].Workings = pex.Cands[i]
			if g != policy.GuardNone {
				ex.Replicas[i].Workings.Guard = g
			}
		}
	}
}

// subset maps an explanation of the candidates at positions in (as among
// gives them to a policy) onto every candidate of c: those not in in get
// their own fields only.
func subset(c *Cycle, in []int, e policy.Explanation) policy.Explanation {
	if len(in) == len(c.Cands) {
		return e
	}
	all := make([]policy.Explained, len(c.Cands))
	for i := range c.Cands {
		cd := &c.Cands[i]
		all[i] = policy.Explained{Replica: cd.Replica, InFlight: cd.InFlight, CachedTokens: cd.CachedTokens,
			PricedTokens: cd.CachedTokens, QueuedPrefill: cd.QueuedPrefill, Session: cd.Session}
	}
	for k, i := range in {
		all[i] = e.Cands[k]
	}
	e.Cands = all
	if e.Winner >= 0 {
		e.Winner = in[e.Winner]
	}
	return e
}

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
	// Scores are each scorer's score, in the profile's order; empty when
	// a filter set the candidate aside.
	Scores []ScoreExplained
	// Total is the candidate's weighted mean score (the weights normalized
	// to sum 1), which the picker compares.
	Total float64
	// Picked reports the profile's pick.
	Picked bool
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
// subsequence of in) as set aside by filter.
func (ex *ProfileExplained) setAside(in, out []int, filter string) {
	j := 0
	for _, i := range in {
		if j < len(out) && out[j] == i {
			j++
			continue
		}
		ex.Replicas[i].Filter = filter
	}
}

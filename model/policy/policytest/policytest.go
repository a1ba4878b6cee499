// Package policytest holds policies for the tests of the edges that route
// through the fleet (fleet.Options.ArmPolicy): policies whose answers a
// test chooses, where the built-in ones would need a fleet in a given
// state. It is pure, as policy is.
package policytest

import (
	"math/rand/v2"
	"time"

	"github.com/inferrail/inferrail/model/policy"
)

// Admitter routes as least_request, but refuses with policy.ErrNotAdmitted
// a request whose TTFT objective is set and under TTFT, as llm-d's
// latency-slo-admitter refuses one no replica is predicted to meet.
type Admitter struct {
	policy.LeastRequest
	TTFT time.Duration
}

var _ policy.Policy = Admitter{}

// Pick refuses or routes req.
func (a Admitter) Pick(req *policy.Request, cands []policy.Candidate, rng *rand.Rand) (int, error) {
	if req.SLO.TTFT > 0 && req.SLO.TTFT < a.TTFT {
		return -1, policy.ErrNotAdmitted
	}
	return a.LeastRequest.Pick(req, cands, rng)
}

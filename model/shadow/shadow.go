// Package shadow compares a shadow policy's pick with the routing policy's,
// on the same candidates, in the cost model's terms.
//
// A shadow policy chooses a replica for every routed request without routing
// it. shadow holds the pure part: replaying one decision through a shadow
// policy (Compare), pricing both picks with the model's cost model, and
// adding the comparisons up (Tally). It starts no goroutines and keeps no
// state of its own: the policy and its random source are the caller's.
//
// The comparison is the cost model's own view of the two picks, which favors
// cost_model by construction: a shadow's estimated gain is a reason to try it
// in a split, not proof that it routes better.
package shadow

import (
	"math/rand/v2"
	"time"

	"github.com/inferrail/inferrail/model/cost"
	"github.com/inferrail/inferrail/model/policy"
)

// Caveat says what the comparison is worth, for reports.
const Caveat = "estimates are the cost model's own view, which favors cost_model by construction: " +
	"a shadow's gain is a reason to try it in a split, not proof"

// Decision is one routing decision as the shadows replay it: the request
// and exactly the candidates the routing policy chose among, in the state it
// saw them, and its choice. Immutable once made; the shadows only read it.
type Decision struct {
	// Policy names the routing policy that chose (the request's arm).
	Policy string
	// Request is the request as the routing policy saw it (Now set).
	Request policy.Request
	// Cands are the candidates of the routing policy's final pick.
	Cands []policy.Candidate
	// Routed is the position in Cands of the routing policy's pick.
	Routed int
}

// Outcome is one shadow pick compared with the routing pick.
type Outcome struct {
	// Picked is the position in Decision.Cands of the shadow's pick.
	Picked int
	// Agreed reports that the shadow picked the routing policy's replica.
	Agreed bool
	// Routed and Shadow are the cost model's estimated time to first
	// token on the routing pick and on the shadow's.
	Routed, Shadow time.Duration
}

// Gain is how much sooner the cost model expects the first token on the
// shadow's pick than on the routing pick; negative when later.
func (o Outcome) Gain() time.Duration { return o.Routed - o.Shadow }

// Price is the cost model's estimated time to first token of req on c, from
// what the candidate carries: its predicted cache, queued prefill and
// running requests. A candidate built without the estimate broadcast
// carries no cache prediction, and prices as if it held nothing.
func Price(m cost.Model, req *policy.Request, c *policy.Candidate) time.Duration {
	return c.Cost(&m).Estimate(req.PromptTokens, c.CachedTokens, c.QueuedPrefill, c.Running).Total()
}

// Compare replays d through p, drawing from rng (the shadow's own source,
// never the routing policy's), and prices both picks with m. It fails with
// p's error, or policy.ErrNoCandidate when p answers out of range; d is not
// modified.
func Compare(p policy.Policy, rng *rand.Rand, m cost.Model, d *Decision) (Outcome, error) {
	if d.Routed < 0 || d.Routed >= len(d.Cands) {
		return Outcome{}, policy.ErrNoCandidate
	}
	k, err := p.Pick(&d.Request, d.Cands, rng)
	if err != nil {
		return Outcome{}, err
	}
	if k < 0 || k >= len(d.Cands) {
		return Outcome{}, policy.ErrNoCandidate
	}
	return Outcome{
		Picked: k,
		Agreed: d.Cands[k].Replica == d.Cands[d.Routed].Replica,
		Routed: Price(m, &d.Request, &d.Cands[d.Routed]),
		Shadow: Price(m, &d.Request, &d.Cands[k]),
	}, nil
}

// Tally adds up one shadow policy's outcomes. The zero value is empty.
type Tally struct {
	Decisions int64
	Agreed    int64
	// Faster and Slower count the decisions where the shadow's pick was
	// priced sooner, or later, than the routing pick. A tie (always so
	// when they agree) is neither.
	Faster, Slower int64
	// Routed and Shadow sum the estimates of the routing picks and of the
	// shadow's picks.
	Routed, Shadow time.Duration
}

// Add counts o.
func (t *Tally) Add(o Outcome) {
	t.Decisions++
	if o.Agreed {
		t.Agreed++
	}
	switch {
	case o.Shadow < o.Routed:
		t.Faster++
	case o.Shadow > o.Routed:
		t.Slower++
	}
	t.Routed += o.Routed
	t.Shadow += o.Shadow
}

// Summary is a tally as shares and means, for /admin/shadow.
type Summary struct {
	Policy    string
	Decisions int64
	// Agreement, Faster and Slower are shares of Decisions, in [0, 1]; 0
	// before the first decision.
	Agreement, Faster, Slower float64
	// MeanGain is the mean of Outcome.Gain over the decisions.
	MeanGain time.Duration
}

// Summary returns t as shares of its decisions, named name.
func (t Tally) Summary(name string) Summary {
	s := Summary{Policy: name, Decisions: t.Decisions}
	if t.Decisions == 0 {
		return s
	}
	n := float64(t.Decisions)
	s.Agreement, s.Faster, s.Slower = float64(t.Agreed)/n, float64(t.Faster)/n, float64(t.Slower)/n
	s.MeanGain = (t.Routed - t.Shadow) / time.Duration(t.Decisions)
	return s
}

// Report is one model's shadows: each shadow policy's summary in config
// order, and the decisions left out of the shadow because its worker was
// behind.
type Report struct {
	Model   string
	Dropped uint64
	Shadows []Summary
}

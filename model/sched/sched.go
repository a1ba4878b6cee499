package sched

import (
	"math/rand/v2"
	"strings"

	"github.com/inferrail/inferrail/model/policy"
)

// Cycle is one decision as every plugin of a profile sees it: the request,
// the candidates the routing actor offered, and the randomness. Plugins
// address candidates by their position in Cands. A Cycle lives for one
// decision and belongs to the Scheduler running it.
type Cycle struct {
	Req   *policy.Request
	Cands []policy.Candidate
	// Rng is the routing actor's source (routing.seed), the only
	// randomness a plugin may use, so a fixed seed replays the same
	// decisions.
	Rng *rand.Rand
	// Decision summarizes the decision for the routing metrics, as
	// policy.CostModel.Last does: cost_model's guards and its picker fill
	// in their parts; the Scheduler sets Winner.
	Decision policy.Decision
	// Latency is each candidate's predicted latency against the request's
	// SLO, by position in Cands, as predicted-latency-producer fills it in
	// before any profile runs; nil when no producer predicted (llm-d's
	// consumers then fall back as with its sidecar down). Read only.
	Latency []Prediction
}

// Producer is a data producer that computes, once per decision and before
// the admitters and profiles run, what their plugins read from the Cycle.
// It changes no state of its own but the memory it fills in.
type Producer interface {
	Produce(c *Cycle)
}

// Admitter decides, after the producers and before any profile, whether a
// request is routed at all (llm-d's request-control admitters, bound by
// being listed in plugins). It changes no state of its own.
type Admitter interface {
	// Admit reports whether c's request may be routed.
	Admit(c *Cycle) bool
}

// Filter sets candidates aside.
type Filter interface {
	// Filter appends to out (empty, with memory to reuse) the positions of
	// in (positions in c.Cands) it keeps, in their order, and returns it.
	// It keeps no position that is not in in, and changes no state of its
	// own.
	Filter(c *Cycle, in, out []int) []int
}

// Scorer scores candidates.
type Scorer interface {
	// Score sets scores[k] to candidate in[k]'s score, from 0 (worst) to 1
	// (best); scores has len(in). Scores outside [0, 1] are clamped, NaN
	// counts as 0. It changes no state of its own except what it keeps for
	// Picked.
	Score(c *Cycle, in []int, scores []float64)
}

// Picker chooses the candidate a profile routes to.
type Picker interface {
	// Pick returns the position in c.Cands of one of in (never empty),
	// given totals[k], candidate in[k]'s weighted mean score. It changes no
	// state of its own except what it keeps for Picked.
	Pick(c *Cycle, in []int, totals []float64) int
}

// Observer is a plugin with state that learns of each decision: a
// rotation, a session table, the hot-prefix sketch. Its Picked is the only
// place its state changes, so explaining a decision (which runs the
// filters, scorers and picker but not Picked) never changes the next one.
type Observer interface {
	// Picked tells the plugin that its profile routed c's request to
	// c.Cands[winner].
	Picked(c *Cycle, winner int)
}

// Result is one profile's run. It is a value.
type Result struct {
	// Profile is the profile's name.
	Profile string
	// Winner is the position in the cycle's candidates of the replica the
	// profile chose, -1 when Err is not nil.
	Winner int
	// Err is ErrFilteredOut when the profile's filters left nothing.
	Err error
}

// ProfileHandler chooses which of a Scheduler's profiles run for a
// request, and which result routes it. single-profile-handler runs the one
// profile; P/D disaggregation runs a decode and a prefill profile.
type ProfileHandler interface {
	// Next returns the profiles to run next, given the results of those
	// run so far in this cycle (none at first); an empty slice ends the
	// cycle.
	Next(c *Cycle, profiles []*Profile, done []Result) []*Profile
	// Primary returns the position in done of the result that routes the
	// request.
	Primary(done []Result) int
}

// Kind is what a plugin type is for.
type Kind uint8

// The kinds of plugin. Producers and data-layer plugins do no scheduling:
// in llm-d they feed data to the scorers; here they name where the data
// comes from, and their parameters are checked.
const (
	KindFilter Kind = iota + 1
	KindScorer
	KindPicker
	KindHandler
	KindProducer
	// KindFlow is a flow-control plugin: a fairness or ordering policy or
	// a saturation detector, which the flowControl block references and
	// no profile runs.
	KindFlow
	// KindAdmitter is a request-control admitter: listed in plugins, it
	// runs for every decision before the profiles, and no profile names it.
	KindAdmitter
)

var kindNames = [...]string{KindFilter: "filter", KindScorer: "scorer", KindPicker: "picker", KindHandler: "profile handler", KindProducer: "data producer", KindFlow: "flow-control plugin", KindAdmitter: "admitter"}

// String returns the kind's name, such as "scorer".
func (k Kind) String() string {
	if int(k) < len(kindNames) && kindNames[k] != "" {
		return kindNames[k]
	}
	return "unknown"
}

// Signal is a set of the inputs a plugin routes on, so that the gateway
// gathers only what a profile needs.
type Signal uint8

// The signals.
const (
	// SignalEstimates is the estimate broadcast: each candidate's
	// predicted cached tokens, queued prefill and pending tokens, from its
	// replica actor (policy.CacheAware's policies).
	SignalEstimates Signal = 1 << iota
	// SignalLoad is the engines' load reports: running and waiting
	// requests and KV cache usage (the load section's scrape).
	SignalLoad
	// SignalKVEvents is the KV-event index: the cache prediction of a
	// replica that follows its engine's KV events (kv_events) rather than
	// the shadow index alone.
	SignalKVEvents
	// SignalTokens is the prompt tokenized: its length and block hashes
	// (the model's tokenizer).
	SignalTokens
)

var signalNames = []string{"estimates", "load", "kv-events", "tokens"}

// String lists the signals, such as "estimates+tokens"; "" for none.
func (s Signal) String() string {
	var b strings.Builder
	for i, name := range signalNames {
		if s&(1<<i) != 0 {
			if b.Len() > 0 {
				b.WriteByte('+')
			}
			b.WriteString(name)
		}
	}
	return b.String()
}

// replicaKey is the stable key a plugin remembers a replica by: its
// Candidate.Key, else one derived from its Replica index.
func replicaKey(c *policy.Candidate) uint64 {
	if c.Key != 0 {
		return c.Key
	}
	return ^uint64(c.Replica)
}

// clamp01 bounds a score to [0, 1], NaN to 0.
func clamp01(v float64) float64 {
	switch {
	case v > 1:
		return 1
	case v >= 0:
		return v
	default: // negative or NaN
		return 0
	}
}

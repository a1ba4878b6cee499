package policy

import (
	"time"

	"github.com/inferrail/inferrail/model/cost"
)

// cost_model and a request's SLO (Request.SLO). Each candidate is
// predicted to meet or miss it: its estimated time to first token against
// the TTFT objective, and the decode step it would share (cost.Model.TPOT
// over its running requests and those queued ahead) against the TPOT
// objective. The ranking puts every candidate predicted to meet it before
// every one predicted to miss it, and with SLOAdmission a request no
// candidate is predicted to meet is refused (ErrNotAdmitted) rather than
// sent to miss.
//
// The admission judges a replica's wait more cautiously than the ranking:
// the larger of its queued prefill and the prefill of the uncached prompt
// tokens of every request still awaiting its first token there
// (Candidate.PendingTokens, Pending), times AdmissionWaitFactor. The
// queued prefill drains with time as if the engine were always computing
// prefill, which holds until the engine's KV cache fills; from then on
// requests wait for memory rather than compute, the queue estimate reads
// empty while the requests stay pending, and an admission on it lets the
// queue grow until every request misses (W2 at 12.5 req/s on three
// simulated engines: 34% within the SLO with the plain estimate, 88% with
// the pending tokens and a factor of 3; bench/results/capacity-2026-12-08.md).

// sloTier is the price a candidate predicted to miss the request's SLO
// pays above every candidate predicted to meet it.
const sloTier = time.Hour

// hasSLO reports whether req sets an objective.
func hasSLO(req *Request) bool { return req.SLO.TTFT > 0 || req.SLO.TPOT > 0 }

// misses reports whether c, priced with m and estimated to give its
// first token after ttft, is predicted to miss req's SLO.
func misses(req *Request, m *cost.Model, c *Candidate, ttft time.Duration) bool {
	slo := req.SLO
	if slo.TTFT > 0 && ttft > slo.TTFT {
		return true
	}
	return slo.TPOT > 0 && m.TPOT(max(c.Running, 0)+max(c.Pending, 0), 0, 1) > slo.TPOT
}

// pendingWait is the admission's wait on c (see above): the larger of its
// queued prefill and the prefill of its pending requests' uncached
// tokens, times factor.
func pendingWait(m *cost.Model, c *Candidate, factor float64) time.Duration {
	pending := m.PrefillTokenSecs*float64(max(c.PendingTokens, 0)) + m.PrefillFixedSecs*float64(max(c.Pending, 0))
	w := max(c.QueuedPrefill.Seconds(), pending) * max(factor, 1)
	if !(w < float64(sloTier)/1e9) {
		return sloTier
	}
	return time.Duration(w * 1e9)
}

// Admits reports whether req may be routed to one of cands under
// cost_model's SLO admission: it sets no objective, or some candidate is
// predicted within it with its wait judged by pendingWait with
// waitFactor. def prices the candidates without a cost model of their own.
func Admits(req *Request, cands []Candidate, def *cost.Model, waitFactor float64) bool {
	if !hasSLO(req) {
		return true
	}
	prompt := max(req.PromptTokens, 0)
	for i := range cands {
		c := &cands[i]
		m := c.Cost(def)
		ttft := m.Estimate(prompt, cachedTokens(c, prompt), pendingWait(m, c, waitFactor), c.Running).Total()
		if !misses(req, m, c, ttft) {
			return true
		}
	}
	return false
}

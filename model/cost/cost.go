// Package cost holds cost_model's estimate of time to first token and the
// load guards that bound it, as pure functions, plus the count-min sketch
// that measures prefill demand per root prefix, and the fit of the prefill
// parameters to measured prefills that inferrail calibrate runs (fit.go).
//
// cost starts no goroutines, does no I/O and keeps no globals: callers pass
// in the time. A Sketch has state; it is owned by one routing actor (through
// its policy value) and is not safe for concurrent use. Everything else here
// is a pure function of its arguments.
package cost

import (
	"math"
	"time"
)

// Model holds the parameters of the estimate of time to first token
//
//	TTFT = W + P(u, c) + X
//	W    = queued prefill + DecodeInterferenceSecs * running
//	       (+ DecodeStepSecs while running > 0)
//	P    = a*u + b*u*(c + u/2) + d
//
// for u tokens the replica would compute after c it has cached, with
// a = PrefillTokenSecs, b = PrefillPairSecs and d = PrefillFixedSecs. X
// prices tiered cache loads and is zero until the index tracks tiers.
// Values are float seconds, at least 0, as in routing.cost_model; the fields
// match config.CostModel so that cost.Model(cfg.Routing.CostModel) converts.
// A Model is a value and safe for concurrent use.
type Model struct {
	// PrefillTokenSecs is a, seconds per computed token.
	PrefillTokenSecs float64
	// PrefillPairSecs is b, seconds per pair of computed and attended
	// tokens: attention makes each computed token read the c cached ones and
	// on average half of the u computed ones.
	PrefillPairSecs float64
	// PrefillFixedSecs is d, seconds per prefill.
	PrefillFixedSecs float64
	// DecodeInterferenceSecs is the delay each running request adds to a
	// new request's prefill (its share of a decode step).
	DecodeInterferenceSecs float64
	// DecodeStepSecs is the delay a new request's prefill takes while any
	// request decodes, once: the decode step it shares (vLLM batches a
	// prefill chunk with the running decodes, and the step's fixed cost is
	// paid whatever the count). No config key sets it; the online fit
	// (routing.cost_model: auto) does, and it is 0 otherwise. It is part of
	// W, not of P, so that the prefill queue does not add it per request.
	DecodeStepSecs float64
	// DecodeTokenSecs is the time of a decode step that decodes one
	// sequence; each further sequence adds DecodeInterferenceSecs (vLLM's
	// step, and the simulator's DecodeToken + DecodeSeq·(n−1)). It feeds
	// the estimate of time per output token (TPOT) only, never TTFT.
	DecodeTokenSecs float64
}

// Default returns routing.cost_model's defaults, fitted to the simulator's
// default latency model: a = 100µs per token, b = 3.3ns per pair,
// d = 5ms, 100µs of decode interference per running request, and a 20ms
// decode step.
func Default() Model {
	return Model{
		PrefillTokenSecs:       0.0001,
		PrefillPairSecs:        0.0000000033,
		PrefillFixedSecs:       0.005,
		DecodeInterferenceSecs: 0.0001,
		DecodeTokenSecs:        0.02,
	}
}

// Estimate is one replica's estimated time to first token, by term.
type Estimate struct {
	// Queue is W: the prefill queued on the replica plus the decode
	// interference of its running requests.
	Queue time.Duration
	// Prefill is P(u, c), the prefill of this prompt there.
	Prefill time.Duration
	// Tier is X, the load time of cached tokens held in CPU or disk tiers.
	// Always 0 for now.
	Tier time.Duration
}

// Total returns W + P + X.
func (e Estimate) Total() time.Duration { return e.Queue + e.Prefill + e.Tier }

// secs converts float seconds to a Duration, saturating. Truncation is
// monotone, so a monotone estimate stays monotone.
func secs(s float64) time.Duration {
	switch ns := s * 1e9; {
	case !(ns > 0): // also NaN
		return 0
	case ns >= math.MaxInt64:
		return math.MaxInt64
	default:
		return time.Duration(ns)
	}
}

// PrefillSecs returns P(u, c) = a*u + b*u*(c + u/2) + d in seconds, for u
// tokens to compute after c cached ones. Negative counts are taken as 0.
func (m Model) PrefillSecs(u, c int) float64 {
	return m.prefill(float64(max(u, 0)), float64(max(c, 0)))
}

// prefill is P(u, c) for counts known to be at least 0.
func (m *Model) prefill(u, c float64) float64 {
	return m.PrefillTokenSecs*u + m.PrefillPairSecs*u*(c+u/2) + m.PrefillFixedSecs
}

// Prefill returns P(u, c) as a Duration.
func (m Model) Prefill(u, c int) time.Duration { return secs(m.PrefillSecs(u, c)) }

// Queue returns W: queued prefill plus decode interference per running
// request, plus the decode step while any runs.
func (m *Model) Queue(queued time.Duration, running int) time.Duration {
	if running <= 0 {
		return max(queued, 0)
	}
	return max(queued, 0) + secs(m.DecodeInterferenceSecs*float64(running)+m.DecodeStepSecs)
}

// Estimate prices a prompt of prompt tokens on a replica holding cached of
// them (clamped to [0, prompt]), with queued prefill and running requests.
// It is non-increasing in cached and non-decreasing in queued and running.
// It and Queue take a pointer: a decision calls them for every candidate,
// and copying the Model each time cost cost_model's Pick a third of its
// time once the Model grew DecodeStepSecs (BenchmarkPickCacheAware).
func (m *Model) Estimate(prompt, cached int, queued time.Duration, running int) Estimate {
	prompt = max(prompt, 0)
	cached = min(max(cached, 0), prompt)
	return Estimate{
		Queue:   m.Queue(queued, running),
		Prefill: secs(m.prefill(float64(prompt-cached), float64(cached))),
	}
}

// Cap returns the bounded-load cap, ceil((1 + epsilon) * (inFlight + 1) / n):
// the most requests a replica may hold after taking the next one, given
// inFlight requests in flight over n replicas (consistent hashing with
// bounded loads, Mirrokni, Thorup and Zadeh, 2018). Since the least loaded
// replica holds at most floor(inFlight/n), it is always within the cap for
// any epsilon >= 0. n < 1 is taken as 1 and a negative epsilon as 0.
func Cap(inFlight, n int, epsilon float64) int {
	n = max(n, 1)
	if !(epsilon >= 0) { // also NaN
		epsilon = 0
	}
	c := math.Ceil((1 + epsilon) * float64(max(inFlight, 0)+1) / float64(n))
	if c >= math.MaxInt32 {
		return math.MaxInt32
	}
	return max(int(c), 1)
}

// WithinCap reports whether a replica with inFlight requests may take one
// more under cap.
func WithinCap(inFlight, cap int) bool { return inFlight+1 <= cap }

// Pressured reports whether the KV pressure guard sets a replica aside: its
// engine's fresh report shows more than kappa of its KV cache in use, and
// the prompt has more than shortPrompt tokens to compute there. A stale
// report (fresh false) never pressures: usage is then unknown.
func Pressured(kvUsage float64, fresh bool, kappa float64, toCompute, shortPrompt int) bool {
	return fresh && kvUsage > kappa && toCompute > shortPrompt
}

// Owners returns how many replicas a root prefix gets, ceil(rate /
// utilization), clamped to [1, n]: rate is its prefill demand in replica
// seconds per second (Sketch.Rate) and utilization the share of one
// replica it may need (hot_prefix.utilization).
func Owners(rate, utilization float64, n int) int {
	n = max(n, 1)
	if !(utilization > 0) || !(rate > 0) {
		return 1
	}
	k := math.Ceil(rate / utilization)
	if k >= float64(n) {
		return n
	}
	return max(int(k), 1)
}

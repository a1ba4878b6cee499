package estimate

import (
	"time"

	"github.com/inferrail/inferrail/model/cost"
)

// Online calibration (routing.cost_model: auto): a replica with a Fit
// measures the prefill of the requests routed to it and fits a, b and d to
// them (cost.Online). The gateway's replica actors and the fleet simulator
// measure with this code, so that the simulator's fits are the gateway's.
//
// What a sample is. The gateway sees, per streamed request, the time from
// its assignment to its first event, the first token (a response not
// streamed has its head after its last token, and gives no sample). That is the engine's queue wait plus the
// prefill plus the decode steps that run alongside. Three ways to get the
// prefill out of it were weighed:
//
//   - Less the estimated queue wait (W, the virtual queue and the decode
//     interference): the virtual queue is made of this very fit's
//     estimates, so a fit k times too low leaves W too low and the sample
//     too high, and the error fed back is the queue's share of the time.
//     Under load, where the queue is longer than the prefill, that does not
//     converge.
//   - The engine's TTFT histogram, when one request got its first token
//     between two scrapes: the buckets (vLLM's step from 0.25 s to 0.5 s
//     to 0.75 s, say) locate a sample within 30% to 50%, scrapes are
//     seconds apart and, under load, rarely see one first token alone; and
//     which request it was, so its u and c, is a guess.
//   - Only the requests that had nothing queued ahead of them on the
//     replica and nothing added behind them until their first token: for
//     those the estimated queue is empty, so y = first token - assignment -
//     decode interference (what the estimate adds, DecodeInterferenceSecs
//     per running request) is the prefill as the estimate prices it, with
//     no estimate of this fit's in it. It costs samples (a busy replica
//     has fewer lone requests), and nothing else.
//
// The third is what Measure does. A sample taken while requests decode
// shared their decode step, which the fit prices apart
// (cost.Model.DecodeStepSecs). What the gateway cannot see stays in the
// sample: a request of another gateway instance on the same engine, the
// wait for the decode step in progress when the request arrived, network
// and HTTP time; the fit counts them as the decode step or as d.

// Timing is what a replica keeps of a request routed to it, to measure its
// prefill at its first token. A Timing is a value.
type Timing struct {
	// At is when it was assigned.
	At time.Time
	// Computed and Cached are the tokens it was predicted to compute and
	// to find cached, and Running the requests decoding there then.
	Computed, Cached, Running int
	seq                       uint64 // its number in the queue
	alone                     bool   // nothing was queued ahead of it
}

// Time returns the Timing of the request just added to the queue (Assign,
// or Queue.Add) at now, and remembers when it was added.
func (r *Replica) Time(computed, cached, running int, now time.Time) Timing {
	seq := r.Queue.Added()
	r.added[seq%uint64(len(r.added))] = added{seq: seq, at: now}
	return Timing{At: now, Computed: computed, Cached: cached, Running: running,
		seq: seq, alone: r.Queue.Waiting() == 1}
}

// added is when a request numbered seq in the queue was timed.
type added struct {
	seq uint64
	at  time.Time
}

// alone reports whether nothing was added to the queue after the request
// timed t before first: the next request's time is known and not before
// first. A gateway learns a streamed response's first token only at its
// end, after later requests were added.
func (r *Replica) aloneUntil(t Timing, first time.Time) bool {
	if r.Queue.Added() == t.seq {
		return true
	}
	next := r.added[(t.seq+1)%uint64(len(r.added))]
	return next.seq == t.seq+1 && !next.at.Before(first)
}

// Measure returns the prefill sample of a request timed t, whose first
// token came at first, with decode interference priced by m, and whether
// it counts: the request had nothing queued ahead of it, nothing was added
// behind it before first, and its time is positive.
func (r *Replica) Measure(t Timing, m cost.Model, first time.Time) (cost.Sample, bool) {
	if !t.alone || t.At.IsZero() || !r.aloneUntil(t, first) {
		return cost.Sample{}, false
	}
	now := first
	m.DecodeStepSecs = 0 // fitted from the sample, not taken off it
	y := now.Sub(t.At) - m.Queue(0, t.Running)
	if y <= 0 {
		return cost.Sample{}, false
	}
	return cost.Sample{Computed: t.Computed, Cached: t.Cached, Secs: y.Seconds(), Decoding: t.Running > 0}, true
}

// Agrees reports whether a cache prediction of predicted tokens agrees
// with the engine's count of cached tokens, within one block: the engine
// computes a prompt's last token even when all of it is cached. Only the
// samples of predictions that agree (or of an index that follows the
// engine's events) are fitted: a sample whose u and c are wrong teaches
// the fit a wrong curve.
func Agrees(predicted, engine, blockSize int) bool {
	d := predicted - engine
	return d <= blockSize && d >= -blockSize
}

// Calibrate feeds the replica's Fit, when it has one, the sample of a
// request timed t whose first token came at now, when it counts (Measure) and its
// prediction held (exact). It returns the verdict, and false when nothing
// was fed.
func (r *Replica) Calibrate(t Timing, exact bool, now time.Time) (cost.Verdict, bool) {
	if r.Fit == nil || !exact {
		return 0, false
	}
	s, ok := r.Measure(t, r.Fit.Model(), now)
	if !ok {
		return 0, false
	}
	return r.Fit.Observe(s), true
}

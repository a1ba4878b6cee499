package cost

import (
	"math"
	"math/bits"
)

// Online calibration (routing.cost_model: auto, issue 30): each replica fits
// its own a, b and d to the prefills its ordinary traffic shows, because a
// pool may mix GPU kinds and one set of constants cannot price them all.
//
// The fit is windowed non-negative least squares over a bounded ring of
// recent samples, refitted every few accepted samples, rather than
// recursive least squares with forgetting. RLS updates a covariance that
// non-negativity does not survive (clamping a coefficient after an update
// leaves the covariance describing another estimate), its forgetting factor
// makes a direction that traffic stops exciting (b, when contexts stop
// varying) blow its covariance up, so that the next odd sample throws the
// fit, and it cannot refuse to move a parameter the window does not
// determine. A ring of OnlineWindow samples is a fixed 5 KiB, a refit over
// it a few microseconds on the replica's actor (never the decision path),
// and the window is also the forgetting: a step change in the engine's speed
// has replaced the whole window after OnlineWindow accepted samples. The
// refit is Fit's: relative errors, so that long prompts alone do not decide
// d, which prices every short request.
//
// Bounds on what moves the fit:
//   - Repeats: a sample of the same u and c as one in the window takes its
//     place and triggers no refit, so repeated prompts hold one slot and
//     cannot crowd the window, however many come.
//   - Spread: a refit changes a parameter only when the window tells it
//     apart from the others (the weighted regressors are not nearly
//     collinear, Gram determinant at least spreadAll for a, b and d, else
//     spreadTwo for a and d with b held). A stream of identical prompts
//     determines one combination of the three, and moves none.
//   - Prior: the configured values are the fit in effect until the window
//     first tells a and d apart, and b stays at them until it tells b
//     apart too. They do not enter the solve as pseudo-samples: a parameter
//     the window determines weakly (b, on traffic of short contexts) would
//     then be pulled toward them by however little weight they had, and a
//     fit should not be biased once it is determined.
//   - Outliers: once fitted, a sample more than outlierFactor off the fit
//     either way is dropped and counted, unless most recent samples are
//     (then the engine, not the sample, changed).
//   - Never negative: the solve is non-negative.

// The online fit's bounds; see above.
const (
	// OnlineWindow is how many accepted samples the ring keeps.
	OnlineWindow = 128
	// onlineMin is how many accepted samples the first refit needs.
	onlineMin = 32
	// onlineRefit is how many accepted samples go between refits.
	onlineRefit = 8
	// outlierFactor is how far off the fit (a ratio, either way) a sample
	// is an outlier.
	outlierFactor = 4.0
	// outlierRecent is how many of the last 32 verdicts may be outliers
	// before the guard stands aside: the fit is what is wrong.
	outlierRecent = 12
	// materialChange is the relative change of a parameter that makes the
	// fit new (OnlineStats.Age starts over).
	materialChange = 0.05
	// spreadAll and spreadTwo are the least Gram determinants of the
	// window's unit-scaled regressors for a refit of a, b and d, and of a
	// and d with b held.
	spreadAll = 1e-4
	spreadTwo = 1e-3
)

// Verdict is what Online.Observe did with a sample.
type Verdict uint8

const (
	// Accepted: the sample joined the window.
	Accepted Verdict = iota
	// Outlier: the sample was too far off the fit and was dropped.
	Outlier
	// Invalid: a negative count, or a time that is not finite and positive.
	Invalid
)

// OnlineStats describe an online fit.
type OnlineStats struct {
	// Fitted reports that a refit has replaced the configured values.
	Fitted bool
	// Samples counts the accepted samples since the start (or Reset), and
	// Outliers the dropped ones.
	Samples, Outliers int
	// Age is how many samples were accepted since the fit in effect last
	// changed materially (any of a, b, d by 5% or more).
	Age int
	// RelError is the root mean square relative error of the fit in
	// effect over the window, as of the last refit (0 before).
	RelError float64
	// Spread reports that the window told at least a and d apart at the
	// last refit; false before the first, or when it did not (identical
	// prompts).
	Spread bool
	// Refits counts the refits tried, with or without enough spread.
	Refits int
}

// Online fits a, b and d to a replica's measured prefills as they come.
// It starts no goroutines and reads no clock: the caller passes each
// sample. An Online is owned by one replica actor (or one simulated
// replica) and is not safe for concurrent use.
type Online struct {
	prior, fit, anchor Model
	ring               [OnlineWindow]Sample
	n, next            int    // samples in the ring, and where the next goes
	fresh              int    // accepted since the last refit
	verdicts           uint64 // the last 64 guarded verdicts, 1 for an outlier
	stats              OnlineStats
}

// NewOnline returns a fit that starts from prior, the configured values.
func NewOnline(prior Model) *Online {
	o := &Online{}
	o.Reset(prior)
	return o
}

// Reset starts over from prior: the window empties and the counts restart.
func (o *Online) Reset(prior Model) {
	*o = Online{prior: prior, fit: prior, anchor: prior}
}

// Prior returns the configured values the fit started from.
func (o *Online) Prior() Model { return o.prior }

// SetDecodeInterference changes the fit's DecodeInterferenceSecs, which it
// does not fit, keeping everything else.
func (o *Online) SetDecodeInterference(secs float64) {
	o.prior.DecodeInterferenceSecs, o.fit.DecodeInterferenceSecs = secs, secs
}

// Model returns the fit in effect: the configured values until the first
// refit with enough spread, with the prior's DecodeInterferenceSecs.
func (o *Online) Model() Model { return o.fit }

// Stats returns the fit's state.
func (o *Online) Stats() OnlineStats { return o.stats }

// Observe takes one measured prefill: s.Computed tokens after s.Cached
// cached ones took s.Secs.
func (o *Online) Observe(s Sample) Verdict {
	if s.Computed < 0 || s.Cached < 0 || !(s.Secs > 0) || math.IsInf(s.Secs, 0) {
		return Invalid
	}
	if o.stats.Fitted {
		pred := o.fit.PrefillSecs(s.Computed, s.Cached)
		off := !(pred > 0) || s.Secs > pred*outlierFactor || s.Secs*outlierFactor < pred
		recent := bits.OnesCount64(o.verdicts & (1<<32 - 1))
		o.verdicts <<= 1
		if off && recent < outlierRecent {
			o.verdicts |= 1
			o.stats.Outliers++
			return Outlier
		}
	}
	o.stats.Samples++
	o.stats.Age++
	for i := range o.n {
		if r := &o.ring[i]; r.Computed == s.Computed && r.Cached == s.Cached {
			// A prompt the window holds: its time is refreshed, and it
			// brings no new shape, so no refit.
			r.Secs = s.Secs
			return Accepted
		}
	}
	o.ring[o.next] = s
	o.next = (o.next + 1) % OnlineWindow
	o.n = min(o.n+1, OnlineWindow)
	o.fresh++
	if o.n >= onlineMin && o.fresh >= onlineRefit {
		o.refit()
	}
	return Accepted
}

// refit fits the window, as far as its spread allows.
func (o *Online) refit() {
	o.fresh = 0
	o.stats.Refits++
	win := o.ring[:o.n]
	var next Model
	switch {
	case gramDet(win, true) >= spreadAll:
		next = o.solve(win, true)
	case gramDet(win, false) >= spreadTwo:
		next = o.solve(win, false)
	default:
		o.stats.Spread = false
		return
	}
	o.stats.Spread = true
	next.DecodeInterferenceSecs = o.prior.DecodeInterferenceSecs
	o.fit = next
	o.stats.Fitted = true
	o.stats.RelError = RelError(next, win)
	if changed(o.anchor, next) {
		o.anchor = next
		o.stats.Age = 0
	}
}

// solve is the weighted non-negative fit of the window: of a, b and d with all, else of a and d with b held at the fit in
// effect.
func (o *Online) solve(win []Sample, all bool) Model {
	b := o.fit.PrefillPairSecs
	cols := 2
	if all {
		cols = 3
	}
	rows := make([][]float64, 0, len(win)+cols)
	rhs := make([]float64, 0, len(win)+cols)
	for _, s := range win {
		u, c, w := float64(s.Computed), float64(s.Cached), 1/s.Secs
		if all {
			rows = append(rows, []float64{u * w, u * (c + u/2) * w, w})
			rhs = append(rhs, 1)
			continue
		}
		// b's term is known: fit what is left of the time.
		rows = append(rows, []float64{u * w, w})
		rhs = append(rhs, 1-b*u*(c+u/2)*w)
	}
	x, err := scaledNNLS(rows, rhs)
	if err != nil {
		return o.fit // a column without effect: keep what is in effect
	}
	if all {
		return Model{PrefillTokenSecs: x[0], PrefillPairSecs: x[1], PrefillFixedSecs: x[2]}
	}
	return Model{PrefillTokenSecs: x[0], PrefillPairSecs: b, PrefillFixedSecs: x[1]}
}

// changed reports whether any of a, b and d differs between x and y by
// materialChange or more, relative to x (or at all, where x's is 0).
func changed(x, y Model) bool {
	for _, p := range [][2]float64{
		{x.PrefillTokenSecs, y.PrefillTokenSecs},
		{x.PrefillPairSecs, y.PrefillPairSecs},
		{x.PrefillFixedSecs, y.PrefillFixedSecs},
	} {
		if math.Abs(p[1]-p[0]) > materialChange*math.Abs(p[0]) || p[0] == 0 && p[1] != 0 {
			return true
		}
	}
	return false
}

// gramDet is the determinant of the Gram matrix of the window's weighted
// regressors scaled to unit length (u/y, u(c+u/2)/y and 1/y with all; u/y
// and 1/y without): 1 when they are orthogonal, 0 when they are collinear,
// as identical samples make them.
func gramDet(win []Sample, all bool) float64 {
	var g [3][3]float64
	for _, s := range win {
		u, c, w := float64(s.Computed), float64(s.Cached), 1/s.Secs
		r := [3]float64{u * w, w, u * (c + u/2) * w}
		for i := range 3 {
			for j := range 3 {
				g[i][j] += r[i] * r[j]
			}
		}
	}
	n := 2
	if all {
		n = 3
	}
	for i := range n {
		if !(g[i][i] > 0) {
			return 0
		}
	}
	var m [3][3]float64
	for i := range n {
		for j := range n {
			m[i][j] = g[i][j] / math.Sqrt(g[i][i]*g[j][j])
		}
	}
	if n == 2 {
		return m[0][0]*m[1][1] - m[0][1]*m[1][0]
	}
	return m[0][0]*(m[1][1]*m[2][2]-m[1][2]*m[2][1]) -
		m[0][1]*(m[1][0]*m[2][2]-m[1][2]*m[2][0]) +
		m[0][2]*(m[1][0]*m[2][1]-m[1][1]*m[2][0])
}

package cost

import (
	"math"
	"math/bits"
	"slices"
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
// it some microseconds on the replica's actor (never the decision path),
// and the window is also the forgetting, cut short when the engine is seen
// to change speed (shift). The refit is Fit's: relative errors, so that
// long prompts alone do not decide d, which prices every short request. It
// also fits the decode step a prefill shares while requests decode
// (Model.DecodeStepSecs; see refit).
//
// Bounds on what moves the fit:
//   - Repeats: a sample of the same u and c (decoding or not) as one in
//     the window takes its place and triggers no refit, so repeated
//     prompts hold one slot and cannot crowd the window, however many
//     come, nor pass for a change of speed.
//   - Spread: a refit changes a parameter only when the window tells it
//     apart from the others (the weighted regressors are not nearly
//     collinear: see refit). A stream of identical prompts determines one
//     combination of them, and moves none.
//   - Prior: the configured values are the fit in effect until the window
//     first tells a and d apart, and b stays at them until it tells b
//     apart too. They do not enter the solve as pseudo-samples: a parameter
//     the window determines weakly (b, on traffic of short contexts) would
//     then be pulled toward them by however little weight they had, and a
//     fit should not be biased once it is determined.
//   - Outliers: once fitted, a sample more than outlierFactor off the fit
//     either way is dropped and counted, unless most recent samples are
//     (then the engine, not the sample, changed).
//   - Shifts: a fit that explained its window, whose last onlineMin new
//     prompt shapes measure on average 50% or more off it, is refitted
//     from those since the likeliest change point alone.
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
	// driftBias is the mean log ratio of measured to predicted time, over
	// the last onlineMin new prompt shapes, past which the engine is taken
	// to have changed speed (a 50% bias either way): the window then keeps
	// only those samples (shift). At 25% and three standard errors, the
	// noise of the simulator's default engines (a decode step of 20 ms in
	// prefills of a few ms, W1 at 0.5×) passed for changes and cut windows
	// that were right.
	driftBias = 0.4054651081081644 // ln 1.5
	// outlierRecent is how many of the last 32 verdicts may be outliers
	// before the guard stands aside: the fit is what is wrong.
	outlierRecent = 12
	// materialChange is the relative change of a parameter that makes the
	// fit new (OnlineStats.Age starts over).
	materialChange = 0.05
	// PoorError is the relative RMS error above which a fit of a full
	// window is poor (OnlineStats.Poor) until its error halves: the prefill
	// times vary for reasons the model does not price, and the configured
	// values are the safer price.
	PoorError = 0.5
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
	// Poor reports that the fit's error went above PoorError over a full
	// window and has not fallen below half of it since.
	Poor bool
	// Shifts counts the changes of speed seen (the window cut to its most
	// recent samples).
	Shifts int
}

// Online fits a, b, d and the decode step (Model.DecodeStepSecs) to a
// replica's measured prefills as they come.
// It starts no goroutines and reads no clock: the caller passes each
// sample. An Online is owned by one replica actor (or one simulated
// replica) and is not safe for concurrent use.
type Online struct {
	prior, fit, anchor Model
	ring               [OnlineWindow]Sample
	n, next            int    // samples in the ring, and where the next goes
	fresh              int    // accepted since the last refit
	verdicts           uint64 // the last 64 guarded verdicts, 1 for an outlier
	// drift holds the log of measured over predicted of the last accepted
	// samples since the last shift, dn of them (see shift).
	drift [onlineMin]float64
	dn    int
	stats OnlineStats
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

// SetDecodeToken changes the fit's DecodeTokenSecs, which it does not fit
// either (it prices TPOT, which no prefill sample shows), keeping
// everything else.
func (o *Online) SetDecodeToken(secs float64) {
	o.prior.DecodeTokenSecs, o.fit.DecodeTokenSecs = secs, secs
}

// Model returns the fit: the configured values until the first refit
// with enough spread, with the prior's DecodeInterferenceSecs.
func (o *Online) Model() Model { return o.fit }

// InEffect returns the model that should price the replica, and whether
// it is the fit: the fit once fitted and while not Poor, else the
// configured values.
func (o *Online) InEffect() (Model, bool) {
	if o.stats.Fitted && !o.stats.Poor {
		return o.fit, true
	}
	return o.prior, false
}

// Stats returns the fit's state.
func (o *Online) Stats() OnlineStats { return o.stats }

// Observe takes one measured prefill: s.Computed tokens after s.Cached
// cached ones took s.Secs.
func (o *Online) Observe(s Sample) Verdict {
	if s.Computed < 0 || s.Cached < 0 || !(s.Secs > 0) || math.IsInf(s.Secs, 0) {
		return Invalid
	}
	pred := o.fit.PrefillSecs(s.Computed, s.Cached)
	if s.Decoding {
		pred += o.fit.DecodeStepSecs
	}
	if o.stats.Fitted {
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
		if r := &o.ring[i]; r.Computed == s.Computed && r.Cached == s.Cached && r.Decoding == s.Decoding {
			// A prompt the window holds: its time is refreshed, and it
			// brings no new shape, so no refit.
			r.Secs = s.Secs
			return Accepted
		}
	}
	if o.stats.Fitted && pred > 0 {
		o.drift[o.dn%len(o.drift)] = math.Log(s.Secs / pred)
		o.dn++
		// A fit that explained its window is what a shift replaces; a
		// poor one was never right, and its errors are no change.
		if o.dn >= len(o.drift) && o.stats.RelError < PoorError && drifted(o.drift[:]) {
			o.shift(s)
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

// The fitted terms, in the order of a Sample's regressors (terms).
const (
	termA = iota // a, per computed token
	termB        // b, per pair
	termD        // d, per prefill
	termE        // DecodeStepSecs, per prefill sharing a decode step
	nTerms
)

// terms are a sample's weighted regressors: u/y, u(c+u/2)/y, 1/y, and
// 1/y again when it shared a decode step (else 0).
func terms(s Sample) [nTerms]float64 {
	u, c, w := float64(s.Computed), float64(s.Cached), 1/s.Secs
	t := [nTerms]float64{u * w, u * (c + u/2) * w, w, 0}
	if s.Decoding {
		t[termE] = w
	}
	return t
}

// params and setParams map a Model to the fitted terms and back.
func params(m Model) [nTerms]float64 {
	return [nTerms]float64{m.PrefillTokenSecs, m.PrefillPairSecs, m.PrefillFixedSecs, m.DecodeStepSecs}
}

func setParams(m *Model, p [nTerms]float64) {
	m.PrefillTokenSecs, m.PrefillPairSecs, m.PrefillFixedSecs, m.DecodeStepSecs = p[0], p[1], p[2], p[3]
}

// shift is a change of the engine's speed, seen as the last onlineMin new
// prompt shapes measuring, on average, 50% or more off the fit (drifted): the window
// keeps only the onlineMin most recent samples (s among them) and is
// refitted from them at once. Left to the ring, the old samples would go
// only as new ones replace them, and a replica that got slower gets little
// traffic, so few new samples: its fit would mix the two speeds for
// thousands of requests (in the fleet simulator, mix seed 3: a stayed at
// the old speed and the replica's share fell to 2%).
//
// The samples kept are those since the likeliest change: of the newest k
// (from 8 to onlineMin), the k whose mean log ratio m makes k·m² largest
// (the likelihood ratio of a shift in the mean), so that samples from
// before the change do not stay to pull the new fit back.
func (o *Online) shift(s Sample) {
	o.ring[o.next] = s
	o.next = (o.next + 1) % OnlineWindow
	o.n = min(o.n+1, OnlineWindow)
	keep, best, sum := 0, -1.0, 0.0
	for k := 1; k <= len(o.drift); k++ {
		sum += o.drift[(o.dn-k+len(o.drift))%len(o.drift)]
		if m := sum / float64(k); k >= onlineMin/4 && float64(k)*m*m > best {
			keep, best = k, float64(k)*m*m
		}
	}
	keep = min(keep, o.n)
	var recent [onlineMin]Sample
	for k := range keep {
		recent[keep-1-k] = o.ring[(o.next-1-k+OnlineWindow)%OnlineWindow]
	}
	o.ring = [OnlineWindow]Sample{}
	copy(o.ring[:], recent[:keep])
	o.n, o.next, o.dn = keep, keep%OnlineWindow, 0
	o.stats.Shifts++
	o.refit()
}

// drifted reports whether the log ratios v are biased: their mean is past
// driftBias either way and four standard errors from 0, so that noisy
// samples around a right fit do not pass for a change.
func drifted(v []float64) bool {
	var s, ss float64
	for _, x := range v {
		s += x
	}
	m := s / float64(len(v))
	for _, x := range v {
		ss += (x - m) * (x - m)
	}
	se := math.Sqrt(ss/float64(len(v)-1)) / math.Sqrt(float64(len(v)))
	return math.Abs(m) > driftBias && math.Abs(m) > 4*se
}

// refit fits the window, as far as its spread allows: the first of these
// sets of free terms the window tells apart (spreadAll for three or four,
// spreadTwo for two), the others held.
//
// d and the decode step are told apart only by samples taken with nothing
// decoding, which ordinary traffic on a busy engine rarely has. Without
// enough of both kinds, the window's fixed time F (d, plus the decode step
// where it applies) is fitted as one term and split: on a window of mostly
// decoding samples d keeps the configured value (or F, when less) and the
// decode step takes the rest of F; on a mostly idle one d is F. Put whole
// into d, the decode step would be added to the prefill queue for every
// queued request, while the engine pays it once per batched step.
func (o *Online) refit() {
	o.fresh = 0
	o.stats.Refits++
	win := o.ring[:o.n]
	decoding, idle := 0, 0
	for _, s := range win {
		if s.Decoding {
			decoding++
		} else {
			idle++
		}
	}
	sets := [][]int{{termA, termB, termD}, {termA, termD}}
	both := min(decoding, idle) >= onlineMin/4
	if both {
		sets = append([][]int{{termA, termB, termD, termE}}, sets...)
	}
	for _, free := range sets {
		least := spreadAll
		if len(free) == 2 {
			least = spreadTwo
		}
		merged := !slices.Contains(free, termE)
		if gramDet(win, free, merged) < least {
			continue
		}
		next, ok := o.solve(win, free, merged)
		if !ok {
			continue
		}
		if merged {
			next = o.split(next, decoding > idle)
		}
		o.stats.Spread = true
		o.fit = next
		o.stats.Fitted = true
		o.stats.RelError = onlineError(next, win)
		switch {
		case o.n == OnlineWindow && o.stats.RelError > PoorError:
			o.stats.Poor = true
		case o.stats.RelError < PoorError/2:
			o.stats.Poor = false
		}
		if changed(o.anchor, next) {
			o.anchor = next
			o.stats.Age = 0
		}
		return
	}
	o.stats.Spread = false
}

// split divides a merged fit's fixed time F (in its d) between d and the
// decode step: on a mostly decoding window d is the configured value, or F
// when less, and the step the rest; else d is F and the step stays.
func (o *Online) split(m Model, decoding bool) Model {
	if decoding {
		f := m.PrefillFixedSecs
		m.PrefillFixedSecs = min(o.prior.PrefillFixedSecs, f)
		m.DecodeStepSecs = f - m.PrefillFixedSecs
		return m
	}
	m.DecodeStepSecs = o.fit.DecodeStepSecs
	return m
}

// solve is the weighted non-negative fit of the window's free terms, the
// others held at the fit in effect. merged fits the fixed time as one term
// (d's), whether a sample shared a decode step or not.
func (o *Online) solve(win []Sample, free []int, merged bool) (Model, bool) {
	held := params(o.fit)
	if merged {
		held[termD], held[termE] = o.fit.PrefillFixedSecs+o.fit.DecodeStepSecs, 0
	}
	rows := make([][]float64, 0, len(win))
	rhs := make([]float64, 0, len(win))
	for _, s := range win {
		t := terms(s)
		if merged {
			t[termE] = 0
		}
		row := make([]float64, len(free))
		r := 1.0
		for k := range t {
			if j := slices.Index(free, k); j >= 0 {
				row[j] = t[k]
			} else {
				r -= held[k] * t[k]
			}
		}
		rows, rhs = append(rows, row), append(rhs, r)
	}
	x, err := scaledNNLS(rows, rhs)
	if err != nil {
		return Model{}, false
	}
	p := held
	for j, k := range free {
		p[k] = x[j]
	}
	next := o.prior
	setParams(&next, p)
	return next, true
}

// onlineError is RelError with the decode step priced on the samples that
// shared one.
func onlineError(m Model, win []Sample) float64 {
	var ss float64
	for _, s := range win {
		t := terms(s)
		p := params(m)
		pred := 0.0
		for k := range t {
			pred += p[k] * t[k] // relative: each term is over the time
		}
		ss += (pred - 1) * (pred - 1)
	}
	return math.Sqrt(ss / float64(max(len(win), 1)))
}

// changed reports whether any fitted term differs between x and y by
// materialChange or more, relative to x (or at all, where x's is 0).
func changed(x, y Model) bool {
	px, py := params(x), params(y)
	for k := range px {
		if math.Abs(py[k]-px[k]) > materialChange*math.Abs(px[k]) || px[k] == 0 && py[k] != 0 {
			return true
		}
	}
	return false
}

// gramDet is the determinant of the Gram matrix of the window's free
// weighted regressors (terms) scaled to unit length: 1 when they are
// orthogonal, 0 when they are collinear, as identical samples make them.
func gramDet(win []Sample, free []int, merged bool) float64 {
	n := len(free)
	g := make([][]float64, n)
	for i := range g {
		g[i] = make([]float64, n)
	}
	for _, s := range win {
		t := terms(s)
		if merged {
			t[termE] = 0
		}
		for i, ki := range free {
			for j, kj := range free {
				g[i][j] += t[ki] * t[kj]
			}
		}
	}
	for i := range n {
		if !(g[i][i] > 0) {
			return 0
		}
	}
	norm := make([]float64, n)
	for i := range n {
		norm[i] = math.Sqrt(g[i][i])
	}
	for i := range n {
		for j := range n {
			g[i][j] /= norm[i] * norm[j]
		}
	}
	// Gaussian elimination with partial pivoting.
	det := 1.0
	for c := range n {
		p := c
		for r := c + 1; r < n; r++ {
			if math.Abs(g[r][c]) > math.Abs(g[p][c]) {
				p = r
			}
		}
		if g[p][c] == 0 {
			return 0
		}
		if p != c {
			g[p], g[c] = g[c], g[p]
			det = -det
		}
		det *= g[c][c]
		for r := c + 1; r < n; r++ {
			f := g[r][c] / g[c][c]
			for k := c; k < n; k++ {
				g[r][k] -= f * g[c][k]
			}
		}
	}
	return det
}

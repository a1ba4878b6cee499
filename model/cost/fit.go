package cost

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Calibration: inferrail calibrate sends an idle engine the probes of a
// Plan, measures each one's prefill as a Sample and fits a, b and d to them
// with Fit. The fitted Model is pasted into the config as the Fragment
// renders it.

// Probe is one planned calibration prompt: Cached tokens are sent alone
// first, so that the engine holds them, then the probe itself, the same
// Cached tokens followed by Compute fresh ones, whose prefill is timed.
// A Probe is a plain value.
type Probe struct {
	Cached  int // c
	Compute int // u
}

// Plan is what a calibration sends: every pair of a Cached and a Compute
// size, Repeats times over. A Plan is a plain value; its slices are the
// caller's.
type Plan struct {
	// Cached lists the cached prefix lengths c, in tokens. Multiples of the
	// engine's block size are cached whole; vLLM caches full blocks only.
	Cached []int
	// Compute lists the computed lengths u, in tokens.
	Compute []int
	// Repeats is how many times each pair is sent.
	Repeats int
}

// DefaultPlan returns the default calibration: c in {0, 512, 1024, 2048,
// 4096} and u in {64, 256, 1024, 2048}, once each. Its 20 probes span the
// prompt lengths a chat fleet sees, so that the pair term b*u*(c + u/2)
// is told apart from the per-token term a*u, and the shortest ones pin the
// fixed cost d. Against the simulator's default latency model a run takes
// about 5 s, the cached parts sent ahead of the probes included.
func DefaultPlan() Plan {
	return Plan{
		Cached:  []int{0, 512, 1024, 2048, 4096},
		Compute: []int{64, 256, 1024, 2048},
		Repeats: 1,
	}
}

// Validate reports every problem with p at once: sizes out of range, and
// sizes too few for the three parameters to be told apart (two compute
// sizes, and either two cached sizes or three compute sizes).
func (p Plan) Validate() error {
	var errs []error
	for _, c := range p.Cached {
		if c < 0 {
			errs = append(errs, fmt.Errorf("cached size %d: negative", c))
		}
	}
	for _, u := range p.Compute {
		if u < 1 {
			errs = append(errs, fmt.Errorf("compute size %d: less than 1", u))
		}
	}
	if p.Repeats < 1 {
		errs = append(errs, fmt.Errorf("repeats %d: less than 1", p.Repeats))
	}
	nc, nu := distinct(p.Cached), distinct(p.Compute)
	if nu < 2 || nc < 2 && nu < 3 {
		errs = append(errs, fmt.Errorf("%d cached and %d compute sizes cannot tell a, b and d apart: "+
			"want two compute sizes, and two cached sizes or three compute sizes", nc, nu))
	}
	return errors.Join(errs...)
}

func distinct(v []int) int {
	s := slices.Clone(v)
	slices.Sort(s)
	return len(slices.Compact(s))
}

// Probes returns the plan's probes: for each repeat, every cached size with
// every compute size, in the order the plan lists them.
func (p Plan) Probes() []Probe {
	out := make([]Probe, 0, max(p.Repeats, 0)*len(p.Cached)*len(p.Compute))
	for range p.Repeats {
		for _, c := range p.Cached {
			for _, u := range p.Compute {
				out = append(out, Probe{Cached: c, Compute: u})
			}
		}
	}
	return out
}

// Sample is one measured prefill on an idle engine: Computed tokens after
// Cached ones took Secs seconds. Counts are what the engine reported, not
// what was planned, so an engine that cached less than planned is fitted on
// what it actually computed. A Sample is a plain value.
type Sample struct {
	Computed, Cached int
	Secs             float64
	// Decoding reports that requests were decoding on the engine as the
	// prefill ran, so that it shared their decode step (Online fits that
	// as DecodeStepSecs); Fit's samples, on an idle engine, never are.
	Decoding bool
}

// ErrFit means the samples cannot determine a, b and d.
var ErrFit = errors.New("cost: cannot fit")

// Fit returns the a, b and d (PrefillTokenSecs, PrefillPairSecs and
// PrefillFixedSecs) that fit the samples best, all at least 0; it leaves
// DecodeInterferenceSecs 0, which prefills timed alone cannot show.
//
// The fit is non-negative least squares (Lawson and Hanson, "Solving Least
// Squares Problems", 1974, ch. 23) on relative errors: each sample's error
// counts as a share of its time. A timer's noise grows with what it times,
// so in absolute terms the longest prompts alone would decide d, which
// prices every short request.
//
// The error wraps ErrFit when a sample is malformed (negative counts, a time
// that is not finite and positive) or the samples' sizes cannot tell the
// three parameters apart (see Plan.Validate).
func Fit(samples []Sample) (Model, error) {
	us, cs := make([]int, 0, len(samples)), make([]int, 0, len(samples))
	for i, s := range samples {
		if s.Computed < 0 || s.Cached < 0 || !(s.Secs > 0) || math.IsInf(s.Secs, 0) {
			return Model{}, fmt.Errorf("%w: sample %d: %+v", ErrFit, i, s)
		}
		us, cs = append(us, s.Computed), append(cs, s.Cached)
	}
	if err := (Plan{Cached: cs, Compute: us, Repeats: 1}).Validate(); err != nil {
		return Model{}, fmt.Errorf("%w: %w", ErrFit, err)
	}
	a := make([][]float64, len(samples))
	b := make([]float64, len(samples))
	for i, s := range samples {
		u, c, w := float64(s.Computed), float64(s.Cached), 1/s.Secs
		a[i] = []float64{u * w, u * (c + u/2) * w, w}
		b[i] = 1
	}
	x, err := scaledNNLS(a, b)
	if err != nil {
		return Model{}, err
	}
	return Model{PrefillTokenSecs: x[0], PrefillPairSecs: x[1], PrefillFixedSecs: x[2]}, nil
}

// scaledNNLS solves min ||A x - b|| subject to x >= 0 with A's columns
// first scaled to unit length: a per-token, a per-pair and a fixed column
// differ by orders of magnitude, and non-negativity survives a positive
// scale. It scales a in place. The error wraps ErrFit when a column is all
// zeros (its parameter has no effect on any row).
func scaledNNLS(a [][]float64, b []float64) ([]float64, error) {
	scale := make([]float64, len(a[0]))
	for j := range scale {
		for i := range a {
			scale[j] += a[i][j] * a[i][j]
		}
		scale[j] = math.Sqrt(scale[j])
		if scale[j] == 0 {
			return nil, fmt.Errorf("%w: parameter %d has no effect on any sample", ErrFit, j)
		}
		for i := range a {
			a[i][j] /= scale[j]
		}
	}
	x := nnls(a, b)
	for j := range x {
		x[j] /= scale[j]
	}
	return x, nil
}

// RelError returns the root mean square of m's relative errors over the
// samples, (P(u, c) - Secs) / Secs: how well a fit explains them.
func RelError(m Model, samples []Sample) float64 {
	if len(samples) == 0 {
		return 0
	}
	var ss float64
	for _, s := range samples {
		e := (m.PrefillSecs(s.Computed, s.Cached) - s.Secs) / s.Secs
		ss += e * e
	}
	return math.Sqrt(ss / float64(len(samples)))
}

// nnls solves min ||A x - b|| subject to x >= 0 by Lawson and Hanson's
// active set method. a holds the rows of A (m rows of n columns, m >= 1);
// nothing is modified. Every coefficient returned is at least 0. The method
// ends in at most a few times n outer steps; a cap of 30 n guards against
// cycling on rounding, returning the last feasible point.
func nnls(a [][]float64, b []float64) []float64 {
	m, n := len(a), len(a[0])
	x := make([]float64, n)
	passive := make([]bool, n)
	w := make([]float64, n)
	// Tolerance as in MATLAB's lsqnonneg and SciPy: 10 eps ||A||_1 max(m, n).
	var norm1 float64
	for j := range n {
		var s float64
		for i := range m {
			s += math.Abs(a[i][j])
		}
		norm1 = max(norm1, s)
	}
	tol := 10 * 0x1p-52 * norm1 * float64(max(m, n))

	gradient := func() {
		clear(w)
		for i := range m {
			r := b[i]
			for j := range n {
				r -= a[i][j] * x[j]
			}
			for j := range n {
				w[j] += a[i][j] * r
			}
		}
	}
	gradient()
	// excluded holds columns that entered and, by rounding, could not move
	// the fit; they wait until x changes.
	excluded := make([]bool, n)
	for iter := 0; iter < 30*n; iter++ {
		t, best := -1, tol
		for j := range n {
			if !passive[j] && !excluded[j] && w[j] > best {
				t, best = j, w[j]
			}
		}
		if t < 0 {
			break // the Kuhn-Tucker conditions hold
		}
		passive[t] = true
		for first := true; ; first = false {
			z := leastSquares(a, b, passive)
			if first && z[t] <= 0 {
				// In exact arithmetic w[t] > 0 makes z[t] > 0.
				passive[t], excluded[t] = false, true
				break
			}
			// Step from x towards z until the first passive coefficient
			// reaches 0; a z that is positive throughout is the new x.
			alpha, stop := math.Inf(1), -1
			for j := range n {
				if passive[j] && z[j] <= 0 {
					r := 0.0 // x[j] = z[j] = 0: a dependent column, already at 0
					if x[j] > z[j] {
						r = x[j] / (x[j] - z[j])
					}
					if r < alpha {
						alpha, stop = r, j
					}
				}
			}
			if stop < 0 {
				copy(x, z)
				clear(excluded)
				break
			}
			for j := range n {
				x[j] += alpha * (z[j] - x[j])
				if passive[j] && (j == stop || x[j] <= tol) {
					passive[j], x[j] = false, 0
				}
			}
			clear(excluded)
		}
		gradient()
	}
	for j := range x {
		if !(x[j] > 0) {
			x[j] = 0
		}
	}
	return x
}

// leastSquares solves min ||A_P z - b|| over the columns in passive by
// Householder QR and returns z with 0 outside them. A column that is
// (numerically) a combination of earlier ones gets 0.
func leastSquares(a [][]float64, b []float64, passive []bool) []float64 {
	m := len(a)
	var cols []int
	for j, p := range passive {
		if p {
			cols = append(cols, j)
		}
	}
	k := len(cols)
	// r is A_P, column-major, and y is b; both are reduced in place.
	r := make([][]float64, k)
	for c, j := range cols {
		r[c] = make([]float64, m)
		for i := range m {
			r[c][i] = a[i][j]
		}
	}
	y := slices.Clone(b)
	diag := make([]float64, k)
	for c := 0; c < k && c < m; c++ {
		col := r[c]
		var norm float64
		for i := c; i < m; i++ {
			norm += col[i] * col[i]
		}
		norm = math.Sqrt(norm)
		if norm == 0 {
			continue
		}
		if col[c] > 0 {
			norm = -norm
		}
		// v = col[c:] - norm*e1, stored in col[c:]; H = I - 2vv'/v'v.
		col[c] -= norm
		vv := 0.0
		for i := c; i < m; i++ {
			vv += col[i] * col[i]
		}
		reflect := func(v []float64) {
			var d float64
			for i := c; i < m; i++ {
				d += col[i] * v[i]
			}
			d = 2 * d / vv
			for i := c; i < m; i++ {
				v[i] -= d * col[i]
			}
		}
		for c2 := c + 1; c2 < k; c2++ {
			reflect(r[c2])
		}
		reflect(y)
		diag[c] = norm
	}
	z := make([]float64, len(passive))
	sol := make([]float64, k)
	var big float64
	for _, d := range diag {
		big = max(big, math.Abs(d))
	}
	for c := min(k, m) - 1; c >= 0; c-- {
		if math.Abs(diag[c]) <= 1e-12*big {
			continue // dependent column: leave it at 0
		}
		s := y[c]
		for c2 := c + 1; c2 < k; c2++ {
			s -= r[c2][c] * sol[c2]
		}
		sol[c] = s / diag[c]
	}
	for c, j := range cols {
		z[j] = sol[c]
	}
	return z
}

// Fragment renders m's prefill parameters as the cost_model section of a
// config, to paste under routing: (or under one model's entry), after one
// "# " comment line per entry of comments. DecodeInterferenceSecs is left
// out: a calibration does not measure it, and a cost_model that omits a key
// keeps its default there. Values keep four significant digits, written
// without exponents.
func Fragment(m Model, comments ...string) []byte {
	var sb strings.Builder
	for _, c := range comments {
		sb.WriteString("# ")
		sb.WriteString(strings.NewReplacer("\r", " ", "\n", " ").Replace(c))
		sb.WriteByte('\n')
	}
	sb.WriteString("cost_model:\n")
	for _, kv := range []struct {
		key  string
		v    float64
		what string
	}{
		{"prefill_token_secs", m.PrefillTokenSecs, "a, per computed token"},
		{"prefill_pair_secs", m.PrefillPairSecs, "b, per pair of computed and attended tokens"},
		{"prefill_fixed_secs", m.PrefillFixedSecs, "d, per prefill"},
	} {
		v := decimal(kv.v)
		fmt.Fprintf(&sb, "  %-19s %-20s # %s\n", kv.key+":", v, kv.what)
	}
	return []byte(sb.String())
}

// decimal writes v rounded to four significant digits, without an exponent
// (YAML 1.1 readers take 3.3e-09 for a string).
func decimal(v float64) string {
	if !(v > 0) || math.IsInf(v, 0) {
		return "0"
	}
	r, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 4, 64), 64)
	return strconv.FormatFloat(r, 'f', -1, 64)
}

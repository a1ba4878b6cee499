package cost

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// samplesOf prices plan's probes with m, each time scaled by 1 + noise*N(0,1).
func samplesOf(m Model, plan Plan, noise float64, rng *rand.Rand) []Sample {
	var out []Sample
	for _, p := range plan.Probes() {
		secs := m.PrefillSecs(p.Compute, p.Cached) * (1 + noise*rng.NormFloat64())
		out = append(out, Sample{Computed: p.Compute, Cached: p.Cached, Secs: secs})
	}
	return out
}

// within reports whether got is within rel of want.
func within(got, want, rel float64) bool { return math.Abs(got-want) <= rel*math.Abs(want) }

// TestFitRecovers: random non-negative a, b and d come back from the
// default plan's samples, exactly without noise and each within 5% through
// 0.05% of timing noise (b, the least determined, comes within 2% there;
// at 0.2% it strays up to 8%).
func TestFitRecovers(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for iter := range 2000 {
		// Log-uniform, with each term at least a tenth of some probe's
		// time (noise hides a smaller term's parameter): a from
		// 30µs to 300µs per token, b from a/50000 to a/5000 per pair (the
		// pair term is 9% to 50% of the longest probe), d from 20a to 2000a
		// (at least a quarter of the shortest probe).
		logUniform := func(lo, hi float64) float64 { return lo * math.Pow(hi/lo, rng.Float64()) }
		a := logUniform(30e-6, 300e-6)
		want := Model{
			PrefillTokenSecs: a,
			PrefillPairSecs:  a * logUniform(2e-5, 2e-4),
			PrefillFixedSecs: a * logUniform(20, 2000),
		}
		noise, tol := 0.0005, 0.05
		if iter%2 == 0 {
			noise, tol = 0, 1e-9
			// Without noise a parameter may be exactly 0 and stays so.
			switch rng.IntN(4) {
			case 0:
				want.PrefillTokenSecs = 0
			case 1:
				want.PrefillPairSecs = 0
			case 2:
				want.PrefillFixedSecs = 0
			}
		}
		samples := samplesOf(want, DefaultPlan(), noise, rng)
		got, err := Fit(samples)
		if err != nil {
			t.Fatal(err)
		}
		// A parameter that is 0 comes back as at most a negligible share
		// of the longest probe's time.
		longest := want.PrefillSecs(2048, 4096)
		near := func(g, w, most float64) bool {
			if w == 0 {
				return g*most <= 1e-9*longest
			}
			return within(g, w, tol)
		}
		if !near(got.PrefillTokenSecs, want.PrefillTokenSecs, 2048) || !near(got.PrefillPairSecs, want.PrefillPairSecs, 2048*5120) ||
			!near(got.PrefillFixedSecs, want.PrefillFixedSecs, 1) || got.DecodeInterferenceSecs != 0 {
			t.Fatalf("iter %d, noise %g: fit %+v, want %+v", iter, noise, got, want)
		}
		if e := RelError(got, samples); e > 2*noise+1e-9 {
			t.Fatalf("iter %d: relative error %g with noise %g", iter, e, noise)
		}
	}
}

// TestFitNeverNegative: whatever the samples, even ones no non-negative
// model explains (longer prompts taking less time), every parameter is at
// least 0.
func TestFitNeverNegative(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for range 5000 {
		var samples []Sample
		for range 3 + rng.IntN(20) {
			samples = append(samples, Sample{Computed: 1 + rng.IntN(4096), Cached: rng.IntN(3) * rng.IntN(8192),
				Secs: math.Exp(rng.Float64()*10 - 8)})
		}
		m, err := Fit(samples)
		if errors.Is(err, ErrFit) {
			continue
		}
		if err != nil || !(m.PrefillTokenSecs >= 0 && m.PrefillPairSecs >= 0 && m.PrefillFixedSecs >= 0) {
			t.Fatalf("Fit(%v) = %+v, %v", samples, m, err)
		}
	}
}

func TestFitRefuses(t *testing.T) {
	f := func(samples ...Sample) {
		t.Helper()
		if m, err := Fit(samples); !errors.Is(err, ErrFit) {
			t.Fatalf("Fit(%v) = %+v, %v; want ErrFit", samples, m, err)
		}
	}
	ok := []Sample{{Computed: 64, Secs: 0.01}, {Computed: 256, Secs: 0.03}, {Computed: 64, Cached: 512, Secs: 0.012}}
	f()
	f(ok[:2]...)
	f(Sample{Computed: 64, Cached: 0, Secs: 0.01}, Sample{Computed: 64, Cached: 0, Secs: 0.01}, Sample{Computed: 64, Cached: 512, Secs: 0.012}) // one compute size
	f(Sample{Computed: 64, Cached: 0, Secs: 0.01}, Sample{Computed: 256, Cached: 0, Secs: 0.03}, Sample{Computed: 64, Cached: 0, Secs: 0.012})  // one cached size, two compute sizes
	f(append(ok, Sample{Computed: 64, Cached: 0, Secs: 0})...)
	f(append(ok, Sample{Computed: 64, Cached: 0, Secs: math.NaN()})...)
	f(append(ok, Sample{Computed: 64, Cached: 0, Secs: math.Inf(1)})...)
	f(append(ok, Sample{Computed: -1, Cached: 0, Secs: 0.01})...)
	f(append(ok, Sample{Computed: 64, Cached: -1, Secs: 0.01})...)
	if _, err := Fit(ok); err != nil {
		t.Fatal(err)
	}
	// Three compute sizes tell the parameters apart without a cache.
	if _, err := Fit([]Sample{{Computed: 64, Secs: 0.01}, {Computed: 256, Secs: 0.03}, {Computed: 1024, Secs: 0.12}}); err != nil {
		t.Fatal(err)
	}
}

func TestPlan(t *testing.T) {
	p := DefaultPlan()
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	probes := p.Probes()
	if len(probes) != 20 || probes[0] != (Probe{0, 64}) || probes[19] != (Probe{4096, 2048}) {
		t.Fatalf("default probes: %v", probes)
	}
	p.Repeats = 2
	if n := len(p.Probes()); n != 40 {
		t.Fatalf("two repeats: %d probes", n)
	}
	f := func(p Plan, problems int) {
		t.Helper()
		err := p.Validate()
		n := 0
		if err != nil {
			n = len(err.(interface{ Unwrap() []error }).Unwrap())
		}
		if n != problems {
			t.Fatalf("%+v: %d problems (%v), want %d", p, n, err, problems)
		}
	}
	f(Plan{Cached: []int{0, 512}, Compute: []int{64, 256}, Repeats: 1}, 0)
	f(Plan{Cached: []int{0}, Compute: []int{64, 256, 1024}, Repeats: 1}, 0)
	f(Plan{Cached: []int{0}, Compute: []int{64, 256}, Repeats: 1}, 1)
	f(Plan{Cached: []int{0, 0}, Compute: []int{64, 64, 64}, Repeats: 1}, 1)
	f(Plan{Cached: []int{-1, 512}, Compute: []int{0, 64, 256}, Repeats: 0}, 3)
}

// normalEquations solves the ordinary least squares problem min ||A x - b||
// through A'A x = A'b by Gaussian elimination with partial pivoting: the
// reference, independent of nnls's QR, for well-conditioned A.
func normalEquations(a [][]float64, b []float64) []float64 {
	n := len(a[0])
	m := make([][]float64, n)
	for j := range n {
		m[j] = make([]float64, n+1)
		for k := range n {
			for i := range a {
				m[j][k] += a[i][j] * a[i][k]
			}
		}
		for i := range a {
			m[j][n] += a[i][j] * b[i]
		}
	}
	for c := range n {
		p := c
		for r := c + 1; r < n; r++ {
			if math.Abs(m[r][c]) > math.Abs(m[p][c]) {
				p = r
			}
		}
		m[c], m[p] = m[p], m[c]
		for r := c + 1; r < n; r++ {
			f := m[r][c] / m[c][c]
			for k := c; k <= n; k++ {
				m[r][k] -= f * m[c][k]
			}
		}
	}
	x := make([]float64, n)
	for c := n - 1; c >= 0; c-- {
		s := m[c][n]
		for k := c + 1; k < n; k++ {
			s -= m[c][k] * x[k]
		}
		x[c] = s / m[c][c]
	}
	return x
}

func randomSystem(rng *rand.Rand) (a [][]float64, b []float64) {
	n := 1 + rng.IntN(4)
	m := n + rng.IntN(3*n)
	a = make([][]float64, m)
	b = make([]float64, m)
	for i := range a {
		a[i] = make([]float64, n)
		for j := range a[i] {
			a[i][j] = rng.NormFloat64()
		}
		b[i] = rng.NormFloat64()
	}
	return a, b
}

func residual(a [][]float64, b, x []float64) float64 {
	var ss float64
	for i := range a {
		r := b[i]
		for j := range x {
			r -= a[i][j] * x[j]
		}
		ss += r * r
	}
	return ss
}

// TestNNLSIsOLSWhenThatIsNonNegative: when the ordinary least squares
// solution has no negative coefficient, nnls returns it.
func TestNNLSIsOLSWhenThatIsNonNegative(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	checked := 0
	for range 20000 {
		a, b := randomSystem(rng)
		if rng.IntN(2) == 0 {
			// Mostly positive solutions: b = A x + a little noise, x > 0.
			for i := range a {
				b[i] *= 0.05
				for j := range a[i] {
					b[i] += a[i][j] * float64(j+1)
				}
			}
		}
		ols := normalEquations(a, b)
		if cond(a) > 1e6 || min(ols[0], ols[len(ols)-1]) <= 1e-6 || anyBelow(ols, 1e-6) {
			continue
		}
		checked++
		got := nnls(a, b)
		for j := range got {
			if math.Abs(got[j]-ols[j]) > 1e-8*(1+math.Abs(ols[j])) {
				t.Fatalf("A=%v b=%v: nnls %v, ols %v", a, b, got, ols)
			}
		}
	}
	if checked < 5000 {
		t.Fatalf("only %d systems had a positive OLS solution", checked)
	}
}

func anyBelow(x []float64, v float64) bool {
	for _, e := range x {
		if e < v {
			return true
		}
	}
	return false
}

// cond estimates the condition of A'A roughly enough to skip the nearly
// singular systems on which the normal equations themselves go wrong.
func cond(a [][]float64) float64 {
	n := len(a[0])
	var lo, hi float64 = math.Inf(1), 0
	for j := range n {
		var s float64
		for i := range a {
			s += a[i][j] * a[i][j]
		}
		lo, hi = min(lo, s), max(hi, s)
	}
	if len(a) < n+2 {
		return math.Inf(1)
	}
	return hi / lo
}

// TestNNLSOptimal: on any system nnls returns a non-negative x no worse
// than the best non-negative OLS solution over every subset of the columns
// (the optimum lies on one of them), and x meets the Kuhn-Tucker conditions.
func TestNNLSOptimal(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for range 20000 {
		a, b := randomSystem(rng)
		n := len(a[0])
		x := nnls(a, b)
		for _, v := range x {
			if !(v >= 0) {
				t.Fatalf("A=%v b=%v: negative coefficient in %v", a, b, x)
			}
		}
		got := residual(a, b, x)
		best := residual(a, b, make([]float64, n))
		for set := 1; set < 1<<n; set++ {
			var cols []int
			for j := range n {
				if set&(1<<j) != 0 {
					cols = append(cols, j)
				}
			}
			sub := make([][]float64, len(a))
			for i := range a {
				for _, j := range cols {
					sub[i] = append(sub[i], a[i][j])
				}
			}
			if len(a) < len(cols) {
				continue
			}
			z := normalEquations(sub, b)
			if anyBelow(z, 0) || math.IsNaN(z[0]) {
				continue
			}
			full := make([]float64, n)
			for k, j := range cols {
				full[j] = z[k]
			}
			best = min(best, residual(a, b, full))
		}
		if got > best*(1+1e-9)+1e-12 {
			t.Fatalf("A=%v b=%v: nnls %v leaves %g, best %g", a, b, x, got, best)
		}
		// Kuhn-Tucker: the gradient A'(b - Ax) is 0 where x > 0 and at
		// most 0 where x = 0.
		for j := range n {
			var w float64
			for i := range a {
				r := b[i]
				for k := range n {
					r -= a[i][k] * x[k]
				}
				w += a[i][j] * r
			}
			if x[j] > 0 && math.Abs(w) > 1e-9 || x[j] == 0 && w > 1e-9 {
				t.Fatalf("A=%v b=%v: x=%v, gradient %g at %d", a, b, x, w, j)
			}
		}
	}
}

func ExampleFragment() {
	fmt.Print(string(Fragment(Default(), "fitted by inferrail calibrate, seed 42")))
	// Output:
	// # fitted by inferrail calibrate, seed 42
	// cost_model:
	//   prefill_token_secs: 0.0001               # a, per computed token
	//   prefill_pair_secs:  0.0000000033         # b, per pair of computed and attended tokens
	//   prefill_fixed_secs: 0.005                # d, per prefill
}

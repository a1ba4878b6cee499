package whatif

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// Bisect on a monotone predicate finds the first candidate that meets,
// every candidate it asked about below the answer failed, it asks about
// each at most once and no more than searchBound, and it asks for the one
// before the answer and knee after it.
func TestBisectProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		n := 1 + rng.IntN(40)
		first := rng.IntN(n + 1) // n: none meets
		knee := rng.IntN(4)
		seen := map[int]int{}
		asked, err := Bisect(n, knee, func(i int) (bool, error) {
			if i < 0 || i >= n {
				t.Fatalf("n=%d: asked about %d", n, i)
			}
			seen[i]++
			return i >= first, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if asked != len(seen) || asked > searchBound(n, knee, false) {
			t.Fatalf("n=%d first=%d knee=%d: asked %d (%d distinct), bound %d", n, first, knee, asked, len(seen), searchBound(n, knee, false))
		}
		got := n
		for i := range seen {
			if seen[i] > 1 {
				t.Fatalf("n=%d: asked about %d %d times", n, i, seen[i])
			}
			if i >= first && i < got {
				got = i
			}
		}
		if got != first {
			t.Fatalf("n=%d: found %d, want %d (asked %v)", n, got, first, seen)
		}
		if first < n {
			for i := max(first-1, 0); i <= min(first+knee, n-1); i++ {
				if seen[i] == 0 {
					t.Fatalf("n=%d first=%d knee=%d: %d not asked (asked %v)", n, first, knee, i, seen)
				}
			}
		}
	}
}

func TestBisectError(t *testing.T) {
	boom := errors.New("boom")
	calls := 0
	_, err := Bisect(8, 2, func(int) (bool, error) { calls++; return false, boom })
	if !errors.Is(err, boom) || calls != 1 {
		t.Fatalf("err %v after %d calls", err, calls)
	}
}

// point is a synthetic result.
func point(route string, scale float64, replicas int, meets bool) Result {
	return Result{Point: Point{Route: route, Replicas: replicas, Scale: scale, Rate: 2 * scale}, Meets: meets}
}

// FewestReplicas on random point sets: the fewest is the smallest count
// that meets (0 when none), GPUs and savings follow from it, and a baseline
// that meets nowhere gives a lower bound.
func TestFewestReplicasProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	routes := []string{"round_robin", "least_request", "cost_model"}
	scales := []float64{1, 2}
	for range 1000 {
		var pts []Result
		largest := 2 + rng.IntN(10)
		for _, r := range routes {
			for _, s := range scales {
				for n := 1; n <= largest; n++ {
					if rng.IntN(3) > 0 {
						pts = append(pts, point(r, s, n, rng.IntN(2) == 0))
					}
				}
			}
		}
		gpus := 1 + rng.IntN(4)
		got := FewestReplicas(pts, routes, scales, gpus, largest)
		if len(got) != len(routes)*len(scales) {
			t.Fatalf("%d answers", len(got))
		}
		want := func(r string, s float64) int {
			best := 0
			for _, p := range pts {
				if p.Route == r && p.Scale == s && p.Meets && (best == 0 || p.Replicas < best) {
					best = p.Replicas
				}
			}
			return best
		}
		for _, f := range got {
			n := want(f.Route, f.Scale)
			if f.Replicas != n || f.GPUs != n*gpus {
				t.Fatalf("%s at %g: %d replicas %d GPUs, want %d", f.Route, f.Scale, f.Replicas, f.GPUs, n)
			}
			for _, m := range f.Misses {
				if m <= n || slices.IndexFunc(pts, func(p Result) bool {
					return p.Route == f.Route && p.Scale == f.Scale && p.Replicas == m && !p.Meets
				}) < 0 {
					t.Fatalf("%s at %g: miss %d is not a failing point above %d", f.Route, f.Scale, m, n)
				}
			}
			for _, p := range pts {
				if p.Route == f.Route && p.Scale == f.Scale && n > 0 && p.Replicas > n && !p.Meets && !slices.Contains(f.Misses, p.Replicas) {
					t.Fatalf("%s at %g: miss at %d not listed in %v", f.Route, f.Scale, p.Replicas, f.Misses)
				}
			}
			if n == 0 {
				if f.Saved != nil {
					t.Fatalf("%s at %g met nowhere but saves %v", f.Route, f.Scale, f.Saved)
				}
				continue
			}
			for _, b := range Baselines() {
				bn, atLeast := want(b, f.Scale), false
				if bn == 0 {
					bn, atLeast = largest+1, true
				}
				if s := f.Saved[b]; s.GPUs != (bn-n)*gpus || s.AtLeast != atLeast {
					t.Fatalf("%s at %g against %s: %+v, want %d GPUs (at least %v)", f.Route, f.Scale, b, s, (bn-n)*gpus, atLeast)
				}
			}
			if f.Route == "round_robin" && f.Saved["round_robin"] != (Saving{}) {
				t.Fatalf("round_robin saves %v against itself", f.Saved["round_robin"])
			}
		}
	}
}

// A baseline not among the routes gives no saving against it.
func TestFewestReplicasWithoutBaseline(t *testing.T) {
	got := FewestReplicas([]Result{point("cost_model", 1, 3, true)}, []string{"cost_model"}, []float64{1}, 4, 8)
	if len(got) != 1 || got[0].Replicas != 3 || got[0].GPUs != 12 || got[0].Saved != nil {
		t.Fatalf("%+v", got)
	}
	if !slices.Equal(Baselines(), []string{"round_robin", "least_request"}) {
		t.Fatalf("baselines %v", Baselines())
	}
}

// RateSearch on a synthetic monotone objective (meets below a threshold)
// brackets the threshold within its precision from any start, probes each
// rate once and no more than Probes times, and reports no bracket when
// the threshold lies beyond its reach.
func TestRateSearchBrackets(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 2000 {
		s := RateSearch{Grow: 1 + rng.Float64()*2, Bracket: 1 + rng.IntN(8), Steps: rng.IntN(7)}
		if err := s.Validate(); err != nil {
			t.Fatal(err)
		}
		threshold := math.Exp(rng.NormFloat64() * 2)
		start := math.Exp(rng.NormFloat64() * 2)
		seen := map[float64]bool{}
		f, err := s.Find(start, func(r float64) (bool, error) {
			if seen[r] {
				t.Fatalf("%+v from %v: asked about %v twice", s, start, r)
			}
			seen[r] = true
			return r <= threshold, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if f.Probes != len(seen) || f.Probes > s.Probes() {
			t.Fatalf("%+v: %d probes (%d rates), bound %d", s, f.Probes, len(seen), s.Probes())
		}
		reach := math.Pow(s.Grow, float64(s.Bracket))
		switch {
		case f.Bracketed():
			if !(f.Meets <= threshold && threshold < f.Fails) || f.Fails/f.Meets > 1+s.Precision()*(1+1e-9) {
				t.Fatalf("%+v from %v, threshold %v: found [%v, %v), precision %v", s, start, threshold, f.Meets, f.Fails, s.Precision())
			}
		case threshold >= start*reach*(1-1e-9) || threshold < start/reach*(1+1e-9):
			// Out of reach: no bracket is right.
		default:
			t.Fatalf("%+v from %v, threshold %v within reach %v: no bracket (%+v)", s, start, threshold, reach, f)
		}
	}
	boom := errors.New("boom")
	if _, err := (RateSearch{Grow: 2, Bracket: 3, Steps: 2}).Find(1, func(float64) (bool, error) { return false, boom }); !errors.Is(err, boom) {
		t.Fatalf("error %v, want boom", err)
	}
	for _, bad := range []RateSearch{{Grow: 1, Bracket: 2}, {Grow: 2}, {Grow: math.Inf(1), Bracket: 1}, {Grow: 2, Bracket: 1, Steps: -1}} {
		if bad.Validate() == nil {
			t.Errorf("%+v: valid", bad)
		}
	}
}

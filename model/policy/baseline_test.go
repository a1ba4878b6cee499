package policy

import (
	"errors"
	"math/rand/v2"
	"reflect"
	"testing"
)

// baselines returns a fresh instance of every baseline policy.
func baselines() []Policy {
	return []Policy{&RoundRobin{}, Random{}, LeastRequest{}, P2C{}}
}

// randomCands returns 1 to max candidates with distinct replica indexes
// (shuffled, with gaps) and in-flight counts drawn from [0, spread).
func randomCands(rng *rand.Rand, max, spread int) []Candidate {
	n := 1 + rng.IntN(max)
	cands := make([]Candidate, n)
	idx := rng.Perm(3 * n)
	for i := range cands {
		f := rng.IntN(spread)
		cands[i] = Candidate{Replica: idx[i], InFlight: f, Pending: rng.IntN(f + 1)}
	}
	return cands
}

// chiSquare returns Pearson's statistic for counts against a uniform
// expectation.
func chiSquare(counts []int) float64 {
	total := 0
	for _, c := range counts {
		total += c
	}
	want := float64(total) / float64(len(counts))
	var x float64
	for _, c := range counts {
		d := float64(c) - want
		x += d * d / want
	}
	return x
}

// chi2Crit999 holds the 0.999 quantile of the chi-square distribution by
// degrees of freedom (1 to 15), from the standard tables.
var chi2Crit999 = []float64{0, 10.83, 13.82, 16.27, 18.47, 20.52, 22.46, 24.32, 26.12, 27.88, 29.59, 31.26, 32.91, 34.53, 36.12, 37.70}

func TestPickReturnsValidIndex(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	for _, p := range baselines() {
		t.Run(p.Name(), func(t *testing.T) {
			before := []Candidate(nil)
			for iter := 0; iter < 20000; iter++ {
				cands := randomCands(rng, 40, 1+rng.IntN(6))
				before = append(before[:0], cands...)
				i, err := p.Pick(&Request{Key: rng.Uint64()}, cands, rng)
				if err != nil {
					t.Fatalf("Pick(%d candidates): %v", len(cands), err)
				}
				if i < 0 || i >= len(cands) {
					t.Fatalf("Pick(%d candidates) = %d", len(cands), i)
				}
				for k := range cands {
					if !reflect.DeepEqual(cands[k], before[k]) {
						t.Fatalf("Pick modified cands[%d]: %+v, was %+v", k, cands[k], before[k])
					}
				}
			}
			if i, err := p.Pick(&Request{}, nil, rng); !errors.Is(err, ErrNoCandidate) {
				t.Fatalf("Pick(nil) = %d, %v; want ErrNoCandidate", i, err)
			}
		})
	}
}

func TestLeastRequestPicksMinimum(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 2))
	var p LeastRequest
	for iter := 0; iter < 20000; iter++ {
		cands := randomCands(rng, 40, 1+rng.IntN(8))
		i, err := p.Pick(&Request{}, cands, rng)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cands {
			if c.InFlight < cands[i].InFlight {
				t.Fatalf("picked %+v, but %+v has fewer in flight", cands[i], c)
			}
		}
	}
}

func TestP2CNeverPicksUniqueMaximum(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	var p P2C
	for iter := 0; iter < 50000; iter++ {
		cands := randomCands(rng, 20, 1+rng.IntN(5))
		if len(cands) < 2 {
			continue
		}
		max, at := -1, 0
		for _, c := range cands {
			switch {
			case c.InFlight > max:
				max, at = c.InFlight, 1
			case c.InFlight == max:
				at++
			}
		}
		i, err := p.Pick(&Request{}, cands, rng)
		if err != nil {
			t.Fatal(err)
		}
		if at == 1 && cands[i].InFlight == max {
			t.Fatalf("picked the unique maximum %+v of %+v", cands[i], cands)
		}
	}
}

// TestUniform checks that every policy spreads evenly over candidates that
// look alike: Random and the tie-breaks of LeastRequest and P2C within the
// chi-square bound at p = 0.001, RoundRobin exactly.
func TestUniform(t *testing.T) {
	for _, n := range []int{2, 5, 8, 13} {
		cands := make([]Candidate, n)
		for i := range cands {
			cands[i] = Candidate{Replica: 10 + 3*i, InFlight: 4}
		}
		for _, p := range baselines() {
			rng := rand.New(rand.NewPCG(uint64(n), 42))
			counts := make([]int, n)
			const rounds = 2000
			for k := 0; k < rounds*n; k++ {
				i, err := p.Pick(&Request{}, cands, rng)
				if err != nil {
					t.Fatal(err)
				}
				counts[i]++
			}
			if _, ok := p.(*RoundRobin); ok {
				for i, c := range counts {
					if c != rounds {
						t.Fatalf("round_robin n=%d: candidate %d picked %d times, want %d", n, i, c, rounds)
					}
				}
				continue
			}
			if x := chiSquare(counts); x > chi2Crit999[n-1] {
				t.Errorf("%s n=%d: chi-square %.1f > %.1f, counts %v", p.Name(), n, x, chi2Crit999[n-1], counts)
			}
		}
	}
}

func TestRoundRobinRotates(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	var p RoundRobin
	cands := []Candidate{{Replica: 7}, {Replica: 2}, {Replica: 5}, {Replica: 9}}
	pick := func() int {
		t.Helper()
		i, err := p.Pick(&Request{}, cands, rng)
		if err != nil {
			t.Fatal(err)
		}
		return cands[i].Replica
	}
	first := pick()
	order := []int{2, 5, 7, 9}
	at := 0
	for order[at] != first {
		at++
	}
	for k := 1; k < 12; k++ {
		if got, want := pick(), order[(at+k)%4]; got != want {
			t.Fatalf("pick %d: replica %d, want %d", k, got, want)
		}
	}
	// A replica left out (full, unhealthy) is skipped; the others keep
	// their turn.
	last := pick()
	rest := cands[:0:0]
	for _, c := range cands {
		if c.Replica != order[(indexOf(order, last)+1)%4] {
			rest = append(rest, c)
		}
	}
	i, _ := p.Pick(&Request{}, rest, rng)
	if got, want := rest[i].Replica, order[(indexOf(order, last)+2)%4]; got != want {
		t.Fatalf("after skipping: replica %d, want %d", got, want)
	}
}

func indexOf(s []int, v int) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

func TestSameSeedSameSequence(t *testing.T) {
	src := rand.New(rand.NewPCG(5, 5))
	sets := make([][]Candidate, 500)
	for i := range sets {
		sets[i] = randomCands(src, 30, 3)
	}
	run := func(p Policy, seed uint64) []int {
		rng := rand.New(rand.NewPCG(seed, 0))
		out := make([]int, len(sets))
		for i, cands := range sets {
			k, err := p.Pick(&Request{}, cands, rng)
			if err != nil {
				t.Fatal(err)
			}
			out[i] = k
		}
		return out
	}
	for _, name := range []string{"round_robin", "random", "least_request", "p2c"} {
		a, _ := New(name)
		b, _ := New(name)
		c, _ := New(name)
		x, y, z := run(a, 99), run(b, 99), run(c, 100)
		same := true
		for i := range x {
			if x[i] != y[i] {
				t.Fatalf("%s: pick %d differs under the same seed: %d vs %d", name, i, x[i], y[i])
			}
			same = same && x[i] == z[i]
		}
		if same {
			t.Errorf("%s: seeds 99 and 100 gave the same %d picks", name, len(x))
		}
	}
}

func TestNew(t *testing.T) {
	f := func(name string, wantErr bool, notImpl bool) {
		t.Helper()
		p, err := New(name)
		switch {
		case wantErr && err == nil:
			t.Fatalf("New(%q) = %v, want an error", name, p)
		case !wantErr && err != nil:
			t.Fatalf("New(%q): %v", name, err)
		case !wantErr && p.Name() != name:
			t.Fatalf("New(%q).Name() = %q", name, p.Name())
		case errors.Is(err, ErrNotImplemented) != notImpl:
			t.Fatalf("New(%q): %v; ErrNotImplemented %v", name, err, notImpl)
		}
	}
	f("round_robin", false, false)
	f("random", false, false)
	f("least_request", false, false)
	f("p2c", false, false)
	f("prefix_hash", false, false)
	f("kv_aware", false, false)
	f("cost_model", false, false)
	f("", true, false)
	f("Round_Robin", true, false)
	f("least_conn", true, false)

	// Each call has its own state.
	a, _ := New("round_robin")
	b, _ := New("round_robin")
	if a == b {
		t.Fatal("New returned the same round_robin twice")
	}
}

func TestPickDoesNotAllocate(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 6))
	cands := randomCands(rng, 64, 4)
	req := &Request{}
	for _, p := range baselines() {
		if n := testing.AllocsPerRun(1000, func() { _, _ = p.Pick(req, cands, rng) }); n != 0 {
			t.Errorf("%s: %.1f allocs per Pick", p.Name(), n)
		}
	}
}

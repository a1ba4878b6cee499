package cost

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

func TestPrefill(t *testing.T) {
	m := Default()
	f := func(u, c int, want time.Duration) {
		t.Helper()
		if got := m.Prefill(u, c); got < want-time.Microsecond || got > want+time.Microsecond {
			t.Fatalf("Prefill(%d, %d) = %v, want %v", u, c, got, want)
		}
	}
	f(0, 0, 5*time.Millisecond)
	f(1000, 0, 100*time.Millisecond+1650*time.Microsecond+5*time.Millisecond)    // a*u + b*u*u/2 + d
	f(500, 3500, 50*time.Millisecond+6187500*time.Nanosecond+5*time.Millisecond) // 3.3ns*500*3750
	f(4000, 0, 400*time.Millisecond+26400*time.Microsecond+5*time.Millisecond)   // 3.3ns*4000*2000
	f(-5, -5, 5*time.Millisecond)                                                // clamped
	if got := m.Queue(2*time.Second, 10); got != 2*time.Second+time.Millisecond {
		t.Fatalf("Queue = %v", got)
	}
	if e := m.Estimate(100, 500, 0, 0); e.Prefill != m.Prefill(0, 100) || e.Total() != e.Prefill {
		t.Fatalf("cached above the prompt: %+v", e)
	}
}

// randomModel returns a model with parameters around the defaults' scale.
func randomModel(rng *rand.Rand) Model {
	return Model{
		PrefillTokenSecs:       rng.Float64() * 0.001,
		PrefillPairSecs:        rng.Float64() * 1e-8,
		PrefillFixedSecs:       rng.Float64() * 0.01,
		DecodeInterferenceSecs: rng.Float64() * 0.001,
	}
}

// TestMoreCacheNeverCostsMore checks that the estimate is non-increasing in
// cached tokens and non-decreasing in queued prefill and running requests.
func TestMoreCacheNeverCostsMore(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for iter := 0; iter < 200000; iter++ {
		m := randomModel(rng)
		if iter%4 == 0 {
			m = Default()
		}
		prompt := rng.IntN(200000)
		c1 := rng.IntN(prompt + 2)
		c2 := c1 + rng.IntN(prompt+2-c1)
		q1 := time.Duration(rng.Int64N(int64(time.Minute)))
		q2 := q1 + time.Duration(rng.Int64N(int64(time.Second)))
		r1 := rng.IntN(500)
		r2 := r1 + rng.IntN(50)
		base := m.Estimate(prompt, c1, q1, r1).Total()
		if more := m.Estimate(prompt, c2, q1, r1).Total(); more > base {
			t.Fatalf("%+v prompt %d: cached %d costs %v, cached %d costs %v", m, prompt, c1, base, c2, more)
		}
		if more := m.Estimate(prompt, c1, q2, r1).Total(); more < base {
			t.Fatalf("%+v: queue %v costs %v, queue %v costs %v", m, q1, base, q2, more)
		}
		if more := m.Estimate(prompt, c1, q1, r2).Total(); more < base {
			t.Fatalf("%+v: running %d costs %v, running %d costs %v", m, r1, base, r2, more)
		}
	}
}

func TestCap(t *testing.T) {
	f := func(inFlight, n int, eps float64, want int) {
		t.Helper()
		if got := Cap(inFlight, n, eps); got != want {
			t.Fatalf("Cap(%d, %d, %v) = %d, want %d", inFlight, n, eps, got, want)
		}
	}
	f(0, 4, 1, 1)    // ceil(2*1/4)
	f(7, 4, 1, 4)    // ceil(2*8/4)
	f(8, 4, 1, 5)    // ceil(2*9/4)
	f(8, 4, 0.25, 3) // ceil(1.25*9/4)
	f(8, 4, 0, 3)    // ceil(9/4)
	f(8, 0, 1, 18)
	f(8, 4, -1, 3)
	f(8, 4, math.NaN(), 3)
	rng := rand.New(rand.NewPCG(3, 4))
	for iter := 0; iter < 100000; iter++ {
		n := 1 + rng.IntN(300)
		loads := make([]int, n)
		total, least := 0, 1<<30
		for i := range loads {
			loads[i] = rng.IntN(1 + rng.IntN(100))
			total += loads[i]
			least = min(least, loads[i])
		}
		eps := rng.Float64() * 2
		if iter%3 == 0 {
			eps = 0
		}
		if c := Cap(total, n, eps); !WithinCap(least, c) {
			t.Fatalf("n %d total %d eps %v: least loaded %d above cap %d", n, total, eps, least, c)
		}
	}
}

func TestPressured(t *testing.T) {
	f := func(usage float64, fresh bool, toCompute int, want bool) {
		t.Helper()
		if got := Pressured(usage, fresh, 0.92, toCompute, 256); got != want {
			t.Fatalf("Pressured(%v, %v, %d) = %v", usage, fresh, toCompute, got)
		}
	}
	f(0.95, true, 1000, true)
	f(0.92, true, 1000, false)
	f(0.95, true, 256, false)
	f(0.95, false, 1000, false)
}

func TestOwners(t *testing.T) {
	f := func(rate, util float64, n, want int) {
		t.Helper()
		if got := Owners(rate, util, n); got != want {
			t.Fatalf("Owners(%v, %v, %d) = %d, want %d", rate, util, n, got, want)
		}
	}
	f(0, 0.5, 8, 1)
	f(0.4, 0.5, 8, 1)
	f(0.5, 0.5, 8, 1)
	f(0.6, 0.5, 8, 2)
	f(1.6, 0.5, 8, 4)
	f(100, 0.5, 8, 8)
	f(1, 0, 8, 1)
}

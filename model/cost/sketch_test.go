package cost

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

type add struct {
	at     time.Time
	amount float64
}

// exact is the reference: every add kept, decayed on reading.
func exact(adds []add, now time.Time, window time.Duration) float64 {
	var s float64
	for _, a := range adds {
		s += a.amount * math.Exp(-float64(now.Sub(a.at))/float64(window))
	}
	return s
}

// TestSketchNeverUnderestimates compares a small (collision-heavy) sketch
// with exact decayed sums, over runs long enough to rescale.
func TestSketchNeverUnderestimates(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for run := 0; run < 40; run++ {
		window := time.Duration(1+rng.IntN(1000)) * time.Millisecond
		s := NewSketch(1+rng.IntN(4), 16<<rng.IntN(4), window)
		keys := make([]uint64, 1+rng.IntN(300))
		for i := range keys {
			keys[i] = rng.Uint64()
		}
		byKey := make(map[uint64][]add)
		now := time.Unix(1_700_000_000, 0)
		for step := 0; step < 3000; step++ {
			now = now.Add(time.Duration(rng.Int64N(int64(window) / 8)))
			if rng.IntN(50) == 0 {
				now = now.Add(time.Duration(rng.IntN(40)) * window) // idle spells force rescaling
			}
			k := keys[int(float64(len(keys))*math.Pow(rng.Float64(), 3))] // skewed: a few hot keys
			amt := rng.ExpFloat64() * 0.1
			s.Add(now, k, amt)
			byKey[k] = append(byKey[k], add{now, amt})
			if step%7 == 0 {
				q := keys[rng.IntN(len(keys))]
				at := now.Add(time.Duration(rng.Int64N(int64(window))))
				got, want := s.Count(at, q), exact(byKey[q], at, window)
				if got < want*(1-1e-9) {
					t.Fatalf("run %d step %d: Count = %g, exact %g", run, step, got, want)
				}
			}
		}
	}
}

func TestSketchDecays(t *testing.T) {
	s := NewSketch(4, 1024, time.Second)
	t0 := time.Unix(100, 0)
	if s.Count(t0, 1) != 0 {
		t.Fatal("empty sketch counts")
	}
	// A steady demand of 0.3 replica-seconds per second reads as a rate
	// near 0.3.
	for i := 0; i < 10000; i++ {
		s.Add(t0.Add(time.Duration(i)*time.Millisecond), 7, 0.0003)
	}
	end := t0.Add(10 * time.Second)
	if r := s.Rate(end, 7); math.Abs(r-0.3) > 0.01 {
		t.Fatalf("steady rate %.4f, want 0.3", r)
	}
	if c := s.Count(end.Add(5*time.Second), 7); math.Abs(c-0.3*math.Exp(-5)) > 0.01 {
		t.Fatalf("after 5 windows: %.4f", c)
	}
	s.Add(end.Add(time.Hour), 8, 1) // rescales
	if c := s.Count(end.Add(time.Hour), 7); c > 1e-9 {
		t.Fatalf("after an hour: %g", c)
	}
	if c := s.Count(end.Add(time.Hour), 8); math.Abs(c-1) > 1e-9 {
		t.Fatalf("fresh key: %g", c)
	}
	s.Reset()
	if c := s.Count(end.Add(time.Hour), 8); c != 0 {
		t.Fatalf("after Reset: %g", c)
	}
}

func BenchmarkSketch(b *testing.B) {
	s := NewSketch(4, 2048, 10*time.Second)
	now := time.Unix(0, 0)
	b.ReportAllocs()
	var sink float64
	for i := 0; b.Loop(); i++ {
		now = now.Add(time.Millisecond)
		s.Add(now, uint64(i%64), 0.01)
		sink += s.Rate(now, uint64(i%64))
	}
	_ = sink
}

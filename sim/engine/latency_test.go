package engine

import (
	"math/rand/v2"
	"testing"
	"time"
)

// defaultLatency is the simulator's default timing model.
var defaultLatency = Latency{
	PrefillToken: 100 * time.Microsecond,
	PrefillPair:  3.3,
	PrefillFixed: 5 * time.Millisecond,
	DecodeToken:  20 * time.Millisecond,
	DecodeSeq:    100 * time.Microsecond,
}

func TestLatencyPrefill(t *testing.T) {
	f := func(l Latency, u, c int, want time.Duration) {
		t.Helper()
		if got := l.Prefill(u, c); got != want {
			t.Errorf("Prefill(%d, %d) = %v, want %v", u, c, got, want)
		}
	}
	f(defaultLatency, 0, 0, 0)
	// 100µs·1 + 3.3·1·0.5 ns + 5ms
	f(defaultLatency, 1, 0, 5*time.Millisecond+100*time.Microsecond+2)
	// 100µs·1000 + 3.3·1000·(0 + 500) ns + 5ms = 100ms + 1.65ms + 5ms
	f(defaultLatency, 1000, 0, 106650*time.Microsecond)
	// with 1000 cached: + 3.3·1000·1000 ns = 3.3ms more pair cost
	f(defaultLatency, 1000, 1000, 109950*time.Microsecond)
	f(Latency{PrefillToken: time.Millisecond, Zero: true}, 1000, 0, 0)
}

func TestLatencyDecode(t *testing.T) {
	f := func(n int, want time.Duration) {
		t.Helper()
		if got := defaultLatency.Decode(n); got != want {
			t.Errorf("Decode(%d) = %v, want %v", n, got, want)
		}
	}
	f(0, 0)
	f(1, 20*time.Millisecond)
	f(256, 20*time.Millisecond+255*100*time.Microsecond)
}

// TestLatencyChunksSumToPrefill cuts prompts into random chunks and checks
// that the chunks plus the fixed cost add up to Prefill(u,c).
func TestLatencyChunksSumToPrefill(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		l := Latency{
			PrefillToken: time.Duration(rng.IntN(300)) * time.Microsecond,
			PrefillPair:  rng.Float64() * 20,
			PrefillFixed: time.Duration(rng.IntN(10)) * time.Millisecond,
		}
		c, u := rng.IntN(40000), 1+rng.IntN(40000)
		sum := l.PrefillFixed
		for s := c; s < c+u; {
			e := min(c+u, s+1+rng.IntN(4096))
			sum += l.Chunk(s, e)
			s = e
		}
		if d := sum - l.Prefill(u, c); d < -time.Microsecond || d > time.Microsecond {
			t.Fatalf("%+v: chunks of (u=%d, c=%d) sum to %v, Prefill %v", l, u, c, sum, l.Prefill(u, c))
		}
	}
}

package cost

import (
	"math/rand/v2"
	"testing"
	"time"
)

func TestStep(t *testing.T) {
	m := Default()
	f := func(n int, want time.Duration) {
		t.Helper()
		if got := m.Step(n); got != want {
			t.Errorf("Step(%d) = %v, want %v", n, got, want)
		}
	}
	f(-1, 0)
	f(0, 0)
	f(1, 20*time.Millisecond)
	f(256, 20*time.Millisecond+255*100*time.Microsecond)
}

func TestTPOT(t *testing.T) {
	m := Default()
	f := func(others int, prefill time.Duration, tokens int, want time.Duration) {
		t.Helper()
		if got := m.TPOT(others, prefill, tokens); got != want {
			t.Errorf("TPOT(%d, %v, %d) = %v, want %v", others, prefill, tokens, got, want)
		}
	}
	f(0, 0, 10, 20*time.Millisecond)
	f(10, 0, 10, 21*time.Millisecond)
	f(10, 100*time.Millisecond, 10, 31*time.Millisecond)
	f(10, 100*time.Millisecond, 0, 121*time.Millisecond) // tokens < 1 is 1
	f(-5, -time.Second, 10, 20*time.Millisecond)
}

// TestTPOTProperties: TPOT is non-decreasing in the streams it decodes
// with and in the prefill that shares its steps, and Harm is the rise of a
// running stream's TPOT over the window that a placement causes.
func TestTPOTProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	m := Default()
	for range 5000 {
		n, tokens := rng.IntN(300), 1+rng.IntN(500)
		p := time.Duration(rng.Int64N(int64(10 * time.Second)))
		base := m.TPOT(n, p, tokens)
		if more := m.TPOT(n+1+rng.IntN(10), p, tokens); more < base {
			t.Fatalf("TPOT fell with more running: %v < %v (n=%d p=%v tokens=%d)", more, base, n, p, tokens)
		}
		if more := m.TPOT(n, p+time.Duration(rng.Int64N(int64(time.Second))), tokens); more < base {
			t.Fatalf("TPOT fell with more prefill: %v < %v (n=%d p=%v tokens=%d)", more, base, n, p, tokens)
		}
		prompt := rng.IntN(30000)
		cached := rng.IntN(prompt + 1)
		h := m.Harm(prompt, cached, tokens)
		if more := m.Harm(prompt+1+rng.IntN(1000), cached, tokens); more < h {
			t.Fatalf("Harm fell with a longer prompt")
		}
		if less := m.Harm(prompt, min(prompt, cached+rng.IntN(1000)), tokens); less > h {
			t.Fatalf("Harm rose with more cached")
		}
		// The placed prompt's prefill shares the stream's steps, and the
		// placed request decodes with it.
		rise := m.TPOT(n+1, p+m.Prefill(prompt-cached, cached), tokens) - m.TPOT(n, p, tokens)
		if d := rise - h/time.Duration(tokens); d < -2 || d > 2 {
			t.Fatalf("Harm/tokens = %v, TPOT rose by %v (prompt %d cached %d tokens %d)", h/time.Duration(tokens), rise, prompt, cached, tokens)
		}
	}
}

package limit_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/inferrail/inferrail/model/limit"
)

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// admitted is one admission: when, and how many tokens.
type admitted struct {
	at time.Time
	n  float64
}

// TestNeverOverAdmits: over random arrivals, random sizes and settles
// that only give back, within any window [a, b] of admissions the bucket
// let through at most size + rate·(b − a) tokens.
func TestNeverOverAdmits(t *testing.T) {
	for seed := range uint64(100) {
		rng := rand.New(rand.NewPCG(seed, 3))
		rate := 1 + rng.Float64()*50
		size := 1 + rng.Float64()*100
		b := limit.NewBucket(rate, size, t0)
		now := t0
		var got []admitted
		for range 400 {
			now = now.Add(time.Duration(rng.ExpFloat64() * float64(time.Second) / (2 * rate)))
			n := float64(1 + rng.IntN(int(size)))
			if b.Take(n, now) {
				got = append(got, admitted{now, n})
			}
		}
		if len(got) < 10 {
			t.Fatalf("seed %d: only %d admitted: the test tests nothing", seed, len(got))
		}
		for i := range got {
			sum := 0.0
			for j := i; j < len(got); j++ {
				sum += got[j].n
				allowed := size + rate*got[j].at.Sub(got[i].at).Seconds()
				if sum > allowed+1e-6 {
					t.Fatalf("seed %d: %.1f tokens admitted in %v; the bucket (rate %.2f, size %.1f) allows %.2f",
						seed, sum, got[j].at.Sub(got[i].at), rate, size, allowed)
				}
			}
		}
	}
}

// TestRefillsAtRate: an empty bucket holds rate·d after d, up to its size;
// and a client asking every millisecond for ten seconds gets the size plus
// ten seconds of refill, no more and no less.
func TestRefillsAtRate(t *testing.T) {
	b := limit.NewBucket(20, 50, t0)
	if !b.Take(50, t0) || b.Take(1, t0) {
		t.Fatal("a full bucket of 50 gives 50 and no more")
	}
	f := func(d time.Duration, want float64) {
		t.Helper()
		if got := b.Level(t0.Add(d)); got < want-1e-9 || got > want+1e-9 {
			t.Errorf("level after %v = %v, want %v", d, got, want)
		}
	}
	f(0, 0)
	f(100*time.Millisecond, 2)
	f(time.Second, 20)
	f(2500*time.Millisecond, 50)
	f(time.Hour, 50)

	r := limit.NewBucket(20, 20, t0)
	n := 0
	for now := t0; now.Before(t0.Add(10 * time.Second)); now = now.Add(time.Millisecond) {
		if r.Take(1, now) {
			n++
		}
	}
	// 20 at once, then one every 50 ms for 10 s: the last at 9.95 s.
	if want := 20 + 199; n != want {
		t.Errorf("admitted %d in 10 s at 20/s with a burst of 20, want %d", n, want)
	}
}

// TestSettle: a reservation settled above its estimate takes the
// difference, into debt, which the refill repays before anything is
// admitted; one settled below gives the difference back, never past the
// size.
func TestSettle(t *testing.T) {
	tn := limit.NewTenant(limit.Limits{TokensPerMinute: 600}, t0) // 10 tokens/s
	if v := tn.Admit(500, t0); !v.OK || v.Tokens.Remaining != 100 {
		t.Fatalf("admit 500 of 600: %+v", v)
	}
	tn.Settle(500, 800, t0) // the engine used 300 more
	if got := tn.TokensLevel(t0); got != -200 {
		t.Fatalf("level after settling 500 to 800 = %v, want -200", got)
	}
	v := tn.Admit(1, t0)
	if v.OK || v.Reason != limit.ReasonTokens || v.RetryAfter != 20100*time.Millisecond || v.Tokens.Remaining != 0 {
		t.Fatalf("in debt: %+v; want refused on tokens for 20.1 s", v)
	}
	if v := tn.Admit(1, t0.Add(v.RetryAfter)); !v.OK {
		t.Fatalf("at Retry-After: %+v", v)
	}
	tn.Settle(1, 0, t0.Add(20100*time.Millisecond))
	tn.Settle(1000, 0, t0.Add(time.Minute))
	if got := tn.TokensLevel(t0.Add(time.Minute)); got != 600 {
		t.Errorf("settled far below: level %v, want the size, 600", got)
	}
}

// TestRetryAfter: a refused request is admitted at exactly its
// RetryAfter, and not a millisecond before; each limit names itself.
func TestRetryAfter(t *testing.T) {
	for seed := range uint64(50) {
		rng := rand.New(rand.NewPCG(seed, 9))
		l := limit.Limits{RequestsPerSecond: 1 + rng.Float64()*20, TokensPerMinute: 100 + rng.Float64()*6000}
		tn := limit.NewTenant(l, t0)
		now := t0
		for range 200 {
			now = now.Add(time.Duration(rng.IntN(50)) * time.Millisecond)
			n := int64(rng.IntN(int(l.TokensPerMinute / 4)))
			v := tn.Admit(n, now)
			if v.OK {
				continue
			}
			if v.TooLarge || v.RetryAfter <= 0 {
				t.Fatalf("seed %d: refused %d tokens: %+v", seed, n, v)
			}
			if v.Reason == limit.ReasonRequests && v.Requests.Remaining != 0 {
				t.Fatalf("seed %d: refused on requests with %d left", seed, v.Requests.Remaining)
			}
			if early := v.RetryAfter - time.Millisecond; early > 0 {
				if w := tn.Admit(n, now.Add(early)); w.OK {
					t.Fatalf("seed %d: admitted 1 ms before Retry-After %v", seed, v.RetryAfter)
				}
			}
			now = now.Add(v.RetryAfter)
			if w := tn.Admit(n, now); !w.OK {
				t.Fatalf("seed %d: refused at Retry-After %v: %+v", seed, v.RetryAfter, w)
			}
		}
	}
}

func TestTooLarge(t *testing.T) {
	tn := limit.NewTenant(limit.Limits{RequestsPerSecond: 5, TokensPerMinute: 1000}, t0)
	v := tn.Admit(1001, t0)
	if v.OK || !v.TooLarge || v.Reason != limit.ReasonTokens || v.Requests.Remaining != 5 {
		t.Errorf("1001 tokens of a 1000 a minute: %+v; want TooLarge, nothing counted", v)
	}
	if v := tn.Admit(1000, t0); !v.OK {
		t.Errorf("1000 tokens of 1000: %+v", v)
	}
}

// TestHeaders: the states a verdict carries are OpenAI's headers: the
// size, what is left after this request, and the time until full.
func TestHeaders(t *testing.T) {
	tn := limit.NewTenant(limit.Limits{RequestsPerSecond: 10, TokensPerMinute: 6000}, t0)
	v := tn.Admit(3000, t0)
	want := limit.State{On: true, Limit: 10, Remaining: 9, Reset: 100 * time.Millisecond}
	if v.Requests != want {
		t.Errorf("requests = %+v, want %+v", v.Requests, want)
	}
	want = limit.State{On: true, Limit: 6000, Remaining: 3000, Reset: 30 * time.Second}
	if v.Tokens != want {
		t.Errorf("tokens = %+v, want %+v", v.Tokens, want)
	}
	off := limit.NewTenant(limit.Limits{RequestsPerSecond: 1}, t0).Admit(1e9, t0)
	if !off.OK || off.Tokens.On {
		t.Errorf("no token limit: %+v", off)
	}
}

// TestResize: a reload keeps what the tenant used (no fresh burst), caps
// it at a smaller size, and turns a limit off and on.
func TestResize(t *testing.T) {
	tn := limit.NewTenant(limit.Limits{RequestsPerSecond: 10}, t0)
	for range 8 {
		tn.Admit(0, t0)
	}
	tn.SetLimits(limit.Limits{RequestsPerSecond: 100}, t0)
	if v := tn.Admit(0, t0); !v.OK || v.Requests.Remaining != 1 || v.Requests.Limit != 100 {
		t.Errorf("raised to 100/s: %+v; want 1 left of the 2 kept", v.Requests)
	}
	tn.SetLimits(limit.Limits{RequestsPerSecond: 1}, t0.Add(time.Second))
	if v := tn.Admit(0, t0.Add(time.Second)); !v.OK || v.Requests.Remaining != 0 {
		t.Errorf("lowered to 1/s: %+v; want the level capped at 1", v.Requests)
	}
	tn.SetLimits(limit.Limits{}, t0.Add(time.Second))
	for range 100 {
		if v := tn.Admit(0, t0.Add(time.Second)); !v.OK || v.Requests.On {
			t.Fatalf("limits off: %+v", v)
		}
	}
}

func BenchmarkAdmitSettle(b *testing.B) {
	tn := limit.NewTenant(limit.Limits{RequestsPerSecond: 1e9, TokensPerMinute: 1e12}, t0)
	now := t0
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(time.Microsecond)
		v := tn.Admit(1000, now)
		tn.Settle(1000, 900, now)
		Sink = v
	}
}

var Sink limit.Verdict

// TestBurst: a burst size in place of one period's worth bounds what a
// quiet tenant may send at once, and not its rate.
func TestBurst(t *testing.T) {
	tn := limit.NewTenant(limit.Limits{RequestsPerSecond: 50, RequestsBurst: 5}, t0)
	n := 0
	for tn.Admit(0, t0).OK {
		n++
	}
	if n != 5 {
		t.Errorf("admitted %d at once with a burst of 5", n)
	}
	n = 0
	for now := t0; now.Before(t0.Add(10 * time.Second)); now = now.Add(time.Millisecond) {
		if tn.Admit(0, now).OK {
			n++
		}
	}
	if n < 499 || n > 501 {
		t.Errorf("admitted %d in 10 s at 50/s", n)
	}
	if v := limit.NewTenant(limit.Limits{TokensPerMinute: 6000, TokensBurst: 100}, t0).Admit(101, t0); !v.TooLarge || v.Tokens.Limit != 100 {
		t.Errorf("101 tokens against a bucket of 100: %+v", v)
	}
}

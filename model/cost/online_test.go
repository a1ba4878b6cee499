package cost

import (
	"math"
	"math/rand/v2"
	"testing"
)

// traffic draws ordinary traffic's prompts: u from 32 to 4096 tokens
// log-uniformly, and c 0 or up to 8192 cached tokens.
func traffic(rng *rand.Rand) (u, c int) {
	u = int(32 * math.Pow(128, rng.Float64()))
	if rng.IntN(2) == 0 {
		c = rng.IntN(8192)
	}
	return u, c
}

// feed observes n samples of truth's prefills over traffic, each time
// scaled by 1 + noise*N(0,1), and returns the verdicts counted.
func feed(o *Online, truth Model, n int, noise float64, rng *rand.Rand) map[Verdict]int {
	got := map[Verdict]int{}
	for range n {
		u, c := traffic(rng)
		got[o.Observe(Sample{Computed: u, Cached: c, Secs: truth.PrefillSecs(u, c) * (1 + noise*rng.NormFloat64())})]++
	}
	return got
}

// scaled is m with a, b and d multiplied by f.
func scaled(m Model, f float64) Model {
	m.PrefillTokenSecs *= f
	m.PrefillPairSecs *= f
	m.PrefillFixedSecs *= f
	return m
}

// checkNear fails unless a, b and d of got are within rel of want's.
func checkNear(t *testing.T, what string, got, want Model, rel float64) {
	t.Helper()
	for _, p := range []struct {
		name string
		g, w float64
	}{
		{"a", got.PrefillTokenSecs, want.PrefillTokenSecs},
		{"b", got.PrefillPairSecs, want.PrefillPairSecs},
		{"d", got.PrefillFixedSecs, want.PrefillFixedSecs},
	} {
		if !within(p.g, p.w, rel) {
			t.Errorf("%s: %s = %.4g, want %.4g within %.0f%%", what, p.name, p.g, p.w, rel*100)
		}
	}
}

// TestOnlineRecovers: noiseless samples of random a, b and d, up to 4
// times off the configured ones either way, bring the fit to
// them after one window, and
// its error and age say so.
func TestOnlineRecovers(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		prior := Default()
		truth := Model{
			PrefillTokenSecs: prior.PrefillTokenSecs * math.Pow(4, 2*rng.Float64()-1),
			PrefillPairSecs:  prior.PrefillPairSecs * math.Pow(4, 2*rng.Float64()-1),
			PrefillFixedSecs: prior.PrefillFixedSecs * math.Pow(4, 2*rng.Float64()-1),
		}
		o := NewOnline(prior)
		if v := feed(o, truth, 2*OnlineWindow, 0, rng); v[Accepted] != 2*OnlineWindow {
			t.Fatalf("verdicts %v, want every sample accepted", v)
		}
		checkNear(t, "noiseless", o.Model(), truth, 1e-6)
		st := o.Stats()
		if !st.Fitted || !st.Spread || st.Samples != 2*OnlineWindow || st.RelError > 1e-6 {
			t.Fatalf("stats %+v, want fitted with spread, %d samples, error under 1e-6", st, 2*OnlineWindow)
		}
		if o.Model().DecodeInterferenceSecs != prior.DecodeInterferenceSecs {
			t.Fatalf("decode interference %v, want the prior's", o.Model().DecodeInterferenceSecs)
		}
	}
}

// TestOnlineNeverNegative: whatever the samples (noise up to half the
// time, times from nothing to seconds), no parameter goes below 0.
func TestOnlineNeverNegative(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	o := NewOnline(Default())
	for i := range 5000 {
		u, c := traffic(rng)
		secs := rng.ExpFloat64() * math.Pow(10, float64(rng.IntN(7))-5)
		if i%3 == 0 {
			secs = Default().PrefillSecs(u, c) * (1 + 0.5*rng.NormFloat64())
		}
		o.Observe(Sample{Computed: u, Cached: c, Secs: secs})
		m := o.Model()
		if m.PrefillTokenSecs < 0 || m.PrefillPairSecs < 0 || m.PrefillFixedSecs < 0 {
			t.Fatalf("sample %d: fit %+v has a negative parameter", i, m)
		}
	}
}

// TestOnlineIdenticalSamples: a stream of one prompt, however far its time
// is from the fit, moves no parameter, before a fit and after one.
func TestOnlineIdenticalSamples(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	f := func(o *Online, spread bool) {
		t.Helper()
		before := o.Model()
		for range 3 * OnlineWindow {
			o.Observe(Sample{Computed: 700, Cached: 1500, Secs: 3 * before.PrefillSecs(700, 1500)})
		}
		if got := o.Model(); got != before {
			t.Fatalf("identical samples moved the fit from %+v to %+v", before, got)
		}
		if o.Stats().Spread != spread {
			t.Fatalf("stats %+v, want spread %v", o.Stats(), spread)
		}
	}
	f(NewOnline(Default()), false)
	o := NewOnline(Default())
	feed(o, scaled(Default(), 2), OnlineWindow, 0, rng)
	f(o, true) // the window keeps the earlier prompts
}

// TestOnlineOutliers: a few wild samples (100 times too slow or fast)
// among noisy ordinary ones are dropped and counted, and the fit stays
// within 10% of the truth.
func TestOnlineOutliers(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	truth := scaled(Default(), 0.5)
	o := NewOnline(Default())
	feed(o, truth, OnlineWindow, 0.02, rng)
	wild := 0
	for i := range 4 * OnlineWindow {
		u, c := traffic(rng)
		secs := truth.PrefillSecs(u, c) * (1 + 0.02*rng.NormFloat64())
		if i%40 == 0 {
			secs *= 100
			if i%80 == 0 {
				secs /= 1e4
			}
			wild++
		}
		o.Observe(Sample{Computed: u, Cached: c, Secs: secs})
	}
	if got := o.Stats().Outliers; got != wild {
		t.Errorf("outliers %d, want the %d wild samples", got, wild)
	}
	m := o.Model()
	if !within(m.PrefillTokenSecs, truth.PrefillTokenSecs, 0.1) || !within(m.PrefillFixedSecs, truth.PrefillFixedSecs, 0.1) {
		t.Errorf("fit %+v, want a and d within 10%% of %+v", m, truth)
	}
}

// TestOnlineFollowsStep: after the engine's speed changes (the truth
// doubles, or more than quadruples, past the outlier guard), the fit
// follows within two windows.
func TestOnlineFollowsStep(t *testing.T) {
	for _, factor := range []float64{2, 0.5, 6} {
		rng := rand.New(rand.NewPCG(11, 12))
		truth := Default()
		o := NewOnline(truth)
		feed(o, truth, 2*OnlineWindow, 0.01, rng)
		next := scaled(truth, factor)
		feed(o, next, 2*OnlineWindow, 0.01, rng)
		m := o.Model()
		if !within(m.PrefillTokenSecs, next.PrefillTokenSecs, 0.1) || !within(m.PrefillFixedSecs, next.PrefillFixedSecs, 0.1) {
			t.Errorf("factor %v: fit %+v, want a and d within 10%% of %+v", factor, m, next)
		}
		if st := o.Stats(); st.Age >= 2*OnlineWindow {
			t.Errorf("factor %v: age %d, want the fit renewed after the change", factor, st.Age)
		}
	}
	// The shift: a doubling is followed within half a window, not the
	// window's length, since the samples that predate it are cut.
	rng := rand.New(rand.NewPCG(17, 18))
	o := NewOnline(Default())
	feed(o, Default(), 2*OnlineWindow, 0.05, rng)
	next := scaled(Default(), 2)
	feed(o, next, OnlineWindow/2, 0.05, rng)
	if m, st := o.Model(), o.Stats(); !within(m.PrefillTokenSecs, next.PrefillTokenSecs, 0.1) || st.Shifts < 1 {
		t.Errorf("%d samples after doubling: fit %+v, stats %+v; want a within 10%% of %v and a shift",
			OnlineWindow/2, m, st, next.PrefillTokenSecs)
	}
}

// TestOnlineInvalid: malformed samples are refused and change nothing.
func TestOnlineInvalid(t *testing.T) {
	o := NewOnline(Default())
	for _, s := range []Sample{{Computed: -1, Secs: 1}, {Cached: -1, Computed: 1, Secs: 1}, {Computed: 1}, {Computed: 1, Secs: math.Inf(1)}, {Computed: 1, Secs: math.NaN()}} {
		if v := o.Observe(s); v != Invalid {
			t.Errorf("%+v: verdict %v, want Invalid", s, v)
		}
	}
	if st := o.Stats(); st.Samples != 0 {
		t.Errorf("stats %+v after invalid samples", st)
	}
}

func BenchmarkOnlineObserve(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	o := NewOnline(Default())
	b.ReportAllocs()
	for b.Loop() {
		u, c := traffic(rng)
		o.Observe(Sample{Computed: u, Cached: c, Secs: Default().PrefillSecs(u, c)})
	}
}

// TestOnlinePoor: a fit that explains a full window of samples with more
// than PoorError of relative error is poor, and the configured values are
// in effect, until clean samples bring the error under half of it.
func TestOnlinePoor(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	truth := scaled(Default(), 2)
	o := NewOnline(Default())
	for range 2 * OnlineWindow {
		u, c := traffic(rng)
		o.Observe(Sample{Computed: u, Cached: c, Secs: truth.PrefillSecs(u, c) * math.Exp(1.2*rng.NormFloat64())})
	}
	if m, fitted := o.InEffect(); !o.Stats().Poor || fitted || m != Default() {
		t.Fatalf("stats %+v, in effect %+v (fitted %v): want poor, the configured values in effect", o.Stats(), m, fitted)
	}
	feed(o, truth, 2*OnlineWindow, 0.01, rng)
	if m, fitted := o.InEffect(); o.Stats().Poor || !fitted || m != o.Model() {
		t.Fatalf("stats %+v, in effect %+v (fitted %v): want the fit back", o.Stats(), m, fitted)
	}
}

// TestOnlineDecodeStep: samples that share a decode step (Decoding) fit it
// apart. With some samples taken while nothing decodes, all four terms come
// back; with none, d stays at the configured value and the decode step
// takes the rest of the fixed time, while a and b still come back.
func TestOnlineDecodeStep(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	truth := scaled(Default(), 2)
	truth.DecodeStepSecs = 0.02
	f := func(decodingShare float64) Model {
		o := NewOnline(Default())
		for range 2 * OnlineWindow {
			u, c := traffic(rng)
			s := Sample{Computed: u, Cached: c, Decoding: rng.Float64() < decodingShare}
			s.Secs = truth.PrefillSecs(u, c)
			if s.Decoding {
				s.Secs += truth.DecodeStepSecs
			}
			o.Observe(s)
		}
		return o.Model()
	}
	checkNear(t, "half decoding", f(0.5), truth, 1e-6)
	if m := f(0.5); !within(m.DecodeStepSecs, truth.DecodeStepSecs, 1e-6) {
		t.Errorf("half decoding: decode step %v, want %v", m.DecodeStepSecs, truth.DecodeStepSecs)
	}
	m := f(1)
	want := truth
	want.PrefillFixedSecs = Default().PrefillFixedSecs
	checkNear(t, "all decoding", m, want, 1e-6)
	if e := truth.PrefillFixedSecs - Default().PrefillFixedSecs + truth.DecodeStepSecs; !within(m.DecodeStepSecs, e, 1e-6) {
		t.Errorf("all decoding: decode step %v, want %v", m.DecodeStepSecs, e)
	}
}

package workload

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// Arrivals is how a workload's requests arrive (for conversations and agent
// loops, how their first requests do). The zero value is a Poisson process
// at a constant rate.
type Arrivals struct {
	// Process is "poisson" (also "") or "gamma": gaps drawn from a Gamma
	// distribution with the mean gap of the rate and coefficient of
	// variation CV, so CV 1 is as bursty as Poisson and CV 4 comes in
	// bursts separated by long lulls.
	Process string  `toml:"process" json:"process,omitempty"`
	CV      float64 `toml:"cv" json:"cv,omitempty"`
	// Ramp is "" (a constant rate) or "diurnal": a day compressed into
	// Period, the rate rising from (1 - Amplitude) times the mean at the
	// start to (1 + Amplitude) times it half way and back, keeping the mean
	// over each period. Period 0 takes 10 minutes and Amplitude 0 takes 0.8.
	Ramp      string        `toml:"ramp" json:"ramp,omitempty"`
	Period    time.Duration `toml:"period" json:"period,omitempty"`
	Amplitude float64       `toml:"amplitude" json:"amplitude,omitempty"`
}

// Defaults of the diurnal ramp.
const (
	DefaultPeriod    = 10 * time.Minute
	DefaultAmplitude = 0.8
)

// Validate reports every problem with a.
func (a Arrivals) Validate() error {
	var errs []error
	switch a.Process {
	case "", "poisson":
	case "gamma":
		if !(a.CV > 0) || math.IsInf(a.CV, 0) || a.CV > 100 {
			errs = append(errs, fmt.Errorf("arrivals.cv %v: want 0 < cv <= 100 for gamma", a.CV))
		}
	default:
		errs = append(errs, fmt.Errorf("arrivals.process %q: want poisson or gamma", a.Process))
	}
	switch a.Ramp {
	case "":
	case "diurnal":
		if a.Period < 0 {
			errs = append(errs, fmt.Errorf("arrivals.period %v: want at least 0", a.Period))
		}
		if a.Amplitude < 0 || a.Amplitude >= 1 || math.IsNaN(a.Amplitude) {
			errs = append(errs, fmt.Errorf("arrivals.amplitude %v: want 0 <= amplitude < 1", a.Amplitude))
		}
	default:
		errs = append(errs, fmt.Errorf("arrivals.ramp %q: want \"\" or diurnal", a.Ramp))
	}
	return errors.Join(errs...)
}

// String names the arrivals in reports: "poisson", "gamma cv 4, diurnal".
func (a Arrivals) String() string {
	s := "poisson"
	if a.Process == "gamma" {
		s = fmt.Sprintf("gamma cv %g", a.CV)
	}
	if a.Ramp == "diurnal" {
		s += fmt.Sprintf(", diurnal over %v", a.period())
	}
	return s
}

func (a Arrivals) period() time.Duration {
	if a.Period > 0 {
		return a.Period
	}
	return DefaultPeriod
}

func (a Arrivals) amplitude() float64 {
	if a.Amplitude > 0 {
		return a.Amplitude
	}
	return DefaultAmplitude
}

// clock yields arrival times. Gaps are drawn with mean 1 on an operational
// clock s (a unit-rate renewal process), then mapped to real time t by the
// inverse of the integrated rate Λ(t) = s: for Poisson gaps that is exactly
// a Poisson process of rate λ(t), and for Gamma gaps the same bursts
// stretched by the ramp.
type clock struct {
	rng   *rand.Rand
	rate  float64 // mean per second
	shape float64 // Gamma shape 1/CV², 0 for exponential gaps
	ramp  bool
	p, a  float64 // the ramp's period (seconds) and amplitude
	s     float64 // operational time of the last arrival
	t     float64 // real time of the last arrival, seconds
}

// newClock starts a clock at real time from (which may be negative).
func newClock(rng *rand.Rand, rate float64, a Arrivals, from time.Duration) *clock {
	c := &clock{rng: rng, rate: rate}
	if a.Process == "gamma" {
		c.shape = 1 / (a.CV * a.CV)
	}
	if a.Ramp == "diurnal" {
		c.ramp, c.p, c.a = true, a.period().Seconds(), a.amplitude()
	}
	c.t = from.Seconds()
	c.s = c.integral(c.t)
	return c
}

// next returns the next arrival time.
func (c *clock) next() time.Duration {
	gap := c.rng.ExpFloat64()
	if c.shape > 0 {
		gap = gammaUnit(c.rng, c.shape)
	}
	c.s += gap
	c.t = c.invert(c.s, c.t)
	return time.Duration(c.t * float64(time.Second))
}

// intensity is λ(t)/rate.
func (c *clock) intensity(t float64) float64 {
	if !c.ramp {
		return 1
	}
	return 1 - c.a*math.Cos(2*math.Pi*t/c.p)
}

// integral is Λ(t): the expected arrivals from 0 to t.
func (c *clock) integral(t float64) float64 {
	if !c.ramp {
		return c.rate * t
	}
	return c.rate * (t - c.a*c.p/(2*math.Pi)*math.Sin(2*math.Pi*t/c.p))
}

// invert solves Λ(t) = s for t ≥ after. Λ is increasing (λ ≥ rate·(1-a) >
// 0), so Newton's method from after converges; it is kept inside the
// bracket [after, hi] it narrows.
func (c *clock) invert(s, after float64) float64 {
	if !c.ramp {
		return s / c.rate
	}
	lo, hi := after, after+(s-c.integral(after))/(c.rate*(1-c.a))
	t := lo
	for range 100 {
		f := c.integral(t) - s
		if math.Abs(f) < 1e-9*c.rate {
			break
		}
		if f < 0 {
			lo = t
		} else {
			hi = t
		}
		nt := t - f/(c.rate*c.intensity(t))
		if !(nt > lo && nt < hi) {
			nt = (lo + hi) / 2
		}
		t = nt
	}
	return t
}

// gammaUnit draws from Gamma(shape k, scale 1/k): mean 1, coefficient of
// variation 1/√k. Marsaglia and Tsang's method, "A simple method for
// generating gamma variables" (2000), with their boost U^(1/k) for k < 1.
func gammaUnit(rng *rand.Rand, k float64) float64 {
	return gamma(rng, k) / k
}

func gamma(rng *rand.Rand, k float64) float64 {
	if k < 1 {
		u := 1 - rng.Float64() // (0, 1]
		return gamma(rng, k+1) * math.Pow(u, 1/k)
	}
	d := k - 1.0/3
	c := 1 / math.Sqrt(9*d)
	for {
		x := rng.NormFloat64()
		v := 1 + c*x
		if v <= 0 {
			continue
		}
		v = v * v * v
		u := rng.Float64()
		if u < 1-0.0331*x*x*x*x || math.Log(u) < 0.5*x*x+d*(1-v+math.Log(v)) {
			return d * v
		}
	}
}

// stamped stamps independent draws with the clock's times.
type stamped struct {
	c    *clock
	draw func() Request
}

func (s *stamped) Next() Request {
	at := s.c.next()
	r := s.draw()
	r.At = at
	return r
}

// startDrawer is Start for a Drawer with arrivals a.
func startDrawer(d Drawer, a Arrivals, seed uint64, rate float64) Source {
	return &stamped{
		c:    newClock(newRand(seed, streamArrivals), rate, a, 0),
		draw: d.Drawer(newRand(seed, streamContent)),
	}
}

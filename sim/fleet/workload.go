package fleet

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// Request is one request a workload makes: when it arrives, its prompt's
// token ids and the ids the engine will generate for it.
type Request struct {
	// At is the arrival time on the run's virtual clock.
	At time.Duration
	// Prompt is the prompt's token ids. The fleet and the engine only read
	// it, so generators may share a prefix's backing array between
	// requests as long as each request's own tokens are its own.
	Prompt []uint32
	// Output is what the engine will generate, in order; at least one id.
	Output []uint32
	// Session names the conversation the request belongs to (the gateway's
	// x-session-id), 0 when it names none.
	Session uint64
	// Class says which part of the workload made it, such as "W1" or "W6"
	// in mix, for per-class summaries.
	Class string
}

// Generator yields one run's requests in arrival order. It is owned by the
// run that started it and is not safe for concurrent use.
type Generator interface {
	// Next returns the next request. Its At is never before the previous
	// request's. A generator never runs dry: the run decides when to stop.
	Next() Request
}

// Workload describes a kind of traffic, as in the benchmark plan (W1, W6,
// mix, hot). It is a value: Start makes a fresh generator for every run,
// drawing everything (prompts, arrivals, output) from rng, so a run replays
// exactly from its seed.
//
// Workloads whose requests are independent draws (W1, W6, hot) also
// implement Drawer, so Mix can interleave them on one arrival clock.
// Workloads with structure across requests (multi-turn W2, agent loops W3)
// implement Generator themselves and schedule their own arrivals.
type Workload interface {
	// Name is the workload's short name, used in reports.
	Name() string
	// Start returns a generator of requests arriving at rate per second on
	// average.
	Start(rng *rand.Rand, rate float64) Generator
}

// Drawer is a workload whose requests are independent of each other given
// the run's fixed material (such as W1's system prompts).
type Drawer interface {
	Workload
	// Drawer returns a function that draws one request's content (At left
	// zero) from rng. Fixed material is drawn from rng first, once.
	Drawer(rng *rand.Rand) func() Request
}

// Range is an inclusive range of token counts, drawn uniformly.
type Range struct{ Min, Max int }

func (r Range) draw(rng *rand.Rand) int {
	if r.Max <= r.Min {
		return r.Min
	}
	return r.Min + rng.IntN(r.Max-r.Min+1)
}

func (r Range) validate(name string) error {
	if r.Min < 1 || r.Max < r.Min {
		return fmt.Errorf("%s: range [%d, %d]: want 1 <= min <= max", name, r.Min, r.Max)
	}
	return nil
}

// Token ids are drawn uniformly from [firstToken, firstToken+vocab), so two
// independently drawn 16-token blocks practically never coincide: unrelated
// prompts share nothing, as in W6.
const (
	firstToken = 1000
	vocab      = 150_000
)

func tokens(rng *rand.Rand, dst []uint32, n int) []uint32 {
	for range n {
		dst = append(dst, firstToken+uint32(rng.IntN(vocab)))
	}
	return dst
}

// Shared is traffic sharing a few long system prompts: every request is one
// system prompt followed by a fresh question. With Zipf 0 the prompts are
// equally likely (W1); with Zipf s > 0 prompt k (from 1) is drawn with
// weight k^-s, so a few are hot (hot, s = 1.1).
type Shared struct {
	// Label names the workload in reports; "" takes "W1", or "hot" when
	// Zipf is set.
	Label string
	// Prompts is how many system prompts the run draws.
	Prompts int
	// PromptTokens is a system prompt's length.
	PromptTokens Range
	// QuestionTokens is the length of the question after it.
	QuestionTokens Range
	// OutputTokens is how many tokens each request generates.
	OutputTokens Range
	// Zipf is the exponent of the prompts' popularity, 0 for uniform.
	Zipf float64
}

// W1 returns the benchmark plan's W1: 4 system prompts of 2k to 8k tokens
// shared by every user, each request adding a 50 to 500 token question and
// generating 50 to 300 tokens.
func W1() Shared {
	return Shared{
		Prompts:        4,
		PromptTokens:   Range{2000, 8000},
		QuestionTokens: Range{50, 500},
		OutputTokens:   Range{50, 300},
	}
}

// Hot returns the benchmark plan's hot workload: W1 over 16 system prompts
// drawn by Zipf weight with exponent 1.1, so the first takes about a third
// of the traffic.
func Hot() Shared {
	s := W1()
	s.Prompts, s.Zipf = 16, 1.1
	return s
}

// Name returns Label, else "W1" or "hot".
func (s Shared) Name() string {
	switch {
	case s.Label != "":
		return s.Label
	case s.Zipf > 0:
		return "hot"
	default:
		return "W1"
	}
}

// Validate reports every problem with s.
func (s Shared) Validate() error {
	var errs []error
	if s.Prompts < 1 {
		errs = append(errs, fmt.Errorf("%s: prompts %d: want at least 1", s.Name(), s.Prompts))
	}
	if s.Zipf < 0 || math.IsNaN(s.Zipf) || math.IsInf(s.Zipf, 0) {
		errs = append(errs, fmt.Errorf("%s: zipf %v: want a finite number >= 0", s.Name(), s.Zipf))
	}
	for _, e := range []error{
		s.PromptTokens.validate(s.Name() + ": prompt tokens"),
		s.QuestionTokens.validate(s.Name() + ": question tokens"),
		s.OutputTokens.validate(s.Name() + ": output tokens"),
	} {
		if e != nil {
			errs = append(errs, e)
		}
	}
	return errors.Join(errs...)
}

// Start returns Poisson arrivals of Shared requests.
func (s Shared) Start(rng *rand.Rand, rate float64) Generator {
	return &poisson{rng: rng, rate: rate, draw: s.Drawer(rng)}
}

// Drawer draws the system prompts, then returns a draw of one request.
func (s Shared) Drawer(rng *rand.Rand) func() Request {
	systems := make([][]uint32, s.Prompts)
	for i := range systems {
		systems[i] = tokens(rng, nil, s.PromptTokens.draw(rng))
	}
	// Cumulative popularity weights, k^-s for k = 1..Prompts.
	cum := make([]float64, s.Prompts)
	total := 0.0
	for i := range cum {
		total += math.Pow(float64(i+1), -s.Zipf)
		cum[i] = total
	}
	name := s.Name()
	return func() Request {
		x := rng.Float64() * total
		k := 0
		for k < len(cum)-1 && cum[k] <= x {
			k++
		}
		sys := systems[k]
		q := s.QuestionTokens.draw(rng)
		p := make([]uint32, len(sys), len(sys)+q)
		copy(p, sys)
		return Request{
			Prompt: tokens(rng, p, q),
			Output: tokens(rng, nil, s.OutputTokens.draw(rng)),
			Class:  name,
		}
	}
}

// Unique is traffic sharing nothing: every prompt is fresh (W6, the control
// where cache affinity must not hurt).
type Unique struct {
	// Label names the workload in reports; "" takes "W6".
	Label        string
	PromptTokens Range
	OutputTokens Range
}

// W6 returns the benchmark plan's W6: unique prompts of 500 to 4000 tokens,
// generating 50 to 300 tokens.
func W6() Unique {
	return Unique{PromptTokens: Range{500, 4000}, OutputTokens: Range{50, 300}}
}

// Name returns Label, else "W6".
func (u Unique) Name() string {
	if u.Label != "" {
		return u.Label
	}
	return "W6"
}

// Validate reports every problem with u.
func (u Unique) Validate() error {
	var errs []error
	for _, e := range []error{
		u.PromptTokens.validate(u.Name() + ": prompt tokens"),
		u.OutputTokens.validate(u.Name() + ": output tokens"),
	} {
		if e != nil {
			errs = append(errs, e)
		}
	}
	return errors.Join(errs...)
}

// Start returns Poisson arrivals of unique prompts.
func (u Unique) Start(rng *rand.Rand, rate float64) Generator {
	return &poisson{rng: rng, rate: rate, draw: u.Drawer(rng)}
}

// Drawer returns a draw of one unique request.
func (u Unique) Drawer(rng *rand.Rand) func() Request {
	name := u.Name()
	return func() Request {
		return Request{
			Prompt: tokens(rng, nil, u.PromptTokens.draw(rng)),
			Output: tokens(rng, nil, u.OutputTokens.draw(rng)),
			Class:  name,
		}
	}
}

// Mix interleaves independent workloads on one Poisson clock: each arrival
// is drawn from part i with probability Weights[i] / sum(Weights).
type Mix struct {
	// Label names the workload in reports; "" takes "mix".
	Label   string
	Parts   []Drawer
	Weights []float64
}

// MixW1W6 returns the benchmark plan's mix: W1 and W6 requests arriving
// together, half each, so a policy must weigh the cache one kind finds
// against the prefill the other queues.
func MixW1W6() Mix {
	return Mix{Parts: []Drawer{W1(), W6()}, Weights: []float64{1, 1}}
}

// Name returns Label, else "mix".
func (m Mix) Name() string {
	if m.Label != "" {
		return m.Label
	}
	return "mix"
}

// Validate reports every problem with m and its parts.
func (m Mix) Validate() error {
	var errs []error
	if len(m.Parts) == 0 || len(m.Parts) != len(m.Weights) {
		errs = append(errs, fmt.Errorf("%s: %d parts, %d weights: want as many, at least one", m.Name(), len(m.Parts), len(m.Weights)))
	}
	sum := 0.0
	for _, w := range m.Weights {
		if !(w >= 0) || math.IsInf(w, 0) {
			errs = append(errs, fmt.Errorf("%s: weight %v: want a finite number >= 0", m.Name(), w))
		}
		sum += w
	}
	if !(sum > 0) {
		errs = append(errs, fmt.Errorf("%s: weights sum to %v: want more than 0", m.Name(), sum))
	}
	for _, p := range m.Parts {
		if v, ok := p.(interface{ Validate() error }); ok {
			if err := v.Validate(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// Start returns Poisson arrivals drawn from the parts by weight. The parts'
// fixed material is drawn first, in order.
func (m Mix) Start(rng *rand.Rand, rate float64) Generator {
	draws := make([]func() Request, len(m.Parts))
	for i, p := range m.Parts {
		draws[i] = p.Drawer(rng)
	}
	cum := make([]float64, len(m.Weights))
	total := 0.0
	for i, w := range m.Weights {
		total += w
		cum[i] = total
	}
	return &poisson{rng: rng, rate: rate, draw: func() Request {
		x := rng.Float64() * total
		k := 0
		for k < len(cum)-1 && cum[k] <= x {
			k++
		}
		return draws[k]()
	}}
}

// poisson stamps independent draws with Poisson arrival times.
type poisson struct {
	rng  *rand.Rand
	rate float64
	at   float64 // seconds
	draw func() Request
}

func (p *poisson) Next() Request {
	p.at += p.rng.ExpFloat64() / p.rate
	r := p.draw()
	r.At = time.Duration(p.at * float64(time.Second))
	return r
}

var (
	_ Drawer   = Shared{}
	_ Drawer   = Unique{}
	_ Workload = Mix{}
)

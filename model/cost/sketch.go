package cost

import (
	"math"
	"time"
)

// Sketch is a count-min sketch of amounts per key that decay exponentially
// with time constant window (Cormode and Muthukrishnan, "An Improved Data
// Stream Summary: The Count-Min Sketch and its Applications", 2005).
// cost_model adds each routed request's prefill demand under its root
// prefix and reads the demand back as a rate.
//
// Count never underestimates: every row's counter for a key holds the
// key's own decayed sum plus those of the keys that collide with it, and
// all counters decay by the same factor. Decay is lazy: counters are stored
// scaled by exp((t - epoch)/window), so Add and Count are O(depth), and they
// are rescaled once every 32 windows.
//
// A Sketch is owned by one routing actor (through its policy value) and is
// not safe for concurrent use. Count and Rate change nothing.
type Sketch struct {
	depth  int
	mask   uint64
	counts []float64 // depth rows of mask+1 counters
	window time.Duration
	epoch  time.Time
	begun  bool
}

// rescaleAfter is how many windows the epoch may trail now before the
// counters are rescaled; exp(32) ≈ 8e13 keeps float64 far from overflow.
const rescaleAfter = 32

// NewSketch returns an empty sketch of depth rows (at least 1) of width
// counters (rounded up to a power of two, at least 16), decaying over
// window (at least 1ms). The overestimate is at most e/width of the total
// with probability 1 - exp(-depth).
func NewSketch(depth, width int, window time.Duration) *Sketch {
	depth = max(depth, 1)
	w := 16
	for w < width {
		w <<= 1
	}
	return &Sketch{
		depth:  depth,
		mask:   uint64(w - 1),
		counts: make([]float64, depth*w),
		window: max(window, time.Millisecond),
	}
}

// Window returns the decay time constant.
func (s *Sketch) Window() time.Duration { return s.window }

// mix is the splitmix64 finalizer.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

func (s *Sketch) slot(row int, key uint64) int {
	h := mix(key + uint64(row+1)*0x9e3779b97f4a7c15)
	return row*int(s.mask+1) + int(h&s.mask)
}

// scale returns exp((now - epoch)/window).
func (s *Sketch) scale(now time.Time) float64 {
	return math.Exp(float64(now.Sub(s.epoch)) / float64(s.window))
}

// Add counts amount (at least 0; others are ignored) for key at now.
func (s *Sketch) Add(now time.Time, key uint64, amount float64) {
	if !(amount > 0) || math.IsInf(amount, 1) {
		return
	}
	if !s.begun {
		s.epoch, s.begun = now, true
	}
	if now.Sub(s.epoch) > rescaleAfter*s.window {
		f := 1 / s.scale(now)
		for i := range s.counts {
			s.counts[i] *= f
		}
		s.epoch = now
	}
	v := amount * s.scale(now)
	for r := 0; r < s.depth; r++ {
		s.counts[s.slot(r, key)] += v
	}
}

// Count returns key's decayed sum at now: the sum over its adds of
// amount * exp(-(now - t)/window), never less and usually not much more.
func (s *Sketch) Count(now time.Time, key uint64) float64 {
	if !s.begun {
		return 0
	}
	m := math.Inf(1)
	for r := 0; r < s.depth; r++ {
		m = min(m, s.counts[s.slot(r, key)])
	}
	return m / s.scale(now)
}

// Rate returns key's decayed sum per second of window at now: for amounts
// in seconds of prefill it is the demand in replica seconds per second, the
// exponentially weighted mean over about one window.
func (s *Sketch) Rate(now time.Time, key uint64) float64 {
	return s.Count(now, key) / s.window.Seconds()
}

// Reset empties the sketch.
func (s *Sketch) Reset() {
	clear(s.counts)
	s.begun = false
}

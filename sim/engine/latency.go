package engine

import (
	"math"
	"time"
)

// Prefill is P(u,c) = a·u + b·u·(c + u/2) + d: the cost of computing u
// uncached tokens after c cached ones, all at once on an idle engine.
func (l Latency) Prefill(u, c int) time.Duration {
	if l.Zero || u <= 0 {
		return 0
	}
	pair := math.Round(l.PrefillPair * float64(u) * (float64(c) + float64(u)/2))
	return time.Duration(u)*l.PrefillToken + time.Duration(pair) + l.PrefillFixed
}

// Chunk is the cost of computing token positions [start, end) of a prefill:
// a·(end−start) + b·(end²−start²)/2, without the fixed cost d that a prefill's
// first chunk adds. The pair term is rounded on the cumulative curve b·x²/2,
// so consecutive chunks telescope: the chunks of a prompt plus d add up to
// Prefill(u,c) within a nanosecond, however the budget cut them.
func (l Latency) Chunk(start, end int) time.Duration {
	if l.Zero || end <= start {
		return 0
	}
	return time.Duration(end-start)*l.PrefillToken + l.pairs(end) - l.pairs(start)
}

// pairs is b·x²/2 rounded to the nanosecond.
func (l Latency) pairs(x int) time.Duration {
	f := float64(x)
	return time.Duration(math.Round(l.PrefillPair * f * f / 2))
}

// Decode is what a step adds for decoding n sequences:
// DecodeToken + DecodeSeq·(n−1), or 0 when it decodes none.
func (l Latency) Decode(n int) time.Duration {
	if l.Zero || n <= 0 {
		return 0
	}
	return l.DecodeToken + time.Duration(n-1)*l.DecodeSeq
}

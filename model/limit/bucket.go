package limit

import (
	"math"
	"time"
)

// Bucket is a token bucket: it holds at most Size tokens and gains Rate
// tokens a second. Taking n tokens needs n in the bucket; giving tokens
// back (a reservation settled below its estimate) never fills it past
// Size, and taking more after the fact (one settled above) may leave it
// below zero, a debt the refill pays before anything else is admitted. A
// bucket of rate 0 is off: it admits everything and holds nothing. The
// zero Bucket is off. A Bucket is not safe for concurrent use.
type Bucket struct {
	rate  float64 // tokens per second
	size  float64
	level float64 // at at; may be negative
	at    time.Time
}

// NewBucket returns a full bucket of size tokens refilled at rate tokens a
// second, as of now. A rate of 0 or less turns it off; a size below 1 is 1,
// so that a slow rate still admits one at a time.
func NewBucket(rate, size float64, now time.Time) Bucket {
	if rate <= 0 {
		return Bucket{}
	}
	size = max(size, 1)
	return Bucket{rate: rate, size: size, level: size, at: now}
}

// On reports whether the bucket limits anything.
func (b *Bucket) On() bool { return b.rate > 0 }

// Size is how many tokens the bucket holds when full.
func (b *Bucket) Size() float64 { return b.size }

// Resize gives the bucket a new rate and size from now on, keeping the
// tokens it holds (at most the new size) and any debt: a live reload does
// not hand a tenant a fresh burst. A bucket that was off starts full.
func (b *Bucket) Resize(rate, size float64, now time.Time) {
	if !b.On() || rate <= 0 {
		*b = NewBucket(rate, size, now)
		return
	}
	b.refill(now)
	b.rate, b.size = rate, max(size, 1)
	b.level = min(b.level, b.size)
}

// refill brings the level up to now. A clock that went back adds nothing.
func (b *Bucket) refill(now time.Time) {
	if d := now.Sub(b.at); d > 0 {
		b.level = min(b.size, b.level+d.Seconds()*b.rate)
		b.at = now
	}
}

// Level is how many tokens the bucket holds at now (negative in debt).
func (b *Bucket) Level(now time.Time) float64 {
	if !b.On() {
		return 0
	}
	b.refill(now)
	return b.level
}

// Wait is how long from now until the bucket holds n tokens: 0 when it
// does, and a negative duration when it never will (n over its size).
func (b *Bucket) Wait(n float64, now time.Time) time.Duration {
	if !b.On() {
		return 0
	}
	if n > b.size {
		return -1
	}
	b.refill(now)
	if b.level >= n {
		return 0
	}
	return secs((n - b.level) / b.rate)
}

// Take removes n tokens if the bucket holds them at now, reporting whether
// it did. An off bucket always takes.
func (b *Bucket) Take(n float64, now time.Time) bool {
	if !b.On() {
		return true
	}
	b.refill(now)
	if b.level < n {
		return false
	}
	b.level -= n
	return true
}

// Give puts n tokens back at now (n < 0 takes -n more, into debt if need
// be), never filling past the size.
func (b *Bucket) Give(n float64, now time.Time) {
	if !b.On() {
		return
	}
	b.refill(now)
	b.level = min(b.size, b.level+n)
}

// UntilFull is how long from now until the bucket is full again: what
// OpenAI's x-ratelimit-reset-* headers give.
func (b *Bucket) UntilFull(now time.Time) time.Duration {
	if !b.On() {
		return 0
	}
	b.refill(now)
	return secs((b.size - b.level) / b.rate)
}

// secs converts seconds to a Duration, rounding up to the nanosecond so a
// wait is never short.
func secs(s float64) time.Duration {
	if s <= 0 {
		return 0
	}
	return time.Duration(math.Ceil(s * float64(time.Second)))
}

package limit

import (
	"math"
	"time"
)

// Limits are one tenant's rate limits; 0 turns a limit off.
type Limits struct {
	// RequestsPerSecond is the requests admitted a second; the bucket holds
	// one second's worth (at least one request), so a tenant may burst to
	// it after a quiet second.
	RequestsPerSecond float64
	// TokensPerMinute is the prompt and completion tokens admitted a
	// minute; the bucket holds one minute's worth.
	TokensPerMinute float64
	// RequestsBurst and TokensBurst, when above 0, size the buckets in
	// place of one second's and one minute's worth.
	RequestsBurst, TokensBurst float64
}

// On reports whether either limit is set.
func (l Limits) On() bool { return l.RequestsPerSecond > 0 || l.TokensPerMinute > 0 }

// Reason names the limit that refused a request, as OpenAI's error.type
// names it on a 429: "requests" or "tokens".
type Reason string

// Reasons.
const (
	ReasonRequests Reason = "requests"
	ReasonTokens   Reason = "tokens"
)

// Reasons lists every Reason, for series created up front.
var Reasons = []Reason{ReasonRequests, ReasonTokens}

// State is one limit as OpenAI's x-ratelimit-* headers describe it.
type State struct {
	On        bool
	Limit     int64         // x-ratelimit-limit-*: the bucket's size
	Remaining int64         // x-ratelimit-remaining-*: whole tokens left, at least 0
	Reset     time.Duration // x-ratelimit-reset-*: until the bucket is full
}

// Verdict is the answer to one request.
type Verdict struct {
	OK bool
	// Reason is the limit that refused it (requests before tokens when
	// both did); "" when OK.
	Reason Reason
	// TooLarge: the request needs more tokens than the tenant's bucket
	// holds, so no wait will admit it.
	TooLarge bool
	// RetryAfter is how long until both limits would admit the request,
	// when refused and not TooLarge.
	RetryAfter time.Duration
	// Requests and Tokens are the limits after the request was counted
	// (or, when refused, as they stand).
	Requests, Tokens State
	// Tokens asked for, for the refusal's message.
	Asked int64
}

// Tenant is one tenant's buckets. The zero Tenant limits nothing; use
// NewTenant. A Tenant is not safe for concurrent use.
type Tenant struct {
	limits   Limits
	req, tok Bucket
}

// NewTenant returns a tenant whose buckets start full at now.
func NewTenant(l Limits, now time.Time) *Tenant {
	t := &Tenant{}
	t.SetLimits(l, now)
	return t
}

// Limits returns the limits in effect.
func (t *Tenant) Limits() Limits { return t.limits }

// SetLimits puts new limits in effect from now on; see Bucket.Resize.
func (t *Tenant) SetLimits(l Limits, now time.Time) {
	t.limits = l
	t.req.Resize(l.RequestsPerSecond, or(l.RequestsBurst, l.RequestsPerSecond), now)
	t.tok.Resize(l.TokensPerMinute/60, or(l.TokensBurst, l.TokensPerMinute), now)
}

// Admit counts one request reserving tokens at now, if both limits have
// room for it; otherwise it counts nothing and says which limit refused
// and how long to wait.
func (t *Tenant) Admit(tokens int64, now time.Time) Verdict {
	n := float64(max(tokens, 0))
	v := Verdict{Asked: tokens}
	wr, wt := t.req.Wait(1, now), t.tok.Wait(n, now)
	switch {
	case wt < 0:
		v.Reason, v.TooLarge = ReasonTokens, true
	case wr > 0:
		v.Reason, v.RetryAfter = ReasonRequests, max(wr, wt)
	case wt > 0:
		v.Reason, v.RetryAfter = ReasonTokens, wt
	default:
		t.req.Take(1, now)
		t.tok.Take(n, now)
		v.OK = true
	}
	v.Requests, v.Tokens = state(&t.req, now), state(&t.tok, now)
	return v
}

// Settle replaces a reservation of reserved tokens by the actual count
// at now: the difference goes back to the tokens bucket, or is taken from
// it.
func (t *Tenant) Settle(reserved, actual int64, now time.Time) {
	t.tok.Give(float64(reserved-actual), now)
}

// TokensLevel is the tokens bucket's level at now (negative in debt), for
// tests and the admin view.
func (t *Tenant) TokensLevel(now time.Time) float64 { return t.tok.Level(now) }

// or is n, else (n ≤ 0) def.
func or(n, def float64) float64 {
	if n > 0 {
		return n
	}
	return def
}

func state(b *Bucket, now time.Time) State {
	if !b.On() {
		return State{}
	}
	return State{On: true, Limit: int64(b.Size()), Remaining: int64(math.Max(0, math.Floor(b.Level(now)))),
		Reset: b.UntilFull(now)}
}

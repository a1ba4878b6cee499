package ratelimit

import (
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/inferrail/inferrail/config"
	"github.com/inferrail/inferrail/model/limit"
)

// MetricThrottled counts requests refused by a rate limit, by tenant and
// reason (requests, tokens).
const MetricThrottled = "inferrail_ratelimit_throttled_total"

// Limiter holds every tenant's buckets. See the package doc.
type Limiter struct {
	now func() time.Time
	set *metrics.Set
	// limits is the config in effect; mu orders Apply against a tenant's
	// creation, so a tenant made from an old config gets the new one.
	limits  atomic.Pointer[config.RateLimits]
	mu      sync.RWMutex // guards tenants
	tenants map[string]*tenant
}

// tenant is one tenant's buckets, under mu.
type tenant struct {
	mu        sync.Mutex
	b         *limit.Tenant
	throttled [2]*metrics.Counter // by limit.Reasons
}

// New returns a Limiter for c's rate_limits, recording in set (nil: a set
// of its own) and reading the time from now (nil: time.Now).
func New(c *config.Config, set *metrics.Set, now func() time.Time) *Limiter {
	if set == nil {
		set = metrics.NewSet()
	}
	if now == nil {
		now = time.Now
	}
	l := &Limiter{now: now, set: set, tenants: map[string]*tenant{}}
	l.limits.Store(&c.RateLimits)
	return l
}

// Metrics is the set the Limiter records in.
func (l *Limiter) Metrics() *metrics.Set { return l.set }

// Apply puts a reloaded config's rate_limits in effect. Each tenant keeps
// what it has used (see limit.Bucket.Resize).
func (l *Limiter) Apply(c *config.Config) {
	rl := &c.RateLimits
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.limits.Store(rl)
	for name, t := range l.tenants {
		t.mu.Lock()
		t.b.SetLimits(limits(rl.For(name)), now)
		t.mu.Unlock()
	}
}

func limits(r config.RateLimit) limit.Limits {
	return limit.Limits{RequestsPerSecond: r.RequestsPerSecond, TokensPerMinute: r.TokensPerMinute,
		RequestsBurst: r.RequestsBurst, TokensBurst: r.TokensBurst}
}

// Ticket is an admitted request's reservation; the zero Ticket reserved
// nothing.
type Ticket struct {
	t        *tenant
	reserved int64
}

// Limited reports whether the request counted against a limit.
func (k Ticket) Limited() bool { return k.t != nil }

// Tenant returns name's buckets, or nil while the tenant has no limit
// (nothing to count, no headers to send).
func (l *Limiter) Tenant(name string) *Tenant {
	t := l.tenant(name)
	if t == nil {
		return nil
	}
	return (*Tenant)(t)
}

// Tenant is one tenant's buckets, as Limiter.Tenant returns them.
type Tenant tenant

// CountsTokens reports whether the tenant has a tokens limit, so that the
// caller need not count a request's tokens for one without.
func (t *Tenant) CountsTokens() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.b.Limits().TokensPerMinute > 0
}

// Admit counts a request of the tenant reserving tokens, at now. A
// refused request is counted in MetricThrottled.
func (t *Tenant) Admit(tokens int64, now time.Time) (Ticket, limit.Verdict) {
	t.mu.Lock()
	v := t.b.Admit(tokens, now)
	t.mu.Unlock()
	if !v.OK {
		if v.Reason == limit.ReasonRequests {
			t.throttled[0].Inc()
		} else {
			t.throttled[1].Inc()
		}
		return Ticket{}, v
	}
	return Ticket{t: (*tenant)(t), reserved: tokens}, v
}

// Now is the Limiter's clock.
func (l *Limiter) Now() time.Time { return l.now() }

// Admit counts a request of tenant reserving tokens: Tenant and its Admit
// in one. A tenant without limits is admitted at once, with a zero
// Verdict's states (no headers) and a zero Ticket.
func (l *Limiter) Admit(name string, tokens int64) (Ticket, limit.Verdict) {
	t := l.Tenant(name)
	if t == nil {
		return Ticket{}, limit.Verdict{OK: true}
	}
	return t.Admit(tokens, l.now())
}

// Settle replaces the ticket's reservation by the tokens the request
// used. Call it once per admitted request; nothing for a zero Ticket.
func (l *Limiter) Settle(k Ticket, used int64) {
	if k.t == nil || used == k.reserved {
		return
	}
	now := l.now()
	k.t.mu.Lock()
	k.t.b.Settle(k.reserved, used, now)
	k.t.mu.Unlock()
}

// Reserved is the tokens the ticket reserved.
func (k Ticket) Reserved() int64 { return k.reserved }

// tenant returns name's buckets, creating them on first use; nil while
// the tenant has no limit.
func (l *Limiter) tenant(name string) *tenant {
	l.mu.RLock()
	t := l.tenants[name]
	rl := l.limits.Load()
	l.mu.RUnlock()
	if t != nil {
		return t
	}
	lim := limits(rl.For(name))
	if !lim.On() {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if t = l.tenants[name]; t != nil {
		return t
	}
	// Under mu the config cannot change: read it again.
	t = &tenant{b: limit.NewTenant(limits(l.limits.Load().For(name)), l.now())}
	for i, r := range limit.Reasons {
		t.throttled[i] = l.set.GetOrCreateCounter(MetricThrottled + `{tenant=` + strconv.Quote(name) + `,reason="` + string(r) + `"}`)
	}
	l.tenants[name] = t
	return t
}

// Tokens is the level of tenant's tokens bucket now (negative in debt);
// false when the tenant has no buckets yet.
func (l *Limiter) Tokens(name string) (float64, bool) {
	l.mu.RLock()
	t := l.tenants[name]
	l.mu.RUnlock()
	if t == nil {
		return 0, false
	}
	now := l.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.b.TokensLevel(now), true
}

package config

import (
	"github.com/inferrail/inferrail/model/flow"
	"github.com/inferrail/inferrail/model/sched"
)

// RateLimits holds each tenant's rate limits, counted in the gateway: a
// token bucket for requests per second and one for tokens per minute.
// A tenant is an API key's tenant (auth.api_keys); without API keys every
// request is one tenant, "". A request over a limit gets 429 with
// code rate_limit_exceeded, Retry-After and OpenAI's x-ratelimit-*
// headers, which answers within the limits carry too. Live: a reload
// changes the limits of the requests that follow and keeps what each
// tenant has used.
//
// Tokens are the prompt's (the gateway's tokenizer's count, else the
// body's length / 4, OpenAI's rule of thumb) plus the request's
// max_completion_tokens or max_tokens, reserved when the request is
// admitted; when the response ends, the reservation is settled to the
// engine's usage.prompt_tokens + usage.completion_tokens. A streamed
// response carries usage only with stream_options.include_usage; without
// it the reservation stands. A request no engine answered, or that an
// engine answered with an error, is refunded its tokens (not its request).
type RateLimits struct {
	// Default are the limits of every tenant without an entry in tenants.
	Default RateLimit `koanf:"default"`
	// Tenants sets limits per tenant. Default none.
	Tenants []TenantRateLimit `koanf:"tenants"`
}

// RateLimit is one tenant's limits; 0 turns a limit off.
type RateLimit struct {
	// RequestsPerSecond is the requests a tenant may send a second; it may
	// burst to one second's worth after a quiet second. Default 0: no
	// limit.
	RequestsPerSecond float64 `koanf:"requests_per_second"`
	// TokensPerMinute is the tokens a tenant may use a minute; it may burst
	// to one minute's worth. A request that alone needs more is refused
	// at once. Default 0: no limit.
	TokensPerMinute float64 `koanf:"tokens_per_minute"`
	// RequestsBurst is how many requests a quiet tenant may send at once:
	// the requests bucket's size. Set it below requests_per_second to keep
	// a tenant's burst from landing on the engines all together. Default 0:
	// one second's worth (at least 1).
	RequestsBurst float64 `koanf:"requests_burst"`
	// TokensBurst is the tokens bucket's size; a request needing more is
	// refused at once. Default 0: one minute's worth.
	TokensBurst float64 `koanf:"tokens_burst"`
}

// TenantRateLimit is one tenant's own limits; a limit it leaves out is
// rate_limits.default's.
type TenantRateLimit struct {
	// Tenant is the tenant, as auth.api_keys names it (an API key's tenant,
	// else its id). Required and unique.
	Tenant string `koanf:"tenant"`
	// RequestsPerSecond is as in rate_limits.default; 0: no limit.
	RequestsPerSecond *float64 `koanf:"requests_per_second"`
	// TokensPerMinute is as in rate_limits.default; 0: no limit.
	TokensPerMinute *float64 `koanf:"tokens_per_minute"`
	// RequestsBurst is as in rate_limits.default; 0: one second's worth.
	RequestsBurst *float64 `koanf:"requests_burst"`
	// TokensBurst is as in rate_limits.default; 0: one minute's worth.
	TokensBurst *float64 `koanf:"tokens_burst"`
}

// For returns tenant's limits: its own entry's, each left out taken from
// the default.
func (r *RateLimits) For(tenant string) RateLimit {
	l := r.Default
	for i := range r.Tenants {
		t := &r.Tenants[i]
		if t.Tenant != tenant {
			continue
		}
		if t.RequestsPerSecond != nil {
			l.RequestsPerSecond = *t.RequestsPerSecond
		}
		if t.TokensPerMinute != nil {
			l.TokensPerMinute = *t.TokensPerMinute
		}
		if t.RequestsBurst != nil {
			l.RequestsBurst = *t.RequestsBurst
		}
		if t.TokensBurst != nil {
			l.TokensBurst = *t.TokensBurst
		}
		break
	}
	return l
}

// apply lays an EndpointPickerConfig's flow control over f: the
// flowControl gate turns it on, and each key the document sets replaces
// f's (maxRequests max_queued, defaultRequestTTL max_wait, the bands'
// policies fairness and ordering, enableEviction eviction, the detector
// plugin saturation_detector's type and that type's parameters). Nil
// changes nothing.
func (f *FlowControl) apply(p *sched.FlowControl) {
	if p == nil {
		return
	}
	f.Enabled = f.Enabled || p.Gate
	if p.MaxRequests > 0 {
		f.MaxQueued = p.MaxRequests
	}
	if p.HasTTL {
		f.MaxWait = p.RequestTTL
	}
	if p.Fairness != "" {
		f.Fairness = p.Fairness
	}
	if p.Ordering != "" {
		f.Ordering = p.Ordering
	}
	if p.HasEviction {
		f.Eviction = p.Eviction
	}
	if d := p.Detector; d != nil {
		s := &f.SaturationDetector
		s.Type, s.Headroom = d.Type, d.Headroom
		if d.Type == flow.DetectorConcurrency {
			s.MaxConcurrency = d.Concurrency.MaxConcurrency
		} else {
			s.QueueDepthThreshold = d.Utilization.QueueDepthThreshold
			s.KVCacheUtilThreshold = d.Utilization.KVCacheUtilThreshold
			s.MetricsStalenessThreshold = d.Utilization.MetricsStalenessThreshold
		}
	}
}

func (v *validator) flowControl(f *FlowControl) {
	v.atLeast("flow_control.max_queued", f.MaxQueued, 1)
	v.positive("flow_control.max_wait", f.MaxWait)
	v.oneOf("flow_control.fairness", f.Fairness, flow.Fairness...)
	v.oneOf("flow_control.ordering", f.Ordering, flow.Orderings...)
	for _, name := range sortedKeys(f.Objectives) {
		if name == "" {
			v.add("flow_control.objectives", "an objective's name is empty")
		}
	}
	seen := map[string]string{}
	for _, name := range sortedKeys(f.TenantPriorities) {
		v.id("flow_control.tenant_priorities."+name, name, seen)
	}
	d := &f.SaturationDetector
	v.oneOf("flow_control.saturation_detector.type", d.Type, flow.Detectors...)
	v.atLeast("flow_control.saturation_detector.queue_depth_threshold", d.QueueDepthThreshold, 1)
	v.fraction("flow_control.saturation_detector.kv_cache_util_threshold", d.KVCacheUtilThreshold, false)
	v.positive("flow_control.saturation_detector.metrics_staleness_threshold", d.MetricsStalenessThreshold)
	v.atLeast("flow_control.saturation_detector.max_concurrency", d.MaxConcurrency, 1)
	v.nonNegativeNumber("flow_control.saturation_detector.headroom", d.Headroom)
}

func (v *validator) rateLimits(r *RateLimits) {
	for _, k := range []struct {
		key string
		n   float64
	}{{"requests_per_second", r.Default.RequestsPerSecond}, {"tokens_per_minute", r.Default.TokensPerMinute},
		{"requests_burst", r.Default.RequestsBurst}, {"tokens_burst", r.Default.TokensBurst}} {
		v.nonNegativeNumber("rate_limits.default."+k.key, k.n)
	}
	seen := map[string]string{}
	for i := range r.Tenants {
		t := &r.Tenants[i]
		p := index("rate_limits.tenants", i)
		v.id(p+".tenant", t.Tenant, seen)
		for _, k := range []struct {
			key string
			n   *float64
		}{{"requests_per_second", t.RequestsPerSecond}, {"tokens_per_minute", t.TokensPerMinute},
			{"requests_burst", t.RequestsBurst}, {"tokens_burst", t.TokensBurst}} {
			if k.n != nil {
				v.nonNegativeNumber(p+"."+k.key, *k.n)
			}
		}
	}
}

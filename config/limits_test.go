package config

import (
	"slices"
	"strings"
	"testing"
)

const limitsBase = "models: [{name: m}]\nreplicas: [{id: r, url: 'http://h', models: [m]}]\n"

func TestRateLimits(t *testing.T) {
	c := mustParse(t, limitsBase+`rate_limits:
  default: {requests_per_second: 5, tokens_per_minute: 1e5, requests_burst: 2}
  tenants:
    - {tenant: a, requests_per_second: 0.5, tokens_burst: 10}
    - {tenant: b, tokens_per_minute: 0, requests_burst: 0}
`, "INFERRAIL_RATE_LIMITS__DEFAULT__REQUESTS_PER_SECOND=7")
	f := func(tenant string, want RateLimit) {
		t.Helper()
		if got := c.RateLimits.For(tenant); got != want {
			t.Errorf("For(%q) = %+v, want %+v", tenant, got, want)
		}
	}
	f("a", RateLimit{RequestsPerSecond: 0.5, TokensPerMinute: 1e5, RequestsBurst: 2, TokensBurst: 10})
	f("b", RateLimit{RequestsPerSecond: 7})
	f("c", RateLimit{RequestsPerSecond: 7, TokensPerMinute: 1e5, RequestsBurst: 2})
	f("", RateLimit{RequestsPerSecond: 7, TokensPerMinute: 1e5, RequestsBurst: 2})

	_, err := Parse([]byte(limitsBase+`rate_limits:
  default: {requests_per_second: -1, tokens_per_minute: x, tokens_burst: -2}
  tenants: [{tenant: a, tokens_per_minute: -5}, {tenant: a, requests_burst: -1}, {requests_per_second: 1}, {tenant: "a b"}]
`), nil)
	want := []string{"rate_limits.default.requests_per_second", "rate_limits.default.tokens_burst", "rate_limits.default.tokens_per_minute",
		"rate_limits.tenants[0].tokens_per_minute", "rate_limits.tenants[1].requests_burst", "rate_limits.tenants[1].tenant",
		"rate_limits.tenants[2].tenant", "rate_limits.tenants[3].tenant"}
	got := keys(t, err)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("problems at %q, want %q\n%v", got, want, err)
	}

	// Live: a reload that changes only rate_limits needs no restart.
	next := mustParse(t, limitsBase+"rate_limits: {default: {requests_per_second: 1}}\n")
	prev := mustParse(t, limitsBase)
	if d, ro := Diff(prev, next), RestartOnly(prev, next); !slices.Equal(d, []string{"rate_limits"}) || len(ro) > 0 {
		t.Errorf("diff %q, restart-only %q", d, ro)
	}
}

func TestFlowControl(t *testing.T) {
	c := mustParse(t, limitsBase+`flow_control:
  enabled: true
  fairness: round-robin-fairness-policy
  ordering: edf-ordering-policy
  objectives: {premium: 10, batch: -1}
  tenant_priorities: {team-a: 5}
  saturation_detector: {type: concurrency-detector, max_concurrency: 110, headroom: 0.1}
`)
	c2 := mustParse(t, limitsBase+"flow_control: {ordering: slo-deadline-ordering-policy}\n")
	if c2.FlowControl.Ordering != "slo-deadline-ordering-policy" {
		t.Errorf("ordering %q", c2.FlowControl.Ordering)
	}
	fc := c.FlowControl
	if fc.Objectives["batch"] != -1 || fc.TenantPriorities["team-a"] != 5 || fc.SaturationDetector.MaxConcurrency != 110 ||
		fc.SaturationDetector.QueueDepthThreshold != 5 || fc.SaturationDetector.KVCacheUtilThreshold != 0.8 {
		t.Errorf("parsed %+v", fc)
	}
	_, err := Parse([]byte(limitsBase+`flow_control:
  max_queued: 0
  fairness: fair
  ordering: lifo
  tenant_priorities: {"a b": 1}
  saturation_detector: {type: x, queue_depth_threshold: 0, kv_cache_util_threshold: 1.5, metrics_staleness_threshold: 0s, max_concurrency: 0, headroom: -1}
`), nil)
	want := []string{"flow_control.fairness", "flow_control.max_queued", "flow_control.ordering",
		"flow_control.saturation_detector.headroom", "flow_control.saturation_detector.kv_cache_util_threshold",
		"flow_control.saturation_detector.max_concurrency", "flow_control.saturation_detector.metrics_staleness_threshold",
		"flow_control.saturation_detector.queue_depth_threshold", "flow_control.saturation_detector.type",
		"flow_control.tenant_priorities.a b"}
	got := keys(t, err)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("problems at %q, want %q\n%v", got, want, err)
	}
	// The old key is refused with its replacement named.
	_, err = Parse([]byte(limitsBase+"flow_control: {fair: true}\n"), nil)
	if err == nil || !strings.Contains(err.Error(), "flow_control.fairness") {
		t.Errorf("flow_control.fair: %v", err)
	}
	// Live.
	prev := mustParse(t, limitsBase)
	if ro := RestartOnly(prev, c); len(ro) > 0 {
		t.Errorf("restart-only %q", ro)
	}
}

package config

import (
	"slices"
	"testing"
)

const limitsBase = "models: [{name: m}]\nreplicas: [{id: r, url: 'http://h', models: [m]}]\n"

func TestRateLimits(t *testing.T) {
	c := mustParse(t, limitsBase+`rate_limits:
  default: {requests_per_second: 5, tokens_per_minute: 1e5}
  tenants:
    - {tenant: a, requests_per_second: 0.5}
    - {tenant: b, tokens_per_minute: 0}
`, "INFERRAIL_RATE_LIMITS__DEFAULT__REQUESTS_PER_SECOND=7")
	f := func(tenant string, want RateLimit) {
		t.Helper()
		if got := c.RateLimits.For(tenant); got != want {
			t.Errorf("For(%q) = %+v, want %+v", tenant, got, want)
		}
	}
	f("a", RateLimit{RequestsPerSecond: 0.5, TokensPerMinute: 1e5})
	f("b", RateLimit{RequestsPerSecond: 7})
	f("c", RateLimit{RequestsPerSecond: 7, TokensPerMinute: 1e5})
	f("", RateLimit{RequestsPerSecond: 7, TokensPerMinute: 1e5})

	_, err := Parse([]byte(limitsBase+`rate_limits:
  default: {requests_per_second: -1, tokens_per_minute: x}
  tenants: [{tenant: a, tokens_per_minute: -5}, {tenant: a}, {requests_per_second: 1}, {tenant: "a b"}]
`), nil)
	want := []string{"rate_limits.default.requests_per_second", "rate_limits.default.tokens_per_minute",
		"rate_limits.tenants[0].tokens_per_minute", "rate_limits.tenants[1].tenant", "rate_limits.tenants[2].tenant",
		"rate_limits.tenants[3].tenant"}
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

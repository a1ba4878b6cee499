package cluster

import (
	"testing"
	"time"

	"github.com/inferrail/inferrail/model/policy"
	"github.com/inferrail/inferrail/model/sched"
)

// oldRun runs cfg routed by model/policy's policy for cfg.Policy with the
// run's params (policy.Spec.Build), routing on estimates as
// policy.CacheAware says: the simulator as it decided before the built-in
// profiles.
func oldRun(t *testing.T, cfg Config) Result {
	t.Helper()
	cm := cfg.costParams()
	spec := policy.Spec{Name: cfg.Policy, CostModel: &cm, PrefixHash: cfg.PrefixHash, KVAware: cfg.KVAware}
	pol, err := spec.Build()
	if err != nil {
		t.Fatal(err)
	}
	var signals sched.Signal
	if policy.CacheAware(cfg.Policy) {
		signals = sched.SignalEstimates
	}
	if err := cfg.validate(); err != nil {
		t.Fatal(err)
	}
	r, err := newRunOf(&cfg, pol, signals)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.loop(); err != nil {
		t.Fatal(err)
	}
	return r.result()
}

// withParams sets every cache-aware policy's params away from their
// defaults, so that a profile that dropped one would decide otherwise.
func withParams(cfg Config) Config {
	cm := policy.DefaultCostModelParams()
	cm.Epsilon, cm.Kappa, cm.ShortPromptTokens = 0.25, 0.85, 64
	cm.SessionAffinity = true
	cm.HotPrefix.Window, cm.HotPrefix.Utilization = 2*time.Second, 0.05
	cfg.CostModel = &cm
	cfg.PrefixHash = &policy.PrefixHashParams{Blocks: 4}
	cfg.KVAware = &policy.KVAwareParams{CacheWeight: 2, LoadWeight: 0.5}
	return cfg
}

// TestBuiltinsRouteAsPolicies routes the same seeded traffic through the
// simulator twice for each of the seven policies, once with model/policy's
// policy and once with its built-in profile (sched.New, what Config.Policy
// runs), and requires every request to go to the same replica with the
// same prediction and outcome: on every golden case with the default
// params, and on two of them with every param changed.
func TestBuiltinsRouteAsPolicies(t *testing.T) {
	type run struct {
		name string
		cfg  func() Config
	}
	var runs []run
	for _, gc := range goldenCases() {
		runs = append(runs, run{gc.name, gc.cfg})
	}
	for _, gc := range goldenCases()[:3] {
		runs = append(runs, run{gc.name + "-params", func() Config { return withParams(gc.cfg()) }})
	}
	if raceEnabled {
		// A run is one goroutine; under -race one short case shows the
		// test runs.
		runs = []run{{"mix-4-short", func() Config {
			c := goldenCases()[0].cfg()
			c.Duration = 3 * time.Second
			return withParams(c)
		}}}
	}
	for _, rc := range runs {
		for _, name := range sched.Policies() {
			cfg := rc.cfg()
			cfg.Policy = name
			old, cur := oldRun(t, cfg), mustRun(t, cfg)
			if len(cur.Requests) < 20 {
				t.Fatalf("%s %s: %d requests, too few to tell", rc.name, name, len(cur.Requests))
			}
			op, cp := picks(&old), picks(&cur)
			if od, cd := digest(&old), digest(&cur); op != cp || od != cd {
				at := 0
				for at < min(len(op), len(cp)) && op[at] == cp[at] {
					at++
				}
				t.Errorf("%s %s: the profile decides otherwise than the policy: digest %s, want %s; first different pick at request %d of %d",
					rc.name, name, cd, od, at, len(op))
			}
		}
	}
}

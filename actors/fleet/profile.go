package fleet

import (
	"fmt"

	"github.com/inferrail/inferrail/config"
	"github.com/inferrail/inferrail/model/policy"
	"github.com/inferrail/inferrail/model/sched"
	"github.com/inferrail/inferrail/model/shadow"
)

// profile is one routing name of a model (an arm of its split, a shadow)
// as the fleet builds it: a policy's built-in profile with the routing
// section's params, or a scheduling profile of the config. Every policy is
// built through model/sched's registry.
type profile struct {
	name string
	cfg  *sched.Config
	// spec and doc are what the shadow log writes down to build it again
	// (shadow.Shadow): a policy's spec, or the profile's document.
	spec policy.Spec
	doc  map[string]any
	// key is everything it is built from: equal keys build equal
	// schedulers, so a reload that leaves it alone keeps the state.
	key string
}

// profileOf returns routing name of model m.
func profileOf(cfg *config.Config, m *config.Model, name string) (*profile, error) {
	if b, ok := sched.Lookup(name); ok {
		spec := b.Spec(modelSpec(cfg, m))
		c, err := b.Config(spec)
		if err != nil {
			return nil, fmt.Errorf("fleet: model %s: %w", m.Name, err)
		}
		return &profile{name: name, cfg: c, spec: spec, key: name + fmt.Sprint(c.Document())}, nil
	}
	c, err := cfg.Profile(m, name)
	switch {
	case err != nil:
		return nil, fmt.Errorf("fleet: model %s: %w", m.Name, err)
	case c == nil:
		return nil, fmt.Errorf("fleet: model %s: unknown policy %q; the policies are %v", m.Name, name, sched.Policies())
	}
	doc := c.Document()
	return &profile{name: name, cfg: c, spec: policy.Spec{Name: name}, doc: doc, key: name + fmt.Sprint(doc)}, nil
}

// signals returns what the profile routes on.
func (p *profile) signals() sched.Signal { return p.cfg.Signals() }

// estimates reports whether the profile routes on the estimate broadcast.
func (p *profile) estimates() bool { return p.signals()&sched.SignalEstimates != 0 }

// build returns a fresh Scheduler of the profile.
func (p *profile) build() (policy.Policy, error) { return p.cfg.Build() }

// trial returns how the shadow log records the profile as shadow k of
// model i, with the random stream it draws from.
func (p *profile) trial(seed uint64, i, k int) shadow.Shadow {
	return shadow.Shadow{Spec: p.spec, Scheduler: p.doc, Seed: seed, Stream: trialStream(i, k)}
}

// modelSpec is every policy's params for model m, from the routing section
// and the model's cost model; sched.Builtin.Spec keeps a policy's own.
func modelSpec(cfg *config.Config, m *config.Model) policy.Spec {
	rt := &cfg.Routing
	cm := policy.DefaultCostModelParams()
	cm.Model = costModel(cfg.RoutingFor(m).CostModel)
	cm.Epsilon, cm.Kappa, cm.ShortPromptTokens = rt.Epsilon, rt.Kappa, rt.ShortPromptTokens
	cm.RecomputeWeight, cm.SLOAdmission, cm.AdmissionWaitFactor = rt.RecomputeWeight, rt.SLOAdmission, rt.SLOAdmissionWaitFactor
	cm.SessionAffinity, cm.ColdRendezvous, cm.ColdWhenShared = rt.SessionAffinity, rt.ColdRendezvous, rt.SharedEnginesRendezvous
	cm.HotPrefix = policy.HotPrefixParams{
		Enabled: rt.HotPrefix.Enabled, Blocks: rt.HotPrefix.Blocks,
		Window: rt.HotPrefix.Window, Utilization: rt.HotPrefix.Utilization,
	}
	return policy.Spec{
		PrefixHash: &policy.PrefixHashParams{Blocks: rt.PrefixHash.Blocks},
		KVAware:    &policy.KVAwareParams{CacheWeight: rt.KVAware.CacheWeight, LoadWeight: rt.KVAware.LoadWeight},
		CostModel:  &cm,
	}
}

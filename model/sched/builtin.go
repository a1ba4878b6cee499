package sched

import (
	"fmt"
	"maps"

	"github.com/inferrail/inferrail/model/policy"
)

// Builtin is one of the policies every config may name (routing's
// default_policy, a model's policy, a split's arms, the shadows), as the
// profile it is made of. Builtins are fixed when the package loads; callers
// must not modify one.
type Builtin struct {
	// Name is the policy's config name.
	Name string
	// Doc says how the policy decides, for docs/plugins.md.
	Doc string
	// plugins are the profile's plugin entries, for the policy's params:
	// the profile is the default one made of them in their order.
	plugins func(s policy.Spec) []any
	// params keeps of a spec the params the profile is made from.
	params func(s policy.Spec) policy.Spec
}

func noParams(policy.Spec) policy.Spec { return policy.Spec{} }

// builtins is every policy, in the order the docs list them. It is the only
// place policy names are defined; it is never modified.
var builtins = []Builtin{
	{Name: "round_robin", Doc: "Each replica in turn.", params: noParams, plugins: func(policy.Spec) []any {
		return []any{entry(&roundRobinPicker, nil)}
	}},
	{Name: "random", Doc: "A replica at random.", params: noParams, plugins: func(policy.Spec) []any {
		return []any{entry(&randomPicker, nil)}
	}},
	{Name: "least_request", Doc: "The fewest requests in flight, ties at random.", params: noParams, plugins: func(policy.Spec) []any {
		return []any{entry(&activeRequestScorer, nil), entry(&maxScorePicker, nil)}
	}},
	{Name: "p2c", Doc: "The fewer requests in flight of two replicas drawn at random.", params: noParams, plugins: func(policy.Spec) []any {
		return []any{entry(&activeRequestScorer, nil), entry(&p2cPicker, nil)}
	}},
	{Name: "prefix_hash", Doc: "Consistent hashing of the prompt's first blocks.", plugins: func(s policy.Spec) []any {
		p := policy.DefaultPrefixHashParams()
		if s.PrefixHash != nil && s.PrefixHash.Blocks > 0 {
			p = *s.PrefixHash
		}
		return []any{entry(&prefixHashPicker, map[string]any{"blocks": p.Blocks})}
	}, params: func(s policy.Spec) policy.Spec { return policy.Spec{PrefixHash: s.PrefixHash} }},
	{Name: "kv_aware", Doc: "The best share of the prompt cached against the load.", plugins: func(s policy.Spec) []any {
		p := policy.DefaultKVAwareParams()
		if s.KVAware != nil {
			p = *s.KVAware
		}
		return []any{entry(&kvAwarePicker, map[string]any{"cacheWeight": p.CacheWeight, "loadWeight": p.LoadWeight})}
	}, params: func(s policy.Spec) policy.Spec { return policy.Spec{KVAware: s.KVAware} }},
	{Name: "cost_model", Doc: "The lowest estimated time to first token within the load guards.", plugins: costModelPlugins,
		params: func(s policy.Spec) policy.Spec { return policy.Spec{CostModel: s.CostModel} }},
}

// costModelPlugins are cost_model's guards and decision, with the spec's
// params and NewCostModel's defaults for those it leaves zero.
func costModelPlugins(s policy.Spec) []any {
	p := policy.DefaultCostModelParams()
	if s.CostModel != nil {
		p = *s.CostModel
	}
	p, on := filled(p)
	hp := p.HotPrefix
	costParams := map[string]any{
		"prefillTokenSecs":       p.Model.PrefillTokenSecs,
		"prefillPairSecs":        p.Model.PrefillPairSecs,
		"prefillFixedSecs":       p.Model.PrefillFixedSecs,
		"decodeInterferenceSecs": p.Model.DecodeInterferenceSecs,
		"decodeTokenSecs":        p.Model.DecodeTokenSecs,
	}
	picker := maps.Clone(costParams)
	maps.Copy(picker, map[string]any{
		"sessionAffinity": p.SessionAffinity,
		"sessionSlots":    p.SessionSlots,
		"coldRendezvous":  p.ColdRendezvous,
		"coldWhenShared":  p.ColdWhenShared,
		"recomputeWeight": p.RecomputeWeight,
		"hotPrefix": map[string]any{
			"enabled": on, "blocks": hp.Blocks, "window": hp.Window, "utilization": hp.Utilization,
			"sketchDepth": hp.SketchDepth, "sketchWidth": hp.SketchWidth,
		},
	})
	var plugins []any
	if p.SLOAdmission {
		costParams["waitFactor"] = max(p.AdmissionWaitFactor, 1)
		plugins = append(plugins, entry(&costModelAdmitter, costParams))
	}
	return append(plugins,
		entry(&boundedLoadFilter, map[string]any{"epsilon": p.Epsilon}),
		entry(&kvPressureFilter, map[string]any{"kappa": p.Kappa, "shortPromptTokens": p.ShortPromptTokens}),
		entry(&costModelPicker, picker),
	)
}

// entry is a plugin entry of a document.
func entry(t *Type, params map[string]any) map[string]any {
	e := map[string]any{"type": t.Name}
	if params != nil {
		e["parameters"] = params
	}
	return e
}

// Policies returns the policy names, in the docs' order.
func Policies() []string {
	out := make([]string, len(builtins))
	for i := range builtins {
		out[i] = builtins[i].Name
	}
	return out
}

// Lookup returns the policy named name.
func Lookup(name string) (*Builtin, bool) {
	for i := range builtins {
		if builtins[i].Name == name {
			return &builtins[i], true
		}
	}
	return nil, false
}

// Document returns the policy's profile for s's params as an
// EndpointPickerConfig document.
func (b *Builtin) Document(s policy.Spec) map[string]any {
	return map[string]any{"apiVersion": APIVersion, "kind": ConfigKind, "plugins": b.plugins(s)}
}

// Config returns the policy's profile for s's params (its Name is
// ignored): the cache-aware policies take theirs from s, and their defaults
// when s has none.
func (b *Builtin) Config(s policy.Spec) (*Config, error) {
	c, _, err := Parse(b.Name, b.Document(s))
	if err != nil {
		return nil, fmt.Errorf("sched: policy %s: %w", b.Name, err)
	}
	return c, nil
}

// Spec returns the spec of the policy with the params of s its profile is
// made from, the others left out: what builds it again (New), and what the
// shadow log writes down.
func (b *Builtin) Spec(s policy.Spec) policy.Spec {
	out := b.params(s)
	out.Name = b.Name
	return out
}

// Signals returns what the policy routes on.
func (b *Builtin) Signals() Signal {
	c, err := b.Config(policy.Spec{})
	if err != nil {
		panic("BUG: sched: built-in profile " + b.Name + ": " + err.Error())
	}
	return c.Signals()
}

// New returns a Scheduler for the policy s names, with s's params: the
// built-in profile, deciding as the policy does. Unknown names are an
// error.
func New(s policy.Spec) (*Scheduler, error) {
	b, ok := Lookup(s.Name)
	if !ok {
		return nil, fmt.Errorf("sched: unknown policy %q; the policies are %v", s.Name, Policies())
	}
	c, err := b.Config(s)
	if err != nil {
		return nil, err
	}
	return c.Build()
}

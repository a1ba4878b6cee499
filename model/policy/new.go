package policy

import (
	"errors"
	"fmt"
)

// ErrNotImplemented is returned for a policy or feature the configuration
// knows but this build does not route with yet. New no longer returns it;
// callers (the fleet) keep it for what they cannot wire yet.
var ErrNotImplemented = errors.New("not implemented yet")

// implementations are this package's policies, each made fresh with the
// routing section's defaults; New finds one by its Name. The names are
// model/sched's registry's (sched.Policies): the gateway builds its
// policies there, as the built-in profiles that were proven to decide as
// these implementations do. cost_model comes last, since making it
// allocates its tables.
var implementations = []func() Policy{
	func() Policy { return &RoundRobin{} },
	func() Policy { return Random{} },
	func() Policy { return LeastRequest{} },
	func() Policy { return P2C{} },
	func() Policy { return NewPrefixHash(DefaultPrefixHashParams()) },
	func() Policy { return NewKVAware(DefaultKVAwareParams()) },
	func() Policy { return NewCostModel(DefaultCostModelParams()) },
}

// New returns a fresh policy of this package by its config name. Every
// call returns a new value with its own state. The cache-aware policies
// prefix_hash, kv_aware and cost_model get the routing section's defaults;
// NewPrefixHash, NewKVAware and NewCostModel take configured params.
// Unknown names are an error. The gateway builds its policies with
// sched.New; New builds the implementations the built-in profiles are
// checked against.
func New(name string) (Policy, error) {
	for _, mk := range implementations {
		if p := mk(); p.Name() == name {
			return p, nil
		}
	}
	return nil, fmt.Errorf("policy: unknown policy %q", name)
}

// Spec is a policy's config name with the parameters it is built from:
// the cache-aware policies carry theirs in their own field, the others
// have none. Build turns it into the policy, so that a spec written down
// (the shadow log) builds the same policy again.
type Spec struct {
	Name       string            `json:"name"`
	PrefixHash *PrefixHashParams `json:"prefix_hash,omitempty"`
	KVAware    *KVAwareParams    `json:"kv_aware,omitempty"`
	CostModel  *CostModelParams  `json:"cost_model,omitempty"`
}

// Build returns a fresh policy of this package for s: the one of s's
// params whose policy is named s.Name, else New's. A cache-aware policy
// without its parameters gets New's defaults; unknown names are an error.
// (sched.New builds the same decisions as a scheduling profile.)
func (s Spec) Build() (Policy, error) {
	if err := s.Check(); err != nil {
		return nil, err
	}
	var built []Policy
	if s.PrefixHash != nil {
		built = append(built, NewPrefixHash(*s.PrefixHash))
	}
	if s.KVAware != nil {
		built = append(built, NewKVAware(*s.KVAware))
	}
	if s.CostModel != nil {
		built = append(built, NewCostModel(*s.CostModel))
	}
	for _, p := range built {
		if p.Name() == s.Name {
			return p, nil
		}
	}
	return New(s.Name)
}

// Check reports a spec whose table sizes are out of bounds. A spec can
// come from a file (the shadow log), and cost_model's tables are
// allocated up front.
func (s Spec) Check() error {
	if c := s.CostModel; c != nil {
		if hp := c.HotPrefix; hp.SketchDepth > MaxSketchDepth || hp.SketchWidth > MaxSketchWidth {
			return fmt.Errorf("policy: cost_model hot-prefix sketch %d x %d: over %d x %d",
				hp.SketchDepth, hp.SketchWidth, MaxSketchDepth, MaxSketchWidth)
		}
		if c.SessionSlots > MaxSessionSlots {
			return fmt.Errorf("policy: cost_model session slots %d: over %d", c.SessionSlots, MaxSessionSlots)
		}
	}
	return nil
}

// Bounds of cost_model's table sizes in a Spec (and in the scheduling
// pipeline's cost-model-picker), far above any config's: the tables are
// allocated up front.
const (
	MaxSketchDepth  = 64
	MaxSketchWidth  = 1 << 24
	MaxSessionSlots = 1 << 24
)

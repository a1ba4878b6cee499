package policy

import (
	"errors"
	"fmt"
)

// ErrNotImplemented is returned for a policy or feature the configuration
// knows but this build does not route with yet. New no longer returns it;
// callers (the fleet) keep it for what they cannot wire yet.
var ErrNotImplemented = errors.New("not implemented yet")

// New returns a fresh policy for its config name (routing.default_policy, a
// model's policy, a split's key). Every call returns a new value with its own
// state. The cache-aware policies prefix_hash, kv_aware and cost_model get
// the routing section's defaults; NewPrefixHash, NewKVAware and
// NewCostModel take configured params. Unknown names are an error.
func New(name string) (Policy, error) {
	switch name {
	case "round_robin":
		return &RoundRobin{}, nil
	case "random":
		return Random{}, nil
	case "least_request":
		return LeastRequest{}, nil
	case "p2c":
		return P2C{}, nil
	case "prefix_hash":
		return NewPrefixHash(DefaultPrefixHashParams()), nil
	case "kv_aware":
		return NewKVAware(DefaultKVAwareParams()), nil
	case "cost_model":
		return NewCostModel(DefaultCostModelParams()), nil
	default:
		return nil, fmt.Errorf("policy: unknown policy %q", name)
	}
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

// Build returns a fresh policy for s. A cache-aware policy without its
// parameters gets New's defaults; unknown names are an error.
func (s Spec) Build() (Policy, error) {
	if c := s.CostModel; c != nil {
		// A spec can come from a file (the shadow log), so its sizes are
		// checked: the sketch is allocated up front.
		if hp := c.HotPrefix; hp.SketchDepth > MaxSketchDepth || hp.SketchWidth > MaxSketchWidth {
			return nil, fmt.Errorf("policy: cost_model hot-prefix sketch %d x %d: over %d x %d",
				hp.SketchDepth, hp.SketchWidth, MaxSketchDepth, MaxSketchWidth)
		}
		if c.SessionSlots > MaxSessionSlots {
			return nil, fmt.Errorf("policy: cost_model session slots %d: over %d", c.SessionSlots, MaxSessionSlots)
		}
	}
	switch {
	case s.Name == "prefix_hash" && s.PrefixHash != nil:
		return NewPrefixHash(*s.PrefixHash), nil
	case s.Name == "kv_aware" && s.KVAware != nil:
		return NewKVAware(*s.KVAware), nil
	case s.Name == "cost_model" && s.CostModel != nil:
		return NewCostModel(*s.CostModel), nil
	}
	return New(s.Name)
}

// Bounds of cost_model's table sizes in a Spec (and in the scheduling
// pipeline's cost-model-picker), far above any config's: the tables are
// allocated up front.
const (
	MaxSketchDepth  = 64
	MaxSketchWidth  = 1 << 24
	MaxSessionSlots = 1 << 24
)

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

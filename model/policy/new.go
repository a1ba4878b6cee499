package policy

import (
	"errors"
	"fmt"
)

// ErrNotImplemented is returned by New for a policy the configuration knows
// but this build does not route with yet.
var ErrNotImplemented = errors.New("not implemented yet")

// New returns a fresh policy for its config name (routing.default_policy, a
// model's policy, a split's key). Every call returns a new value with its own
// state. Unknown names are an error; the cache-aware policies prefix_hash,
// kv_aware and cost_model return an error wrapping ErrNotImplemented.
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
	case "prefix_hash", "kv_aware", "cost_model":
		return nil, fmt.Errorf("policy %s: %w", name, ErrNotImplemented)
	default:
		return nil, fmt.Errorf("policy: unknown policy %q", name)
	}
}

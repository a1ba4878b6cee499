package sched_test

import (
	"fmt"
	"math/rand/v2"

	"github.com/inferrail/inferrail/model/policy"
	"github.com/inferrail/inferrail/model/sched"
)

func ExampleNew() {
	s, err := sched.New(policy.Spec{Name: "least_request"})
	if err != nil {
		panic(err)
	}
	rng := rand.New(rand.NewPCG(1, 0)) // routing.seed
	cands := []policy.Candidate{{Replica: 0, InFlight: 3}, {Replica: 1, InFlight: 1}, {Replica: 2, InFlight: 2}}
	i, _ := s.Pick(&policy.Request{}, cands, rng)
	fmt.Println(s.Name(), "picks replica", cands[i].Replica)
	// Output: least_request picks replica 1
}

func ExampleParse() {
	// An llm-d EndpointPickerConfig, as a YAML or JSON decoder yields it.
	doc := map[string]any{
		"apiVersion": "inference.networking.x-k8s.io/v1alpha1",
		"kind":       "EndpointPickerConfig",
		"plugins": []any{
			map[string]any{"type": "decode-filter"},
			map[string]any{"type": "queue-scorer"},
			map[string]any{"type": "kv-cache-utilization-scorer"},
		},
	}
	c, warnings, err := sched.Parse("mine", doc)
	if err != nil {
		panic(err)
	}
	for _, w := range warnings {
		fmt.Println("warning:", w)
	}
	s, _ := c.Build()
	cands := []policy.Candidate{
		{Replica: 0, Waiting: 4, KVUsage: 0.2, Fresh: true},
		{Replica: 1, Waiting: 0, KVUsage: 0.6, Fresh: true},
		{Replica: 2, Labels: map[string]string{sched.RoleLabel: "prefill"}},
	}
	ex, _ := s.Explain(&policy.Request{}, cands, rand.New(rand.NewPCG(1, 0)))
	for _, r := range ex.Profiles[0].Replicas {
		fmt.Printf("replica %d: set aside by %q, total %.2f, picked %v\n", r.Replica, r.Filter, r.Total, r.Picked)
	}
	// Output:
	// warning: apiVersion: inference.networking.x-k8s.io/v1alpha1 is deprecated; use llm-d.ai/v1alpha1
	// replica 0: set aside by "", total 0.40, picked false
	// replica 1: set aside by "", total 0.70, picked true
	// replica 2: set aside by "decode-filter", total 0.00, picked false
}

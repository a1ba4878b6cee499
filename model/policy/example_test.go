package policy_test

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/inferrail/inferrail/model/policy"
)

func ExampleNew() {
	p, err := policy.New("least_request")
	if err != nil {
		panic(err)
	}
	rng := rand.New(rand.NewPCG(1, 0)) // routing.seed
	cands := []policy.Candidate{
		{Replica: 0, InFlight: 3},
		{Replica: 1, InFlight: 1},
		{Replica: 2, InFlight: 2},
	}
	i, _ := p.Pick(&policy.Request{}, cands, rng)
	fmt.Println(p.Name(), "picks replica", cands[i].Replica)

	// cost_model weighs each replica's predicted cache against its queue.
	p, _ = policy.New("cost_model")
	req := &policy.Request{PromptTokens: 4000, Now: time.Unix(0, 0)}
	cands = []policy.Candidate{
		{Replica: 0, InFlight: 3, CachedTokens: 3500, QueuedPrefill: 2 * time.Second},
		{Replica: 1},
	}
	i, _ = p.Pick(req, cands, rng)
	fmt.Println(p.Name(), "picks replica", cands[i].Replica)
	// Output:
	// least_request picks replica 1
	// cost_model picks replica 1
}

func ExampleCostModel_Explain() {
	p := policy.NewCostModel(policy.DefaultCostModelParams())
	req := &policy.Request{PromptTokens: 4000, Now: time.Unix(0, 0)}
	cands := []policy.Candidate{
		{Replica: 0, InFlight: 3, CachedTokens: 3500, QueuedPrefill: 2 * time.Second},
		{Replica: 1, InFlight: 3, QueuedPrefill: 2200 * time.Millisecond},
	}
	ex, _ := p.Explain(req, cands, 0)
	for _, c := range ex.Cands {
		fmt.Printf("replica %d: cached %d, queue %v + prefill %v = %v\n",
			c.Replica, c.CachedTokens, c.Estimate.Queue, c.Estimate.Prefill.Round(100*time.Microsecond), c.Estimate.Total().Round(100*time.Microsecond))
	}
	fmt.Printf("winner replica %d, ahead on %s\n", cands[ex.Winner].Replica, ex.Term)
	// Output:
	// replica 0: cached 3500, queue 2s + prefill 61.2ms = 2.0612s
	// replica 1: cached 0, queue 2.2s + prefill 431.4ms = 2.6314s
	// winner replica 0, ahead on prefill
}

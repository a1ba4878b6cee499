package policy_test

import (
	"fmt"
	"math/rand/v2"

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

	_, err = policy.New("cost_model")
	fmt.Println(err)
	// Output:
	// least_request picks replica 1
	// policy cost_model: not implemented yet
}

package fleet_test

import (
	"fmt"
	"time"

	"github.com/inferrail/inferrail/actors/fleet"
	"github.com/inferrail/inferrail/config"
)

func ExampleFleet_Pick() {
	cfg := config.Default()
	cfg.Models = []config.Model{{Name: "inferrail/sim-8b", Aliases: []string{"sim"}, BlockSize: 16}}
	cfg.Replicas = []config.Replica{
		{ID: "r0", URL: "http://127.0.0.1:8001", Models: []string{"inferrail/sim-8b"}, MaxConcurrency: 1024},
		{ID: "r1", URL: "http://127.0.0.1:8002", Models: []string{"inferrail/sim-8b"}, MaxConcurrency: 1024},
	}
	cfg.Routing.DefaultPolicy = "round_robin"
	cfg.Routing.Seed = 7
	f, err := fleet.Start(cfg, fleet.Options{}) // no Prober: no active health checks
	if err != nil {
		panic(err)
	}
	defer f.Stop()

	model, _ := f.Resolve("sim")
	for range 3 {
		d, err := f.Pick(fleet.PickRequest{Model: model, Deadline: time.Now().Add(time.Second)})
		if err != nil {
			panic(err)
		}
		fmt.Println(d.Policy, d.Replica, d.URL)
		d.Lease.FirstByte() // the response head arrived
		f.Done(d, fleet.OutcomeOK)
	}
	// Output:
	// round_robin r0 http://127.0.0.1:8001
	// round_robin r1 http://127.0.0.1:8002
	// round_robin r0 http://127.0.0.1:8001
}

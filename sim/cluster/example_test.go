package cluster_test

import (
	"fmt"
	"time"

	"github.com/inferrail/inferrail/sim"
	"github.com/inferrail/inferrail/sim/cluster"
	"github.com/inferrail/inferrail/sim/workload"
)

// Four default engines behind cost_model take a minute of W1 at 10 req/s;
// the first 15 s fill the caches and are left out of the summary.
func ExampleRun() {
	w1 := workload.W1()
	res, err := cluster.Run(cluster.Config{
		Replicas: 4,
		Engine:   sim.DefaultOptions().Engine,
		Policy:   "cost_model",
		Workload: &w1,
		Rate:     10,
		Duration: time.Minute,
		WarmUp:   15 * time.Second,
		Seed:     1,
	})
	if err != nil {
		panic(err)
	}
	s := res.Summary
	fmt.Printf("%d requests, %d after the warm-up\n", len(res.Requests), s.Requests)
	fmt.Printf("hit rate %.2f of an oracle's %.2f, predictions exact %.2f\n", s.HitRate, s.OracleHitRate, s.Accuracy)
	fmt.Println("p99 TTFT under 250ms:", s.P99TTFT < 250*time.Millisecond)
	// Output:
	// 667 requests, 522 after the warm-up
	// hit rate 0.96 of an oracle's 0.96, predictions exact 1.00
	// p99 TTFT under 250ms: true
}

package engine_test

import (
	"fmt"
	"time"

	"github.com/inferrail/inferrail/model/prefix"
	"github.com/inferrail/inferrail/sim/engine"
)

// A driver adds requests and steps the engine in virtual time until it is
// idle. The 100-token prompt prefills in two chunks of the 64-token budget.
func Example() {
	e, err := engine.New(engine.Config{
		BlockSize:        16,
		NumBlocks:        64,
		MaxNumSeqs:       4,
		MaxBatchedTokens: 64,
		MaxModelLen:      256,
		PrefixCaching:    true,
		Latency: engine.Latency{
			PrefillToken: 100 * time.Microsecond,
			PrefillFixed: 5 * time.Millisecond,
			DecodeToken:  20 * time.Millisecond,
			DecodeSeq:    100 * time.Microsecond,
		},
	})
	if err != nil {
		panic(err)
	}
	r := &engine.Request{
		ID:     "a",
		Root:   prefix.Root("model", "", ""),
		Prompt: make([]uint32, 100),
		Output: []uint32{7, 8, 9},
		Reason: "stop",
	}
	if err := e.Add(r); err != nil {
		panic(err)
	}
	var now time.Duration
	for !e.Idle() {
		res := e.Step(now)
		now += res.Duration
		fmt.Printf("step at %v: %d tokens, %d events\n", res.Start, res.ScheduledTokens, len(res.Events))
		for _, o := range res.Outputs {
			if o.Done {
				fmt.Printf("  %s +%d done (%s)\n", o.Req.ID, o.NewTokens, o.Reason)
			} else {
				fmt.Printf("  %s +%d\n", o.Req.ID, o.NewTokens)
			}
		}
	}
	fmt.Println("TTFT", r.FirstToken-r.Arrival, "finished", r.Finished)
	// Output:
	// step at 0s: 64 tokens, 1 events
	// step at 11.4ms: 36 tokens, 1 events
	//   a +1
	// step at 15ms: 1 tokens, 0 events
	//   a +1
	// step at 35ms: 1 tokens, 0 events
	//   a +1 done (stop)
	// TTFT 15ms finished 55ms
}

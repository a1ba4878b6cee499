package main

import (
	"context"
	"testing"
	"time"

	"github.com/inferrail/inferrail/sim"
)

// TestClientAgainstSim runs every kind of request the benchmarks send
// against an in-process simulator and expects each to check out.
func TestClientAgainstSim(t *testing.T) {
	opts := sim.DefaultOptions()
	opts.Port = 0
	opts.Engine.Latency.Zero = true
	s, err := sim.Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c := newLoadClient(s.URL(), opts.Model, 4)
	defer c.close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range 16 {
		r := soakSpec("test", i)
		o := c.do(ctx, r)
		if o.Err != nil {
			t.Fatalf("%+v: %v", r, o.Err)
		}
		if o.Tokens != r.MaxTokens || (r.Stream && o.TTFT <= 0) || o.Latency < o.TTFT {
			t.Fatalf("%+v: outcome %+v", r, o)
		}
	}
	if v, err := c.metric(ctx, "vllm:generation_tokens_total"); err != nil || v <= 0 {
		t.Fatalf("vllm:generation_tokens_total = %v, %v", v, err)
	}
}

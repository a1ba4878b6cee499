package engine

import (
	"fmt"
	"testing"
	"time"
)

// Sink keeps benchmark results alive.
var Sink StepResult

// decodeEngine returns an engine with n sequences that are all decoding and
// have room to decode for tens of thousands of steps.
func decodeEngine(b *testing.B, n int, caching bool) (*Engine, time.Duration) {
	b.Helper()
	cfg := testConfig()
	cfg.MaxNumSeqs = n
	cfg.NumBlocks = n * cfg.MaxModelLen / cfg.BlockSize
	cfg.PrefixCaching = caching
	e := mustNew(b, cfg)
	for i := range n {
		r := &Request{
			ID:     fmt.Sprint(i),
			Root:   testRoot,
			Prompt: tokens(i*1000, 128),
			Output: tokens(5_000_000, cfg.MaxModelLen-128),
			Reason: "length",
		}
		if err := e.Add(r); err != nil {
			b.Fatal(err)
		}
	}
	now := time.Duration(0)
	for len(e.running) < n || e.running[n-1].r.Generated == 0 {
		now += e.Step(now).Duration
	}
	return e, now
}

// BenchmarkStepDecode256 measures Step with 256 running sequences that each
// decode one token per step: the steady state of a busy engine. With prefix
// caching a block fills every 16 steps per sequence, hashing it and queueing
// a BlockStored.
func BenchmarkStepDecode256(b *testing.B) {
	for _, caching := range []bool{true, false} {
		b.Run(fmt.Sprintf("caching=%v", caching), func(b *testing.B) {
			e, now := decodeEngine(b, 256, caching)
			limit := e.cfg.MaxModelLen - 200
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if e.running[0].r.Generated >= limit {
					b.StopTimer()
					e, now = decodeEngine(b, 256, caching)
					b.StartTimer()
				}
				res := e.Step(now)
				if res.ScheduledTokens != 256 {
					b.Fatalf("scheduled %d tokens, want 256 decodes", res.ScheduledTokens)
				}
				now += res.Duration
				Sink = res
			}
		})
	}
}

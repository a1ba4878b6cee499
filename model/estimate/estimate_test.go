package estimate

import (
	"testing"
	"time"

	"github.com/inferrail/inferrail/model/prefix"
)

func chain(model string, ids []uint32) []prefix.Hash {
	var h prefix.Hasher
	return h.Chain(nil, prefix.Root(model, "", ""), ids, 16)
}

func TestAssignThenEstimate(t *testing.T) {
	now := time.Unix(100, 0)
	r := New(1024)
	ids := make([]uint32, 100) // 6 full blocks
	for i := range ids {
		ids[i] = uint32(i)
	}
	q := &Query{Blocks: chain("m", ids), PromptTokens: len(ids), BlockSize: 16}
	if got := r.Estimate(q, now); got.CachedTokens != 0 || got.QueuedPrefill != 0 {
		t.Fatalf("cold replica: %+v", got)
	}
	rc := r.Assign(q.Blocks, 40*time.Millisecond, now)
	got := r.Estimate(q, now.Add(10*time.Millisecond))
	if got.CachedTokens != 96 || got.QueuedPrefill != 30*time.Millisecond || got.Waiting != 1 {
		t.Fatalf("after assign: %+v, want 96 cached, 30ms queued, 1 waiting", got)
	}
	r.Failed(rc, false, now.Add(20*time.Millisecond))
	if got := r.Estimate(q, now.Add(20*time.Millisecond)); got.CachedTokens != 0 || got.Waiting != 0 || got.QueuedPrefill != 0 {
		t.Fatalf("after a failed attempt: %+v, want all taken back", got)
	}
}

func TestFirstByteDrainsAndCancelKeepsBlocks(t *testing.T) {
	now := time.Unix(100, 0)
	r := New(1024)
	ids := make([]uint32, 64) // 4 blocks, fully cached predicts 3
	q := &Query{Blocks: chain("m", ids), PromptTokens: len(ids), BlockSize: 16}
	r.Assign(q.Blocks, time.Second, now)
	r.Assign(q.Blocks, time.Second, now)
	r.FirstByte(now)
	r.Cancelled(false, now)
	got := r.Estimate(q, now)
	if got.CachedTokens != 48 || got.QueuedPrefill != 0 || got.Waiting != 0 {
		t.Fatalf("%+v: want 48 cached (one block short), empty queue", got)
	}
	r.Restarted()
	if got := r.Estimate(q, now); got.CachedTokens != 0 {
		t.Fatalf("after restart: %+v", got)
	}
}

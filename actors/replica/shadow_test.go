package replica

import (
	"testing"
	"time"

	"github.com/inferrail/inferrail/model/prefix"
)

// The replica publishes the tokens to compute of its attempts that await
// their first byte: an attempt counts from its assignment until its first
// byte or its end, whichever comes first, once; an attempt priced by the
// replica (a cache-blind arm's) counts what its own prediction leaves to
// compute.
func TestPendingTokens(t *testing.T) {
	h := newHarness(t)
	hd := NewHandle("r0", "http://10.0.0.1:8000", []string{"m"}, NewCounters(0, 0))
	hd.SetLabels(map[string]string{"llm-d.ai/role": "decode"})
	pid := h.spawn(hd, Config{Health: testHealth()})
	pending := func(want int) {
		t.Helper()
		h.sync(t, pid)
		if got := hd.Shadow().PendingTokens(); got != want {
			t.Fatalf("pending tokens %d, want %d", got, want)
		}
	}
	var ph prefix.Hasher
	blocks := ph.Chain(nil, prefix.Root("m", "", ""), make([]uint32, 80), 16) // five blocks
	a := &Attempt{Blocks: blocks[:4], Seq: hd.Shadow().Next(), Tokens: 1000}
	b := &Attempt{Blocks: blocks[:2], Seq: hd.Shadow().Next(), Tokens: 300}
	h.send(pid, &Assign{Attempt: a})
	h.send(pid, &Assign{Attempt: b})
	pending(1300)
	h.send(pid, &FirstByte{Attempt: a})
	h.send(pid, &RequestDone{Outcome: OutcomeOK, Attempt: a}) // after its first byte: counted off once
	pending(300)
	h.send(pid, &RequestDone{Outcome: OutcomeFailed, Attempt: b})
	h.send(pid, &FirstByte{Attempt: b}) // after its end: nothing
	pending(0)

	// The index holds a's four blocks now (b's were taken back): a prompt
	// of 80 tokens over all five computes 80 - 4*16.
	c := &Attempt{Blocks: blocks[:5], Seq: hd.Shadow().Next(), PromptTokens: 80, BlockSize: 16,
		Price: func(cached int) time.Duration { return time.Duration(80-cached) * time.Millisecond }}
	h.send(pid, &Assign{Attempt: c})
	pending(80 - 4*16)
	h.send(pid, &RequestDone{Outcome: OutcomeCancelled, Attempt: c})
	pending(0)
	if s := hd.Snapshot(); s.Labels["llm-d.ai/role"] != "decode" {
		t.Fatalf("the published snapshot lost the labels: %v", s.Labels)
	}
}

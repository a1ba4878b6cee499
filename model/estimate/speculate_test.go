package estimate

import (
	"testing"
	"time"

	"github.com/inferrail/inferrail/model/kvevent"
	"github.com/inferrail/inferrail/model/kvindex"
	"github.com/inferrail/inferrail/model/prefix"
)

var t0 = time.Unix(1_800_000_000, 0)

const ttl = 2 * time.Second

// route records a decision as the replica actor does in exact mode: the
// chain goes into the index and is marked speculative.
func route(x *kvindex.Index, ev *Events, chain []prefix.Hash, at time.Time) {
	x.Record(chain)
	ev.Speculate(chain, at, ttl)
}

// The engine's event confirms a speculative entry: it stays past the TTL,
// while the blocks the engine never stored go once it has run out, and not
// before.
func TestSpeculationConfirmed(t *testing.T) {
	x, ev := kvindex.New(100), NewEvents("m", EventChecks{})
	toks, chain := prompt("m", 1, 6)
	route(x, ev, chain, t0)
	if got := x.Lookup(chain); got != 6 || ev.Speculative() != 6 {
		t.Fatalf("after the decision: %d held, %d speculative; want 6 and 6", got, ev.Speculative())
	}
	// The engine stores the first four (the rest, say, it never got to).
	ev.Apply(batch(stored(toks, chain, 0, 4)), x)
	if ev.Speculative() != 2 {
		t.Fatalf("%d speculative after the event, want the 2 it did not confirm", ev.Speculative())
	}
	if n := ev.Expire(t0.Add(ttl-time.Millisecond), x); n != 0 || x.Lookup(chain) != 6 {
		t.Fatalf("before the TTL: %d expired, %d held", n, x.Lookup(chain))
	}
	if n := ev.Expire(t0.Add(ttl), x); n != 2 || x.Lookup(chain) != 4 {
		t.Fatalf("at the TTL: %d expired, %d held; want 2 and the 4 confirmed", n, x.Lookup(chain))
	}
	if ev.Speculative() != 0 {
		t.Fatalf("%d still speculative", ev.Speculative())
	}
	// Confirmed blocks are the engine's: routing there again marks none.
	route(x, ev, chain[:4], t0.Add(3*time.Second))
	if ev.Speculative() != 0 {
		t.Fatalf("%d blocks the engine holds were marked speculative", ev.Speculative())
	}
}

// Without an event the whole decision goes at its TTL; a second decision
// for the prefix moves its deadline.
func TestSpeculationExpires(t *testing.T) {
	x, ev := kvindex.New(100), NewEvents("m", EventChecks{})
	_, chain := prompt("m", 1, 3)
	route(x, ev, chain, t0)
	route(x, ev, chain[:2], t0.Add(time.Second)) // the next request for its prefix
	if n := ev.Expire(t0.Add(ttl), x); n != 1 || x.Lookup(chain) != 2 {
		t.Fatalf("at the first TTL: %d expired, %d held; want the last block gone", n, x.Lookup(chain))
	}
	if n := ev.Expire(t0.Add(time.Second+ttl), x); n != 2 || x.Len() != 0 {
		t.Fatalf("at the second TTL: %d expired, %d left", n, x.Len())
	}
}

// Two decisions that share a prefix expire child first: the index stays
// closed under prefixes at every step.
func TestSpeculationKeepsPrefixes(t *testing.T) {
	x, ev := kvindex.New(100), NewEvents("m", EventChecks{})
	var h prefix.Hasher
	root := prefix.Root("m", "", "")
	a := h.Chain(nil, root, []uint32{1, 1, 1, 1, 2, 2, 2, 2}, evBS)
	b := h.Chain(nil, root, []uint32{1, 1, 1, 1, 3, 3, 3, 3}, evBS)
	route(x, ev, a, t0)
	route(x, ev, b, t0.Add(time.Second))
	ev.Expire(t0.Add(ttl), x)
	if x.Lookup(a) != 1 || x.Lookup(b) != 2 {
		t.Fatalf("after a's TTL: a %d, b %d; want a's own block gone, b whole", x.Lookup(a), x.Lookup(b))
	}
	ev.Expire(t0.Add(time.Second+ttl), x)
	if x.Len() != 0 {
		t.Fatalf("%d blocks left", x.Len())
	}
}

// Settle makes speculation permanent (the replica stopped trusting its
// events); SpeculateIndex marks what decisions left in the index, once the
// events are followed again, except what the engine holds.
func TestSettleAndSpeculateIndex(t *testing.T) {
	x, ev := kvindex.New(100), NewEvents("m", EventChecks{})
	toks, chain := prompt("m", 1, 5)
	route(x, ev, chain, t0)
	ev.Settle()
	if n := ev.Expire(t0.Add(time.Hour), x); n != 0 || x.Lookup(chain) != 5 {
		t.Fatalf("after Settle: %d expired, %d held", n, x.Lookup(chain))
	}
	ev.Apply(batch(stored(toks, chain, 0, 3)), x)
	at := t0.Add(2 * time.Hour)
	ev.SpeculateIndex(x, at, ttl)
	if ev.Speculative() != 2 {
		t.Fatalf("%d speculative, want the 2 the engine does not hold", ev.Speculative())
	}
	if n := ev.Expire(at.Add(ttl), x); n != 2 || x.Lookup(chain) != 3 {
		t.Fatalf("%d expired, %d held; want 2 and 3", n, x.Lookup(chain))
	}
}

// A decision rate far past what the engine confirms cannot grow what is
// pending past 8 times the index's capacity (plus 4096).
func TestSpeculationBounded(t *testing.T) {
	x, ev := kvindex.New(8), NewEvents("m", EventChecks{})
	limit := 8*x.Capacity() + 4096
	for i := range limit + 500 {
		_, chain := prompt("m", uint32(i*4+1), 1)
		route(x, ev, chain, t0)
		ev.Expire(t0, x)
	}
	if n := len(ev.spec.queue) - ev.spec.head; n > limit || ev.Speculative() > limit {
		t.Fatalf("%d queued, %d speculative, want at most %d", n, ev.Speculative(), limit)
	}
}

// Each data parallel rank has a cache of its own: the same prefix stored by
// two ranks stays while either holds it, and one rank's reset leaves the
// other's blocks.
func TestEventsDPRanks(t *testing.T) {
	x, ev := kvindex.New(100), NewEvents("m", EventChecks{})
	toks, chain := prompt("m", 1, 3)
	at := func(rank int, evs ...kvevent.Event) *kvevent.Batch {
		return &kvevent.Batch{DPRank: &rank, Events: evs}
	}
	ev.Apply(at(0, stored(toks, chain, 0, 3)), x)
	ev.Apply(at(1, stored(toks, chain, 0, 3)), x)
	if ev.Len() != 6 {
		t.Fatalf("mapping holds %d blocks, want 3 per rank", ev.Len())
	}
	ev.Apply(at(0, removed(chain[2])), x)
	if got := x.Lookup(chain); got != 3 {
		t.Fatalf("rank 0 evicted the last block, which rank 1 holds: %d held, want 3", got)
	}
	ev.Apply(at(1, removed(chain[2])), x)
	if got := x.Lookup(chain); got != 2 {
		t.Fatalf("both ranks evicted it: %d held, want 2", got)
	}
	// A rank's store is chained to its own blocks: rank 2 never stored the
	// parent, so its block cannot be placed.
	ev.Apply(at(2, stored(toks, chain, 2, 3)), x)
	if got := x.Lookup(chain); got != 2 || ev.Stats().Unmapped != 1 {
		t.Fatalf("rank 2's orphan: %d held, %d unmapped", got, ev.Stats().Unmapped)
	}
	ev.Apply(at(1, &kvevent.AllBlocksCleared{}), x)
	if got := x.Lookup(chain); got != 2 {
		t.Fatalf("after rank 1's reset: %d held, want rank 0's 2", got)
	}
	ev.Apply(at(0, &kvevent.AllBlocksCleared{}), x)
	ev.Apply(at(2, &kvevent.AllBlocksCleared{}), x)
	if x.Len() != 0 || ev.Len() != 0 {
		t.Fatalf("after every rank's reset: index %d, mapping %d", x.Len(), ev.Len())
	}
}

// BenchmarkSpeculate is the exact mode's cost per decision at its worst: a
// 64-block prompt that no event ever confirms routed (recorded and marked
// speculative) and the expiry check each estimate makes, in steady state,
// every prompt expiring (and so inserted again) before it comes back;
// "record" is the index's Record alone of prompts it still holds, for
// scale. Blocks the events hold are not marked, so a prompt whose prefix the
// engine caches costs only its new blocks.
func BenchmarkSpeculate(b *testing.B) {
	for _, spec := range []bool{false, true} {
		name := map[bool]string{false: "record", true: "speculate"}[spec]
		b.Run(name, func(b *testing.B) {
			x, ev := kvindex.New(1<<16), NewEvents("m", EventChecks{})
			chains := make([][]prefix.Hash, 256)
			for i := range chains {
				_, chains[i] = prompt("m", uint32(i*1000), 64)
			}
			now := t0
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				now = now.Add(10 * time.Millisecond) // 100 decisions a second: 200 pending
				if spec {
					route(x, ev, chains[i%len(chains)], now)
					Sink = ev.Expire(now, x)
				} else {
					x.Record(chains[i%len(chains)])
				}
				i++
			}
		})
	}
}

// Sink keeps benchmark results alive.
var Sink any

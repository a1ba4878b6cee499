package estimate

import (
	"testing"

	"github.com/inferrail/inferrail/model/kvevent"
	"github.com/inferrail/inferrail/model/kvindex"
	"github.com/inferrail/inferrail/model/prefix"
)

const evBS = 4 // block size of the event tests

// engineHash stands for an engine's own hash of a block: unrelated to the
// gateway's, as vLLM's SHA-256 chain is.
func engineHash(h prefix.Hash) uint64 { return h.Hi ^ 0x5bd1e995 }

// prompt returns n blocks' worth of tokens starting at first, and the
// gateway's chain for them under model m.
func prompt(m string, first uint32, n int) ([]uint32, []prefix.Hash) {
	toks := make([]uint32, n*evBS)
	for i := range toks {
		toks[i] = first + uint32(i)
	}
	var h prefix.Hasher
	return toks, h.Chain(nil, prefix.Root(m, "", ""), toks, evBS)
}

// stored is the event an engine publishes for blocks [from, to) of chain.
func stored(toks []uint32, chain []prefix.Hash, from, to int) *kvevent.BlockStored {
	e := &kvevent.BlockStored{TokenIDs: toks[from*evBS : to*evBS], BlockSize: evBS, Medium: "GPU"}
	for _, h := range chain[from:to] {
		e.BlockHashes = append(e.BlockHashes, engineHash(h))
	}
	if from > 0 {
		p := engineHash(chain[from-1])
		e.ParentBlockHash = &p
	}
	return e
}

func removed(chain ...prefix.Hash) *kvevent.BlockRemoved {
	e := &kvevent.BlockRemoved{Medium: "GPU"}
	for _, h := range chain {
		e.BlockHashes = append(e.BlockHashes, engineHash(h))
	}
	return e
}

func batch(evs ...kvevent.Event) *kvevent.Batch { return &kvevent.Batch{Events: evs} }

func TestEventsStoreAndEvict(t *testing.T) {
	x, ev := kvindex.New(100), NewEvents("m", EventChecks{})
	toks, chain := prompt("m", 1, 6)
	// The engine stores the prompt in two steps (chunked prefill).
	ev.Apply(batch(stored(toks, chain, 0, 4)), x)
	if got := x.Lookup(chain); got != 4 {
		t.Fatalf("after the first chunk: %d blocks held, want 4", got)
	}
	ev.Apply(batch(stored(toks, chain, 4, 6)), x)
	if got := x.Lookup(chain); got != 6 {
		t.Fatalf("after the second chunk: %d blocks held, want 6", got)
	}
	// A chain under another model shares no block.
	_, other := prompt("n", 1, 6)
	if got := x.Lookup(other); got != 0 {
		t.Fatalf("model n's chain: %d blocks held, want 0", got)
	}
	// Evicted last first, as engines do.
	ev.Apply(batch(removed(chain[5], chain[4])), x)
	if got := x.Lookup(chain); got != 4 {
		t.Fatalf("after evicting two: %d blocks held, want 4", got)
	}
	if s := ev.Stats(); s.Batches != 3 || s.Stored != 6 || s.Removed != 2 || s.Unmapped != 0 || s.Unknown != 0 {
		t.Fatalf("stats %+v", s)
	}
	ev.Apply(batch(&kvevent.AllBlocksCleared{}), x)
	if x.Len() != 0 || ev.Len() != 0 {
		t.Fatalf("after a clear: index %d, mapping %d, want both empty", x.Len(), ev.Len())
	}
}

// A block the engine holds twice (two requests computed it at once) stays
// until both copies are evicted.
func TestEventsCountCopies(t *testing.T) {
	x, ev := kvindex.New(100), NewEvents("m", EventChecks{})
	toks, chain := prompt("m", 1, 2)
	ev.Apply(batch(stored(toks, chain, 0, 2), stored(toks, chain, 0, 2)), x)
	ev.Apply(batch(removed(chain[1])), x)
	if got := x.Lookup(chain); got != 2 {
		t.Fatalf("one copy of two evicted: %d blocks held, want 2", got)
	}
	ev.Apply(batch(removed(chain[1])), x)
	if got := x.Lookup(chain); got != 1 {
		t.Fatalf("both copies evicted: %d blocks held, want 1", got)
	}
}

// Blocks that cannot be rebuilt: a parent the gateway never saw stored, a
// cache_salt among the extra keys, a token count that does not divide.
// None is recorded, and neither are their descendants.
func TestEventsUnmapped(t *testing.T) {
	x, ev := kvindex.New(100), NewEvents("m", EventChecks{})
	toks, chain := prompt("m", 1, 4)
	ev.Apply(batch(stored(toks, chain, 2, 4)), x) // parent block 1 never stored
	if x.Len() != 0 {
		t.Fatalf("orphan run recorded: %d blocks", x.Len())
	}
	ev.Apply(batch(removed(chain[3], chain[2])), x) // its eviction is recognised
	if s := ev.Stats(); s.Unmapped != 2 || s.Unknown != 0 || ev.Len() != 0 {
		t.Fatalf("orphan run: stats %+v, mapping %d", s, ev.Len())
	}

	salted := stored(toks, chain, 0, 2)
	// extra_keys = [None, ["tenant-a"]]: block 1 was hashed with a salt.
	salted.ExtraKeys = kvevent.Raw{0x92, 0xc0, 0x91, 0xa8, 't', 'e', 'n', 'a', 'n', 't', '-', 'a'}
	ev.Apply(batch(salted, stored(toks, chain, 2, 3)), x)
	if got := x.Lookup(chain); got != 1 {
		t.Fatalf("a salted block and its child: %d blocks held, want only the plain first", got)
	}

	bad := stored(toks, chain, 0, 2)
	bad.TokenIDs = bad.TokenIDs[:5]
	y, ev2 := kvindex.New(100), NewEvents("m", EventChecks{})
	ev2.Apply(batch(bad), y)
	if y.Len() != 0 || ev2.Stats().Unmapped != 2 {
		t.Fatalf("short token ids: %d recorded, stats %+v", y.Len(), ev2.Stats())
	}
}

// TestEventsZeroParent: a publisher that writes parent_block_hash 0 for a
// chain's first block, as llm-d's inference simulator does (issue 12), has
// its chains placed as with None, in both encodings and through the real
// decoder.
func TestEventsZeroParent(t *testing.T) {
	for _, enc := range []kvevent.Encoding{kvevent.EncodingArray, kvevent.EncodingMap} {
		x, ev := kvindex.New(100), NewEvents("m", EventChecks{BlockSize: evBS, VocabSize: 1000})
		toks, chain := prompt("m", 1, 4)
		first := stored(toks, chain, 0, 2)
		zero := uint64(0)
		first.ParentBlockHash = &zero
		for _, b := range []*kvevent.Batch{batch(first), batch(stored(toks, chain, 2, 4))} {
			got, err := kvevent.DecodeBatch(kvevent.AppendBatch(nil, b, enc))
			if err != nil {
				t.Fatal(err)
			}
			ev.Apply(got, x)
		}
		if got := x.Lookup(chain); got != 4 {
			t.Fatalf("encoding %d: %d blocks held, want 4", enc, got)
		}
		if s := ev.Stats(); s.Blocks != 4 || s.Stored != 4 || s.Unmapped != 0 {
			t.Fatalf("encoding %d: stats %+v", enc, s)
		}
	}
}

// TestEventsUnsetBlockSize: a block_size of 0 takes the tokens shared out
// among the blocks.
func TestEventsUnsetBlockSize(t *testing.T) {
	x, ev := kvindex.New(100), NewEvents("m", EventChecks{BlockSize: evBS})
	toks, chain := prompt("m", 1, 3)
	e := stored(toks, chain, 0, 3)
	e.BlockSize = 0
	ev.Apply(batch(e), x)
	if got := x.Lookup(chain); got != 3 {
		t.Fatalf("%d blocks held, want 3 (stats %+v)", got, ev.Stats())
	}
}

// TestEventsChecks: blocks of another size than the gateway's, and blocks
// with token ids outside the tokenizer's vocabulary, are not placed and are
// counted by cause; the others of the run still are.
func TestEventsChecks(t *testing.T) {
	// The engine cuts blocks of 2*evBS tokens.
	x, ev := kvindex.New(100), NewEvents("m", EventChecks{BlockSize: evBS, VocabSize: 1000})
	toks, chain := prompt("m", 1, 4)
	big := &kvevent.BlockStored{BlockHashes: []uint64{1, 2}, TokenIDs: toks, BlockSize: 2 * evBS, Medium: "GPU"}
	ev.Apply(batch(big), x)
	if s := ev.Stats(); x.Len() != 0 || s.Blocks != 2 || s.Unmapped != 2 || s.OtherSize != 2 ||
		s.OtherBlockSize != 2*evBS || s.Foreign != 0 {
		t.Fatalf("blocks of another size: %d recorded, stats %+v", x.Len(), s)
	}
	// The third block holds an id past the vocabulary: it and its child
	// cannot be placed; the first two are.
	ftoks := append([]uint32(nil), toks...)
	ftoks[2*evBS+1] = 1000
	fe := stored(ftoks, chain, 0, 4)
	ev.Apply(batch(fe), x)
	if got := x.Lookup(chain); got != 2 {
		t.Fatalf("a foreign block: %d of the chain held, want 2", got)
	}
	if s := ev.Stats(); s.Blocks != 6 || s.Unmapped != 4 || s.OtherSize != 2 || s.Foreign != 1 || s.ForeignID != 1000 {
		t.Fatalf("a foreign block: stats %+v", s)
	}
	// Unchecked, the same events place what they can.
	y, ev2 := kvindex.New(100), NewEvents("m", EventChecks{})
	ev2.Apply(batch(stored(ftoks, chain, 0, 4)), y)
	if y.Len() != 4 || ev2.Stats().Foreign != 0 {
		t.Fatalf("unchecked: %d recorded, stats %+v", y.Len(), ev2.Stats())
	}
}

// Only the engine's own GPU blocks of its first KV cache group count.
func TestEventsOtherTiers(t *testing.T) {
	x, ev := kvindex.New(100), NewEvents("m", EventChecks{})
	toks, chain := prompt("m", 1, 2)
	cpu := stored(toks, chain, 0, 2)
	cpu.Medium = "CPU"
	one := 1
	swa := stored(toks, chain, 0, 2)
	swa.GroupIdx = &one
	ev.Apply(batch(cpu, swa), x)
	if x.Len() != 0 || ev.Stats().Skipped != 4 {
		t.Fatalf("other tiers: %d recorded, stats %+v", x.Len(), ev.Stats())
	}
	ev.Apply(batch(stored(toks, chain, 0, 2)), x)
	gone := removed(chain[1])
	gone.Medium = "CPU"
	ev.Apply(batch(gone), x)
	if got := x.Lookup(chain); got != 2 {
		t.Fatalf("a CPU eviction removed a GPU block: %d held, want 2", got)
	}
}

// Decisions and events meet in one index: a routed prompt is recorded at
// once, and its blocks then stay until the engine evicts them, even when
// the attempt that routed them is taken back after the engine stored them.
func TestEventsConfirmDecisions(t *testing.T) {
	r, ev := New(100), NewEvents("m", EventChecks{})
	toks, chain := prompt("m", 1, 3)
	rc := r.Index.Record(chain)
	ev.Apply(batch(stored(toks, chain, 0, 3)), r.Index)
	if n := r.Index.TakeBack(rc); n != 0 {
		t.Fatalf("take-back removed %d blocks the engine reported storing", n)
	}
	ev.Apply(batch(removed(chain[2])), r.Index)
	if got := r.Index.Lookup(chain); got != 2 {
		t.Fatalf("after the engine evicted the last: %d held, want 2", got)
	}
}

// FuzzEvents applies arbitrary event streams, as a broken or hostile engine
// might send them: parents that are themselves, cycles, hashes reused for
// other content, evictions of parents before children. Nothing may panic or
// loop, and the index stays within its capacity.
func FuzzEvents(f *testing.F) {
	f.Add([]byte{0, 1, 0, 2, 1, 3, 2, 0, 1})
	f.Add([]byte{0, 5, 5, 0, 5, 5, 1, 5, 3})
	f.Add([]byte{1, 0, 0, 1, 3, 0, 2, 3, 0}) // zero parents, a block whose hash is 0
	f.Add([]byte{1, 4, 16, 1, 6, 5, 1, 9, 15})
	f.Fuzz(func(t *testing.T, data []byte) {
		// Token ids run to 31: a vocabulary of 24 makes some foreign.
		x, ev := kvindex.New(8), NewEvents("m", EventChecks{BlockSize: 2, VocabSize: 24})
		for len(data) >= 3 {
			op, a, b := data[0]%4, uint64(data[1]%16), uint64(data[2]%16)
			bs := int(data[1] >> 6) // 0 (unset) to 3 tokens per block
			data = data[3:]
			switch op {
			case 0, 1: // a run of b%4+1 blocks from hash a, parent b (none when op is 0)
				n := int(b%4) + 1
				e := &kvevent.BlockStored{BlockSize: bs, TokenIDs: make([]uint32, max(bs, 2)*n)}
				for i := range n {
					e.BlockHashes = append(e.BlockHashes, (a+uint64(i))%16)
					e.TokenIDs[max(bs, 2)*i] = uint32(a + b)
				}
				if op == 1 {
					p := b
					e.ParentBlockHash = &p
				}
				ev.Apply(batch(e), x)
			case 2:
				ev.Apply(batch(&kvevent.BlockRemoved{BlockHashes: []uint64{a, b}}), x)
			case 3:
				if a == 0 {
					ev.Apply(batch(&kvevent.AllBlocksCleared{}), x)
				}
			}
			if x.Len() > x.Capacity() {
				t.Fatalf("index holds %d blocks over its capacity %d", x.Len(), x.Capacity())
			}
			if s := ev.Stats(); s.Unmapped > s.Blocks || s.OtherSize+s.Foreign > s.Unmapped {
				t.Fatalf("stats %+v: unmapped blocks outnumber those seen, or their causes them", s)
			}
		}
	})
}

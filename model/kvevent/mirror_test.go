package kvevent

import (
	"errors"
	"maps"
	"slices"
	"testing"

	"github.com/inferrail/inferrail/model/prefix"
)

func u64(v uint64) *uint64 { return &v }

func seq(from, n uint32) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = from + uint32(i)
	}
	return out
}

func TestMirrorApply(t *testing.T) {
	f := func(name string, medium string, batches [][]Event, want map[uint64]int, wantErr error) {
		t.Helper()
		m := NewMirror(medium)
		var errs []error
		for _, evs := range batches {
			if err := m.Apply(&Batch{Events: evs}); err != nil {
				errs = append(errs, err)
			}
		}
		err := errors.Join(errs...)
		if wantErr == nil && err != nil || wantErr != nil && !errors.Is(err, wantErr) {
			t.Fatalf("%s: err %v, want %v", name, err, wantErr)
		}
		if got := m.Counts(); !maps.Equal(got, want) {
			t.Fatalf("%s: counts %v, want %v", name, got, want)
		}
		total := 0
		for _, c := range want {
			total += c
		}
		if m.Total() != total || m.Len() != len(want) {
			t.Fatalf("%s: total %d len %d, want %d %d", name, m.Total(), m.Len(), total, len(want))
		}
	}
	run1 := &BlockStored{BlockHashes: []uint64{1, 2}, TokenIDs: seq(0, 8), BlockSize: 4, Medium: "GPU"}
	run2 := &BlockStored{BlockHashes: []uint64{3}, ParentBlockHash: u64(2), TokenIDs: seq(8, 4), BlockSize: 4, Medium: "GPU"}
	f("store", "GPU", [][]Event{{run1}, {run2}}, map[uint64]int{1: 1, 2: 1, 3: 1}, nil)
	f("store twice is a multiset", "GPU", [][]Event{{run1, run1}}, map[uint64]int{1: 2, 2: 2}, nil)
	f("remove one of two", "GPU", [][]Event{{run1, run1}, {&BlockRemoved{BlockHashes: []uint64{2}, Medium: "GPU"}}},
		map[uint64]int{1: 2, 2: 1}, nil)
	f("remove all", "GPU", [][]Event{{run1}, {&BlockRemoved{BlockHashes: []uint64{1}, Medium: "GPU"}, &BlockRemoved{BlockHashes: []uint64{2}, Medium: "GPU"}}},
		map[uint64]int{}, nil)
	f("clear", "GPU", [][]Event{{run1, run2, &AllBlocksCleared{}}}, map[uint64]int{}, nil)
	f("clear then store", "GPU", [][]Event{{run1, &AllBlocksCleared{}, run1}}, map[uint64]int{1: 1, 2: 1}, nil)
	cpu := &BlockStored{BlockHashes: []uint64{9}, TokenIDs: seq(0, 4), BlockSize: 4, Medium: "CPU"}
	f("other medium ignored", "GPU", [][]Event{{run1, cpu, &BlockRemoved{BlockHashes: []uint64{1}, Medium: "CPU"}}},
		map[uint64]int{1: 1, 2: 1}, nil)
	f("every medium", "", [][]Event{{run1, cpu}}, map[uint64]int{1: 1, 2: 1, 9: 1}, nil)
	noMedium := &BlockStored{BlockHashes: []uint64{5}, TokenIDs: seq(0, 4), BlockSize: 4}
	f("no medium always applies", "GPU", [][]Event{{noMedium}}, map[uint64]int{5: 1}, nil)

	f("unknown parent", "GPU", [][]Event{{run2}}, map[uint64]int{3: 1}, ErrUnknownParent)
	// llm-d's inference simulator writes 0 for "no parent" (issue 12).
	zero := &BlockStored{BlockHashes: []uint64{1, 2}, ParentBlockHash: u64(0), TokenIDs: seq(0, 8), BlockSize: 4, Medium: "GPU"}
	f("zero parent is none", "GPU", [][]Event{{zero}, {run2}}, map[uint64]int{1: 1, 2: 1, 3: 1}, nil)
	unsized := &BlockStored{BlockHashes: []uint64{1, 2}, TokenIDs: seq(0, 8), Medium: "GPU"}
	f("block size 0 shares the tokens out", "GPU", [][]Event{{unsized}, {run2}}, map[uint64]int{1: 1, 2: 1, 3: 1}, nil)
	f("unknown removal", "GPU", [][]Event{{&BlockRemoved{BlockHashes: []uint64{7}, Medium: "GPU"}}}, map[uint64]int{}, ErrUnknownBlock)
	short := &BlockStored{BlockHashes: []uint64{1, 2}, TokenIDs: seq(0, 7), BlockSize: 4, Medium: "GPU"}
	f("token count", "GPU", [][]Event{{short}}, map[uint64]int{1: 1, 2: 1}, ErrTokenCount)
	other := &BlockStored{BlockHashes: []uint64{1}, TokenIDs: seq(100, 4), BlockSize: 4, Medium: "GPU"}
	f("conflict", "GPU", [][]Event{{run1}, {other}}, map[uint64]int{1: 2, 2: 1}, ErrConflict)
	orphan := &BlockStored{BlockHashes: []uint64{2}, ParentBlockHash: u64(1), TokenIDs: seq(0, 4), BlockSize: 4, Medium: "GPU"}
	f("conflicting parent", "GPU", [][]Event{{run1}, {orphan}}, map[uint64]int{1: 1, 2: 2}, ErrConflict)
}

func TestMirrorBlocksAndChains(t *testing.T) {
	m := NewMirror("GPU")
	lora := "my-lora"
	err := m.Apply(&Batch{Events: []Event{
		&BlockStored{BlockHashes: []uint64{10, 11}, TokenIDs: seq(0, 4), BlockSize: 2, Medium: "GPU", LoraName: &lora,
			ExtraKeys: Raw{0x92, 0x91, 0xa1, 'a', 0xc0}}, // [["a"], nil]
		&BlockStored{BlockHashes: []uint64{12}, ParentBlockHash: u64(11), TokenIDs: seq(4, 2), BlockSize: 2, Medium: "GPU"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	b, ok := m.Block(11)
	if !ok || !b.HasParent || b.Parent != 10 || !slices.Equal(b.Tokens, []uint32{2, 3}) || b.LoraName == nil || b.ExtraKeys != nil {
		t.Fatalf("block 11 = %+v, %v", b, ok)
	}
	b, _ = m.Block(10)
	if b.HasParent || string(b.ExtraKeys) != string([]byte{0x91, 0xa1, 'a'}) {
		t.Fatalf("block 10 = %+v", b)
	}
	chain, ok := m.Chain(nil, 12)
	if !ok || !slices.Equal(chain, []uint64{10, 11, 12}) {
		t.Fatalf("chain %v %v", chain, ok)
	}
	toks, ok := m.Prefix(nil, 12)
	if !ok || !slices.Equal(toks, seq(0, 6)) {
		t.Fatalf("prefix %v %v", toks, ok)
	}
	// Evicting the middle block breaks the chain of its descendants.
	if err := m.Apply(&Batch{Events: []Event{&BlockRemoved{BlockHashes: []uint64{11}, Medium: "GPU"}}}); err != nil {
		t.Fatal(err)
	}
	if _, ok := m.Chain(nil, 12); ok {
		t.Fatal("chain through an evicted block")
	}
	if _, ok := m.Prefix(nil, 99); ok {
		t.Fatal("prefix of an unknown block")
	}
}

func TestMirrorChainCycle(t *testing.T) {
	// Hostile streams can make a cycle; Chain must stop.
	m := NewMirror("")
	_ = m.Apply(&Batch{Events: []Event{
		&BlockStored{BlockHashes: []uint64{1}, ParentBlockHash: u64(2), TokenIDs: seq(0, 1), BlockSize: 1},
		&BlockStored{BlockHashes: []uint64{2}, ParentBlockHash: u64(1), TokenIDs: seq(0, 1), BlockSize: 1},
	}})
	if _, ok := m.Chain(nil, 1); ok {
		t.Fatal("cycle reported as a chain")
	}
}

// TestMirrorRebuildsHashes stores a prompt's blocks the way an engine
// announces them (two runs, the second naming its parent) and checks that
// every block's hash can be recomputed from the tokens the mirror holds.
func TestMirrorRebuildsHashes(t *testing.T) {
	const bs = 16
	var h prefix.Hasher
	root := prefix.Root("model", "", "")
	tokens := seq(1000, 5*bs)
	hashes := h.Chain(nil, root, tokens, bs)
	ext := make([]uint64, len(hashes))
	for i, x := range hashes {
		ext[i] = x.External()
	}
	m := NewMirror("GPU")
	err := m.Apply(&Batch{Events: []Event{
		&BlockStored{BlockHashes: ext[:2], TokenIDs: tokens[:2*bs], BlockSize: bs, Medium: "GPU"},
		&BlockStored{BlockHashes: ext[2:], ParentBlockHash: &ext[1], TokenIDs: tokens[2*bs:], BlockSize: bs, Medium: "GPU"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range ext {
		toks, ok := m.Prefix(nil, want)
		if !ok {
			t.Fatalf("block %d: incomplete chain", i)
		}
		re := h.Chain(nil, root, toks, bs)
		if got := re[len(re)-1].External(); got != want || len(re) != i+1 {
			t.Fatalf("block %d: rebuilt %d over %d blocks, want %d", i, got, len(re), want)
		}
	}
}

// TestMirrorZeroParentChain: a chain whose first run names parent 0 is
// complete from its root, and its tokens can be read back.
func TestMirrorZeroParentChain(t *testing.T) {
	m := NewMirror("GPU")
	err := m.Apply(&Batch{Events: []Event{
		&BlockStored{BlockHashes: []uint64{7, 8}, ParentBlockHash: u64(0), TokenIDs: seq(0, 4), BlockSize: 2, Medium: "GPU"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if b, ok := m.Block(7); !ok || b.HasParent {
		t.Fatalf("first block %+v %v: want one without a parent", b, ok)
	}
	chain, ok := m.Chain(nil, 8)
	if !ok || !slices.Equal(chain, []uint64{7, 8}) {
		t.Fatalf("chain %v %v, want [7 8] true", chain, ok)
	}
	if toks, ok := m.Prefix(nil, 8); !ok || !slices.Equal(toks, seq(0, 4)) {
		t.Fatalf("prefix %v %v", toks, ok)
	}
}

func TestParent(t *testing.T) {
	f := func(p *uint64, want uint64, wantOK bool) {
		t.Helper()
		got, ok := (&BlockStored{ParentBlockHash: p}).Parent()
		if got != want || ok != wantOK {
			t.Fatalf("Parent of %v: %d %v, want %d %v", p, got, ok, want, wantOK)
		}
	}
	f(nil, 0, false)
	f(u64(0), 0, false)
	f(u64(1), 1, true)
	f(u64(1<<63), 1<<63, true)
}

func TestTokensPerBlock(t *testing.T) {
	f := func(blocks, tokens, blockSize, want int) {
		t.Helper()
		e := &BlockStored{BlockHashes: make([]uint64, blocks), TokenIDs: make([]uint32, tokens), BlockSize: blockSize}
		if got := e.TokensPerBlock(); got != want {
			t.Fatalf("%d blocks, %d tokens, block_size %d: %d, want %d", blocks, tokens, blockSize, got, want)
		}
	}
	f(2, 32, 16, 16)
	f(2, 31, 16, 0)
	f(2, 64, 16, 0) // tokens for 4 blocks
	f(2, 32, 0, 16) // unset: shared out
	f(3, 32, 0, 0)
	f(0, 0, 16, 0)
	f(2, 0, 16, 0)
	f(1, 4, -4, 0)
	f(4, 0, 1<<62, 0) // 4 * 2^62 wraps to 0: must not pass for 0 tokens
}

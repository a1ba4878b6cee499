package kvevent

import (
	"errors"
	"fmt"
	"maps"
	"slices"
)

// Inconsistencies Mirror.Apply reports. The batch is applied in full anyway;
// a consumer that sees one should distrust the mirror and rebuild it.
var (
	// ErrUnknownParent: a stored run's parent_block_hash is not in the mirror.
	// An engine holds the parent while it stores the run, so it must have been
	// stored before (unless the stream lost events, or a sliding-window group
	// skipped it).
	ErrUnknownParent = errors.New("kvevent: parent block not in mirror")
	// ErrUnknownBlock: a removed block is not in the mirror.
	ErrUnknownBlock = errors.New("kvevent: removed block not in mirror")
	// ErrTokenCount: len(token_ids) != len(block_hashes) * block_size (with
	// a block_size of 0, the token ids do not divide evenly among the
	// blocks), so the blocks' tokens cannot be told apart
	// (BlockStored.TokensPerBlock).
	ErrTokenCount = errors.New("kvevent: token count does not match blocks")
	// ErrConflict: a hash already in the mirror was stored again with another
	// parent or other tokens (a hash collision, or mixed-up streams).
	ErrConflict = errors.New("kvevent: block stored again with different content")
)

// Block is what the BlockStored event that first stored a hash said about it.
// Its slices are shared with that event and must not be modified.
type Block struct {
	Parent    uint64 // hash of the previous block in the chain, when HasParent
	HasParent bool   // false for a chain's first block
	// Tokens are the block's token ids; nil when the event's token count did
	// not match its blocks (ErrTokenCount).
	Tokens    []uint32
	LoraName  *string
	ExtraKeys Raw // this block's entry of extra_keys (msgpack); nil when None
}

// Mirror rebuilds an engine's prefix cache from its KV events: a multiset of
// block hashes (an engine may hold several physical blocks with one hash and
// reports each store and each eviction), plus, per hash, the parent and token
// ids its BlockStored carried, so a consumer can walk a chain back to its
// root and recompute every hash from tokens alone.
//
// A Mirror is not safe for concurrent use: one goroutine (the replica actor
// that consumes the stream) owns it. It starts no goroutines and does no I/O.
type Mirror struct {
	medium string
	counts map[uint64]int
	blocks map[uint64]Block
	total  int
}

// NewMirror returns an empty mirror of the blocks held in medium ("GPU" for
// the engine's own cache). Events for other media are ignored; events without
// a medium ("" — None, or an engine too old to send one) always apply. An
// empty medium mirrors every event.
func NewMirror(medium string) *Mirror {
	return &Mirror{medium: medium, counts: map[uint64]int{}, blocks: map[uint64]Block{}}
}

// Apply applies a batch's events in order. It returns nil, or the
// inconsistencies it met (joined; test them with errors.Is against
// ErrUnknownParent, ErrUnknownBlock, ErrTokenCount and ErrConflict).
func (m *Mirror) Apply(b *Batch) error {
	var errs []error
	for _, ev := range b.Events {
		switch e := ev.(type) {
		case *BlockStored:
			if m.wants(e.Medium) {
				errs = m.store(e, errs)
			}
		case *BlockRemoved:
			if !m.wants(e.Medium) {
				continue
			}
			for _, h := range e.BlockHashes {
				switch n := m.counts[h]; n {
				case 0:
					errs = append(errs, fmt.Errorf("block %d: %w", h, ErrUnknownBlock))
				case 1:
					delete(m.counts, h)
					delete(m.blocks, h)
					m.total--
				default:
					m.counts[h] = n - 1
					m.total--
				}
			}
		case *AllBlocksCleared:
			m.Reset()
		}
	}
	return errors.Join(errs...)
}

func (m *Mirror) wants(medium string) bool {
	return m.medium == "" || medium == "" || medium == m.medium
}

func (m *Mirror) store(e *BlockStored, errs []error) []error {
	n := len(e.BlockHashes)
	bs := e.TokensPerBlock()
	if bs == 0 && n > 0 {
		errs = append(errs, fmt.Errorf("block %d: %d tokens for %d blocks of %d: %w",
			e.BlockHashes[0], len(e.TokenIDs), n, e.BlockSize, ErrTokenCount))
	}
	parent, hasParent := e.Parent()
	if hasParent && m.counts[parent] == 0 {
		errs = append(errs, fmt.Errorf("block %d: parent %d: %w", firstOr(e.BlockHashes), parent, ErrUnknownParent))
	}
	extra := splitArray(e.ExtraKeys, n)
	for i, h := range e.BlockHashes {
		blk := Block{LoraName: e.LoraName}
		switch {
		case i > 0:
			blk.Parent, blk.HasParent = e.BlockHashes[i-1], true
		case hasParent:
			blk.Parent, blk.HasParent = parent, true
		}
		if bs > 0 {
			blk.Tokens = e.TokenIDs[i*bs : (i+1)*bs : (i+1)*bs]
		}
		if extra != nil {
			blk.ExtraKeys = extra[i]
		}
		if old, ok := m.blocks[h]; ok {
			if old.Parent != blk.Parent || old.HasParent != blk.HasParent ||
				old.Tokens != nil && blk.Tokens != nil && !slices.Equal(old.Tokens, blk.Tokens) {
				errs = append(errs, fmt.Errorf("block %d: %w", h, ErrConflict))
			}
		} else {
			m.blocks[h] = blk
		}
		m.counts[h]++
		m.total++
	}
	return errs
}

func firstOr(hs []uint64) uint64 {
	if len(hs) == 0 {
		return 0
	}
	return hs[0]
}

// splitArray returns the n elements of the msgpack array r (nil entries for
// msgpack nil), or nil when r is not an array of n elements.
func splitArray(r Raw, n int) []Raw {
	if r == nil {
		return nil
	}
	rd := &reader{b: r}
	if got, err := rd.arrayLen(); err != nil || got != n {
		return nil
	}
	out := make([]Raw, n)
	for i := range out {
		if rd.nilNext() {
			continue
		}
		start := rd.off
		if err := rd.skip(); err != nil {
			return nil
		}
		out[i] = r[start:rd.off:rd.off]
	}
	return out
}

// Reset empties the mirror, as AllBlocksCleared does; a consumer also calls it
// before rebuilding after a gap it could not replay.
func (m *Mirror) Reset() {
	clear(m.counts)
	clear(m.blocks)
	m.total = 0
}

// Count is how many blocks with hash h the engine holds.
func (m *Mirror) Count(h uint64) int { return m.counts[h] }

// Len is the number of distinct hashes held.
func (m *Mirror) Len() int { return len(m.counts) }

// Total is the number of blocks held, duplicates counted.
func (m *Mirror) Total() int { return m.total }

// Block returns what was stored under h.
func (m *Mirror) Block(h uint64) (Block, bool) {
	b, ok := m.blocks[h]
	return b, ok
}

// Counts returns a copy of the multiset: hash → number of blocks.
func (m *Mirror) Counts() map[uint64]int { return maps.Clone(m.counts) }

// Chain appends to dst the hashes from the root of h's chain down to h and
// reports whether the whole chain is in the mirror; if not, dst is returned
// unchanged. A consumer recomputes
// each block's hash from its parent's and its own Block.Tokens to check the
// chain against its own hashing (model/prefix).
func (m *Mirror) Chain(dst []uint64, h uint64) ([]uint64, bool) {
	start := len(dst)
	for steps := 0; ; steps++ {
		b, ok := m.blocks[h]
		if !ok || steps > len(m.blocks) { // missing, or a cycle
			return dst[:start], false
		}
		dst = append(dst, h)
		if !b.HasParent {
			break
		}
		h = b.Parent
	}
	slices.Reverse(dst[start:])
	return dst, true
}

// Prefix appends to dst every token of h's chain, root first, and reports
// whether the chain is complete and every block carried its tokens; if not,
// dst is returned unchanged.
func (m *Mirror) Prefix(dst []uint32, h uint64) ([]uint32, bool) {
	var buf [64]uint64
	chain, ok := m.Chain(buf[:0], h)
	if !ok {
		return dst, false
	}
	start := len(dst)
	for _, c := range chain {
		b := m.blocks[c]
		if b.Tokens == nil {
			return dst[:start], false
		}
		dst = append(dst, b.Tokens...)
	}
	return dst, true
}

// PlainBlocks reports which of e's blocks were hashed from their tokens and
// parent alone: true where extra_keys is absent or None for that block. A
// block with extra keys (a LoRA name, a cache_salt, multimodal inputs) was
// hashed from more than its event tells, so its hash cannot be rebuilt from
// the token ids; so was every block of a run with SGLang's cache_salt. A
// malformed extra_keys marks every block as not plain.
func (e *BlockStored) PlainBlocks() []bool {
	out := make([]bool, len(e.BlockHashes))
	if e.CacheSalt != nil {
		return out
	}
	if e.ExtraKeys == nil {
		for i := range out {
			out[i] = true
		}
		return out
	}
	if extra := splitArray(e.ExtraKeys, len(out)); extra != nil {
		for i, x := range extra {
			out[i] = x == nil
		}
	}
	return out
}

package estimate

import (
	"cmp"
	"slices"

	"github.com/inferrail/inferrail/model/prefix"
)

// EngineBlock is one engine block a replica's KV event mapping holds, as a
// peer instance's index snapshot carries it (model/dump), so that an
// instance warm-started from it recognises the engine's later events about
// blocks stored before it subscribed: their evictions, and the children
// whose parents they are.
type EngineBlock struct {
	// Rank is the data parallel rank whose cache holds it, Hash the
	// engine's hash of it.
	Rank int
	Hash uint64
	// Block is the gateway's hash it rebuilt to; zero when it could not be
	// rebuilt.
	Block prefix.Hash
	// Parent is the engine's hash of its parent, when HasParent.
	Parent    uint64
	HasParent bool
	// Copies is how many physical blocks of the engine hold it (at least 1).
	Copies int
}

// Export appends the mapping's engine blocks to dst, by rank and hash.
func (e *Events) Export(dst []EngineBlock) []EngineBlock {
	start := len(dst)
	for k, b := range e.blocks {
		dst = append(dst, EngineBlock{Rank: k.rank, Hash: k.h, Block: b.h, Parent: b.parent, HasParent: b.hasParent, Copies: b.n})
	}
	slices.SortFunc(dst[start:], func(a, b EngineBlock) int {
		if c := cmp.Compare(a.Rank, b.Rank); c != 0 {
			return c
		}
		return cmp.Compare(a.Hash, b.Hash)
	})
	return dst
}

// Import adds blocks, a peer's Export, to the mapping; a block the mapping
// holds already keeps its own record. Speculation is left alone.
func (e *Events) Import(blocks []EngineBlock) {
	for _, b := range blocks {
		k := blockKey{b.Rank, b.Hash}
		if _, ok := e.blocks[k]; ok {
			continue
		}
		e.blocks[k] = &eventBlock{h: b.Block, parent: b.Parent, hasParent: b.HasParent, n: max(b.Copies, 1)}
		e.hold(b.Block)
	}
}

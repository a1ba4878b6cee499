package estimate

import (
	"github.com/inferrail/inferrail/model/kvevent"
	"github.com/inferrail/inferrail/model/kvindex"
	"github.com/inferrail/inferrail/model/prefix"
)

// Events keeps a replica's shadow index in step with its engine's own KV
// events (index.kv_events): blocks the engine stored go into the index,
// including the ones it filled while generating, which routing decisions
// never show, and blocks it evicted leave it. Routing decisions are still
// recorded as they are made (Assign), because an engine announces a prompt's
// blocks only after computing them and a burst of requests for one prompt
// must see it placed at once; events then confirm, extend and correct them.
//
// Engines name blocks by their own hashes, which depend on their hashing
// algorithm and seed. Every stored event carries its blocks' token ids and
// the parent's hash, so Events rebuilds each block's hash with the gateway's
// own chain (prefix.Root and prefix.Hasher, salted by the replica's model)
// and keeps the engine's name for each, to apply evictions by. A block whose
// engine hash included more than its tokens (extra_keys: a cache_salt, a
// LoRA adapter's name, images) or whose parent is unknown, for instance
// stored before the gateway subscribed, cannot be rebuilt; nor can its
// descendants. Such blocks are counted and tracked only so that their
// evictions are recognised.
//
// Only the engine's GPU blocks of its first KV cache group count: events
// about CPU or disk tiers and other attention groups are skipped.
//
// Blocks that can never match a prompt the gateway hashes are not placed
// either, and are counted by cause (EventChecks): blocks of another size
// than the gateway cuts prompts into, and blocks with token ids outside the
// model tokenizer's vocabulary (the engine tokenizes differently).
//
// Events does no I/O and starts no goroutines; the replica actor that owns
// the index owns it.
type Events struct {
	model  string
	checks EventChecks
	roots  map[string]prefix.Hash // by LoRA name; "" for the base model
	blocks map[uint64]*eventBlock // by the engine's hash
	hasher prefix.Hasher
	chain  []prefix.Hash // scratch for Record
	stats  EventStats
}

// eventBlock is one engine block hash the engine holds.
type eventBlock struct {
	h         prefix.Hash // the gateway's hash; zero when it cannot be rebuilt
	parent    uint64      // the engine's hash of the parent, when hasParent
	hasParent bool
	n         int // physical blocks holding it (an engine may compute a block twice)
}

// EventChecks are what a replica's stored blocks are checked against. A
// zero field checks nothing.
type EventChecks struct {
	// BlockSize is the number of tokens per block the gateway cuts the
	// model's prompts into (models[].block_size).
	BlockSize int
	// VocabSize is the size of the model tokenizer's vocabulary: token ids
	// from it up cannot come from that tokenizer.
	VocabSize int
}

// EventStats count what Apply did, since New.
type EventStats struct {
	Batches uint64 // batches applied
	// Blocks counts the stored blocks of the engine's own cache (GPU, first
	// group), placed in the index or not.
	Blocks   uint64
	Stored   uint64 // stored blocks recorded in the index
	Removed  uint64 // evicted blocks removed from the index
	Cleared  uint64 // AllBlocksCleared events
	Unmapped uint64 // stored blocks that could not be placed, for any cause
	// OtherSize counts the unmapped blocks of another size than
	// EventChecks.BlockSize, and OtherBlockSize is the last such size.
	OtherSize      uint64
	OtherBlockSize int
	// Foreign counts the unmapped blocks (not of another size) holding a
	// token id outside the vocabulary, and ForeignID is the last such id.
	Foreign   uint64
	ForeignID uint32
	Unknown   uint64 // evictions of blocks never seen stored
	Skipped   uint64 // blocks of other media or KV cache groups
}

// NewEvents returns an empty mapping for a replica serving model (the name
// that salts the gateway's block hashes for its prompts), whose stored
// blocks are checked against c.
func NewEvents(model string, c EventChecks) *Events {
	return &Events{model: model, checks: c, roots: map[string]prefix.Hash{}, blocks: map[uint64]*eventBlock{}}
}

// Stats returns the counts so far.
func (e *Events) Stats() EventStats { return e.stats }

// Len is the number of distinct engine blocks the mapping holds.
func (e *Events) Len() int { return len(e.blocks) }

// Reset forgets the engine's blocks, for an engine that restarted. The
// caller clears the index too.
func (e *Events) Reset() { clear(e.blocks) }

// Apply applies one batch of the engine's events to x, in order.
func (e *Events) Apply(b *kvevent.Batch, x *kvindex.Index) {
	e.stats.Batches++
	for _, ev := range b.Events {
		switch ev := ev.(type) {
		case *kvevent.BlockStored:
			if !ours(ev.Medium, ev.GroupIdx) {
				e.stats.Skipped += uint64(len(ev.BlockHashes))
				continue
			}
			e.stored(ev, x)
		case *kvevent.BlockRemoved:
			if !ours(ev.Medium, ev.GroupIdx) {
				e.stats.Skipped += uint64(len(ev.BlockHashes))
				continue
			}
			e.removed(ev.BlockHashes, x)
		case *kvevent.AllBlocksCleared:
			e.stats.Cleared++
			clear(e.blocks)
			x.Clear()
		}
	}
	// Evictions lost to a gap in the stream leave blocks behind for good;
	// an engine holds at most its capacity, so a mapping far past it is
	// stale, and starting over is the honest answer.
	if len(e.blocks) > 4*x.Capacity()+4096 {
		clear(e.blocks)
	}
}

// ours reports whether events about medium and group concern the engine's
// own GPU cache of its first (or only) KV cache group.
func ours(medium string, group *int) bool {
	return (medium == "" || medium == "GPU") && (group == nil || *group == 0)
}

func (e *Events) stored(ev *kvevent.BlockStored, x *kvindex.Index) {
	n := len(ev.BlockHashes)
	if n == 0 {
		return
	}
	e.stats.Blocks += uint64(n)
	bs := ev.TokensPerBlock() // 0: the blocks' tokens cannot be told apart
	// Blocks of another size never match a prompt the gateway cut into
	// blocks of its own size.
	otherSize := bs > 0 && e.checks.BlockSize > 0 && bs != e.checks.BlockSize
	if otherSize {
		e.stats.OtherSize += uint64(n)
		e.stats.OtherBlockSize = bs
	}
	plain := ev.PlainBlocks()
	// The gateway's hash of the run's parent, or of the chain's root.
	var parent prefix.Hash
	engineParent, hasParent := ev.Parent()
	switch {
	case !hasParent:
		lora := ""
		if ev.LoraName != nil {
			lora = *ev.LoraName
		}
		parent = e.root(lora)
	default:
		if p := e.blocks[engineParent]; p != nil {
			parent = p.h
		}
	}
	first := -1 // index of the first block of the run that could be rebuilt
	for i, eh := range ev.BlockHashes {
		var h prefix.Hash
		var toks []uint32
		if bs > 0 {
			toks = ev.TokenIDs[i*bs : (i+1)*bs]
		}
		foreign := !otherSize && e.foreign(toks)
		if !parent.IsZero() && bs > 0 && !otherSize && !foreign && plain[i] {
			h = e.hasher.Next(parent, toks)
			if first < 0 {
				first = i
			}
		} else {
			e.stats.Unmapped++
		}
		b := e.blocks[eh]
		if b == nil {
			b = &eventBlock{h: h}
			e.blocks[eh] = b
		}
		if i > 0 {
			b.parent, b.hasParent = ev.BlockHashes[i-1], true
		} else if hasParent {
			b.parent, b.hasParent = engineParent, true
		}
		b.n++
		parent = h
		if h.IsZero() {
			parent = prefix.Hash{}
		}
	}
	if first != 0 {
		// Nothing could be rebuilt (first < 0), or only a later part
		// could, which cannot happen: a block past a break has no rebuilt
		// parent. Either way there is no chain to record.
		return
	}
	e.record(ev, x)
}

// foreign reports whether a block's tokens hold an id outside the
// vocabulary, and counts it.
func (e *Events) foreign(toks []uint32) bool {
	if e.checks.VocabSize <= 0 {
		return false
	}
	for _, t := range toks {
		if uint64(t) >= uint64(e.checks.VocabSize) {
			e.stats.Foreign++
			e.stats.ForeignID = t
			return true
		}
	}
	return false
}

// record records the chain ending with ev's last rebuilt block, from its
// root: the index keeps a chain's blocks at least as recent as their
// descendants, and an engine that just stored blocks has used their
// ancestors too.
func (e *Events) record(ev *kvevent.BlockStored, x *kvindex.Index) {
	e.chain = e.chain[:0]
	// The run itself, last first, up to the first block that was rebuilt.
	for i := len(ev.BlockHashes) - 1; i >= 0; i-- {
		b := e.blocks[ev.BlockHashes[i]]
		if b.h.IsZero() {
			e.chain = e.chain[:0] // past a break: keep only what precedes it
			continue
		}
		e.chain = append(e.chain, b.h)
	}
	// Then its ancestors, up to the root.
	b := e.blocks[ev.BlockHashes[0]]
	for steps := 0; b != nil && b.hasParent && steps <= len(e.blocks); steps++ {
		b = e.blocks[b.parent]
		if b == nil || b.h.IsZero() {
			return // an ancestor was evicted or never rebuilt
		}
		e.chain = append(e.chain, b.h)
	}
	for i, j := 0, len(e.chain)-1; i < j; i, j = i+1, j-1 {
		e.chain[i], e.chain[j] = e.chain[j], e.chain[i]
	}
	e.stats.Stored += uint64(x.Record(e.chain).Inserted())
}

func (e *Events) removed(hashes []uint64, x *kvindex.Index) {
	for _, eh := range hashes {
		b := e.blocks[eh]
		if b == nil {
			e.stats.Unknown++
			continue
		}
		b.n--
		if b.n > 0 {
			continue
		}
		delete(e.blocks, eh)
		if !b.h.IsZero() && x.Remove(b.h) {
			e.stats.Removed++
		}
	}
}

func (e *Events) root(lora string) prefix.Hash {
	r, ok := e.roots[lora]
	if !ok {
		r = prefix.Root(e.model, lora, "")
		e.roots[lora] = r
	}
	return r
}

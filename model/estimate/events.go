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
// Each data parallel rank of an engine has a KV cache of its own and
// publishes for it (the batch's DPRank), so blocks are keyed by rank and
// engine hash: two ranks holding one prefix are two entries, and one rank
// evicting it leaves the other's. The index holds a block while any rank
// does.
//
// Routing decisions are recorded in the index as they are made; in exact
// mode the caller also marks them speculative (Speculate): blocks the
// engine's events do not hold expire after a TTL (Expire) unless an event
// confirms them first. See speculate.go.
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
	roots  map[string]prefix.Hash   // by LoRA name; "" for the base model
	blocks map[blockKey]*eventBlock // by DP rank and the engine's hash
	// held counts, per gateway hash, the blocks (rank and engine hash)
	// that rebuilt to it: the index holds it while one does.
	held   map[prefix.Hash]int
	hasher prefix.Hasher
	chain  []prefix.Hash // scratch for Record
	stats  EventStats
	spec   speculation
}

// blockKey names one engine block: the data parallel rank whose cache holds
// it and the engine's hash.
type blockKey struct {
	rank int
	h    uint64
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
	return &Events{model: model, checks: c, roots: map[string]prefix.Hash{}, blocks: map[blockKey]*eventBlock{},
		held: map[prefix.Hash]int{}, spec: speculation{until: map[prefix.Hash]int64{}}}
}

// Stats returns the counts so far.
func (e *Events) Stats() EventStats { return e.stats }

// Len is the number of distinct engine blocks the mapping holds, over
// every data parallel rank.
func (e *Events) Len() int { return len(e.blocks) }

// Held reports whether the engine's events hold gateway block h: some rank
// stored it and has not evicted it.
func (e *Events) Held(h prefix.Hash) bool { return e.held[h] > 0 }

// Reset forgets the engine's blocks and every speculation, for an engine
// that restarted or a stream that lost events. The caller clears the index
// too, or keeps it as routing decisions left it.
func (e *Events) Reset() {
	clear(e.blocks)
	clear(e.held)
	e.spec.reset()
}

// Apply applies one batch of the engine's events to x, in order.
func (e *Events) Apply(b *kvevent.Batch, x *kvindex.Index) {
	e.stats.Batches++
	rank := 0
	if b.DPRank != nil {
		rank = *b.DPRank
	}
	for _, ev := range b.Events {
		switch ev := ev.(type) {
		case *kvevent.BlockStored:
			if !ours(ev.Medium, ev.GroupIdx) {
				e.stats.Skipped += uint64(len(ev.BlockHashes))
				continue
			}
			e.stored(rank, ev, x)
		case *kvevent.BlockRemoved:
			if !ours(ev.Medium, ev.GroupIdx) {
				e.stats.Skipped += uint64(len(ev.BlockHashes))
				continue
			}
			e.removed(rank, ev.BlockHashes, x)
		case *kvevent.AllBlocksCleared:
			e.stats.Cleared++
			e.cleared(rank, x)
		}
	}
	// Evictions lost to a gap in the stream leave blocks behind for good;
	// an engine holds at most its capacity, so a mapping far past it is
	// stale, and starting over is the honest answer.
	if len(e.blocks) > 4*x.Capacity()+4096 {
		clear(e.blocks)
		clear(e.held)
	}
}

// cleared applies rank's AllBlocksCleared: its blocks go, and the index
// empties when no other rank holds any.
func (e *Events) cleared(rank int, x *kvindex.Index) {
	others := false
	for k, b := range e.blocks {
		if k.rank != rank {
			others = true
			continue
		}
		delete(e.blocks, k)
		if e.release(b.h) {
			x.Remove(b.h)
		}
	}
	if !others {
		clear(e.held)
		e.spec.reset()
		x.Clear()
	}
}

// hold counts one more engine block rebuilt to h.
func (e *Events) hold(h prefix.Hash) {
	if !h.IsZero() {
		e.held[h]++
	}
}

// release counts one engine block rebuilt to h fewer, and reports whether
// none is left, so that the index should drop h.
func (e *Events) release(h prefix.Hash) bool {
	if h.IsZero() {
		return false
	}
	n := e.held[h] - 1
	if n > 0 {
		e.held[h] = n
		return false
	}
	delete(e.held, h)
	return true
}

// ours reports whether events about medium and group concern the engine's
// own GPU cache of its first (or only) KV cache group.
func ours(medium string, group *int) bool {
	return (medium == "" || medium == "GPU") && (group == nil || *group == 0)
}

func (e *Events) stored(rank int, ev *kvevent.BlockStored, x *kvindex.Index) {
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
		if p := e.blocks[blockKey{rank, engineParent}]; p != nil {
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
		b := e.blocks[blockKey{rank, eh}]
		if b == nil {
			b = &eventBlock{h: h}
			e.blocks[blockKey{rank, eh}] = b
			e.hold(h)
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
	e.record(rank, ev, x)
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
func (e *Events) record(rank int, ev *kvevent.BlockStored, x *kvindex.Index) {
	e.chain = e.chain[:0]
	// The run itself, last first, up to the first block that was rebuilt.
	for i := len(ev.BlockHashes) - 1; i >= 0; i-- {
		b := e.blocks[blockKey{rank, ev.BlockHashes[i]}]
		if b.h.IsZero() {
			e.chain = e.chain[:0] // past a break: keep only what precedes it
			continue
		}
		e.chain = append(e.chain, b.h)
	}
	// Then its ancestors, up to the root.
	b := e.blocks[blockKey{rank, ev.BlockHashes[0]}]
	for steps := 0; b != nil && b.hasParent && steps <= len(e.blocks); steps++ {
		b = e.blocks[blockKey{rank, b.parent}]
		if b == nil || b.h.IsZero() {
			return // an ancestor was evicted or never rebuilt
		}
		e.chain = append(e.chain, b.h)
	}
	for i, j := 0, len(e.chain)-1; i < j; i, j = i+1, j-1 {
		e.chain[i], e.chain[j] = e.chain[j], e.chain[i]
	}
	e.stats.Stored += uint64(x.Record(e.chain).Inserted())
	e.spec.confirm(e.chain) // the engine holds them: no longer speculative
}

func (e *Events) removed(rank int, hashes []uint64, x *kvindex.Index) {
	for _, eh := range hashes {
		k := blockKey{rank, eh}
		b := e.blocks[k]
		if b == nil {
			e.stats.Unknown++
			continue
		}
		b.n--
		if b.n > 0 {
			continue
		}
		delete(e.blocks, k)
		if e.release(b.h) && x.Remove(b.h) {
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

package engine

import (
	"github.com/inferrail/inferrail/model/kvevent"
	"github.com/inferrail/inferrail/model/prefix"
)

// mediumGPU is the medium vLLM puts on events of engine (GPU) blocks.
const mediumGPU = "GPU"

// block is one KV cache block (vLLM's KVCacheBlock).
type block struct {
	hash       prefix.Hash // valid when hashed
	ref        int32       // ref_cnt: requests holding the block
	prev, next int32       // free queue links; noLink when not queued
	hashed     bool
}

const noLink = -1

// pool is vLLM's BlockPool for a single full-attention KV cache group
// (vllm/v1/core/block_pool.py, FreeKVCacheBlockQueue in kv_cache_utils.py).
//
// Every block is either in use (ref > 0) or in the free queue (ref == 0). A
// free block may still hold its hash: it stays hit-able until allocation pops
// it from the head of the queue and evicts it. The queue is a circular doubly
// linked list over block ids with a sentinel at index len(blocks)-1, so that
// popping, appending and removing from the middle (a cache hit) are O(1).
//
// pool is owned by its Engine and is not safe for concurrent use.
type pool struct {
	caching bool
	blocks  []block // NumBlocks blocks plus the sentinel
	sent    int32   // sentinel index
	nfree   int
	ncached int // blocks holding a hash

	// cached maps a hash to the oldest block holding it; dups holds the
	// younger ones in insertion order. Two requests may compute the same
	// block concurrently, so vLLM's BlockHashToBlockMap keeps a dict of
	// blocks per hash and hits return the first inserted one.
	cached map[prefix.Hash]int32
	dups   map[prefix.Hash][]int32

	events []kvevent.Event // queued until the engine drains them

	// Scratch for free.
	withHash, withoutHash []int32
}

func newPool(numBlocks int, caching bool) *pool {
	p := &pool{
		caching: caching,
		blocks:  make([]block, numBlocks+1),
		sent:    int32(numBlocks),
		nfree:   numBlocks,
		cached:  make(map[prefix.Hash]int32),
		dups:    make(map[prefix.Hash][]int32),
	}
	// The queue starts in block-id order, as vLLM's does.
	n := int32(numBlocks)
	for i := int32(0); i <= n; i++ {
		p.blocks[i].prev = (i + n) % (n + 1)
		p.blocks[i].next = (i + 1) % (n + 1)
	}
	return p
}

func (p *pool) numBlocks() int { return len(p.blocks) - 1 }

// numFree is the number of blocks with ref 0, cached or not.
func (p *pool) numFree() int { return p.nfree }

func (p *pool) numUsed() int { return p.numBlocks() - p.nfree }

// queued reports whether block id sits in the free queue.
func (p *pool) queued(id int32) bool { return p.blocks[id].prev != noLink }

func (p *pool) unlink(id int32) {
	b := &p.blocks[id]
	p.blocks[b.prev].next = b.next
	p.blocks[b.next].prev = b.prev
	b.prev, b.next = noLink, noLink
	p.nfree--
}

// insertAfter links id into the queue right after at.
func (p *pool) insertAfter(at, id int32) {
	nx := p.blocks[at].next
	p.blocks[id].prev = at
	p.blocks[id].next = nx
	p.blocks[at].next = id
	p.blocks[nx].prev = id
	p.nfree++
}

// alloc pops k blocks from the head of the free queue, evicting any hash they
// still hold, and appends their ids to dst with ref 1 (get_new_blocks). The
// caller has checked k <= numFree.
func (p *pool) alloc(k int, dst []int32) []int32 {
	if k > p.nfree {
		panic("BUG: engine: allocating more blocks than are free")
	}
	for range k {
		id := p.blocks[p.sent].next
		p.unlink(id)
		p.evict(id)
		p.blocks[id].ref = 1
		dst = append(dst, id)
	}
	return dst
}

// evict drops block id's hash, as _maybe_evict_cached_block does when
// allocation reuses a cached block, and queues a BlockRemoved for it. Freeing a
// request's blocks never evicts: they stay cached until reused.
func (p *pool) evict(id int32) {
	b := &p.blocks[id]
	if !b.hashed {
		return
	}
	h := b.hash
	p.unmap(h, id)
	b.hashed = false
	b.hash = prefix.Hash{}
	p.ncached--
	p.events = append(p.events, &kvevent.BlockRemoved{
		BlockHashes: []uint64{h.External()},
		Medium:      mediumGPU,
	})
}

// unmap removes id from the blocks holding h.
func (p *pool) unmap(h prefix.Hash, id int32) {
	d := p.dups[h]
	if p.cached[h] == id {
		if len(d) == 0 {
			delete(p.cached, h)
			return
		}
		p.cached[h] = d[0]
		d = d[1:]
	} else {
		for i, x := range d {
			if x == id {
				d = append(d[:i:i], d[i+1:]...)
				break
			}
		}
	}
	if len(d) == 0 {
		delete(p.dups, h)
	} else {
		p.dups[h] = d
	}
}

// lookup returns the block caching h, the oldest one if several do.
func (p *pool) lookup(h prefix.Hash) (int32, bool) {
	if !p.caching {
		return 0, false
	}
	id, ok := p.cached[h]
	return id, ok
}

// touch takes a reference on cache-hit blocks, pulling the free ones out of
// the free queue so allocation cannot evict them (BlockPool.touch).
func (p *pool) touch(ids []int32) {
	for _, id := range ids {
		if p.blocks[id].ref == 0 && p.queued(id) {
			p.unlink(id)
		}
		p.blocks[id].ref++
	}
}

// free drops one reference on each of a request's blocks, given in chain
// order. As SingleTypeKVCacheManager.free does, it frees them in reverse order
// so that the chain's tail is evicted before its prefix. Blocks whose ref hits
// 0 go to the queue's tail if they hold a hash (LRU), and to its head if they
// do not: an unhashed block can never be hit, so it is reused first
// (BlockPool.free_blocks). With caching off every block is appended, as vLLM
// does for GPU cache locality.
func (p *pool) free(ids []int32) {
	p.withHash, p.withoutHash = p.withHash[:0], p.withoutHash[:0]
	for i := len(ids) - 1; i >= 0; i-- {
		id := ids[i]
		b := &p.blocks[id]
		if b.ref <= 0 {
			panic("BUG: engine: freeing a free block")
		}
		b.ref--
		if b.ref > 0 {
			continue
		}
		if b.hashed || !p.caching {
			p.withHash = append(p.withHash, id)
		} else {
			p.withoutHash = append(p.withoutHash, id)
		}
	}
	at := p.sent
	for _, id := range p.withoutHash {
		p.insertAfter(at, id)
		at = id
	}
	for _, id := range p.withHash {
		p.insertAfter(p.blocks[p.sent].prev, id)
	}
}

// cache gives blocks ids[from:to] their hashes hashes[from:to] and queues one
// BlockStored for the run (BlockPool.cache_full_blocks). tokens are the run's
// tokens, which the event takes over. The blocks must be unhashed: they were
// freshly allocated for the request.
func (p *pool) cache(ids []int32, hashes []prefix.Hash, from, to int, tokens []uint32, blockSize int) {
	if !p.caching || from >= to {
		return
	}
	ext := make([]uint64, 0, to-from)
	for i := from; i < to; i++ {
		id, h := ids[i], hashes[i]
		b := &p.blocks[id]
		if b.hashed {
			panic("BUG: engine: caching a block that already holds a hash")
		}
		b.hashed, b.hash = true, h
		p.ncached++
		if _, ok := p.cached[h]; ok {
			p.dups[h] = append(p.dups[h], id)
		} else {
			p.cached[h] = id
		}
		ext = append(ext, h.External())
	}
	ev := &kvevent.BlockStored{
		BlockHashes: ext,
		TokenIDs:    tokens,
		BlockSize:   blockSize,
		Medium:      mediumGPU,
	}
	if from > 0 {
		parent := hashes[from-1].External()
		ev.ParentBlockHash = &parent
	}
	p.events = append(p.events, ev)
}

// reset drops every hash if no block is in use and queues AllBlocksCleared
// (BlockPool.reset_prefix_cache). The free queue keeps its order.
func (p *pool) reset() bool {
	if p.numUsed() > 0 {
		return false
	}
	if !p.caching {
		return true
	}
	for i := range p.blocks[:p.numBlocks()] {
		p.blocks[i].hashed = false
		p.blocks[i].hash = prefix.Hash{}
	}
	clear(p.cached)
	clear(p.dups)
	p.ncached = 0
	p.events = append(p.events, &kvevent.AllBlocksCleared{})
	return true
}

// takeEvents returns the queued events in the order they happened and starts
// a new queue.
func (p *pool) takeEvents() []kvevent.Event {
	ev := p.events
	p.events = nil
	return ev
}

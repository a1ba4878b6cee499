// Package kvindex is the shadow KV index of one replica: an LRU of the block
// hashes (model/prefix) of the prompts routed to it, as large as the replica's
// KV cache, from which the router predicts how many prompt tokens the engine
// will find in its prefix cache.
//
// # Prefix closure
//
// Block hashes are chained, so a hash names the whole prefix ending with its
// block and every block but a chain's first has exactly one parent. Record
// touches a chain so that each parent ends up more recent than its children,
// and every other operation keeps that order. Eviction takes the least recent
// block first, which then has no child present, so the index stays closed
// under prefixes: a present block implies its parent is present. For any
// prompt the present blocks are therefore a prefix of its chain, and Lookup
// finds the longest one by binary search, O(log n) map probes, exactly.
//
// # Ownership
//
// kvindex starts no goroutines, does no I/O and keeps no globals. An Index is
// not safe for concurrent use: each one is owned by one replica actor, and
// lookups (the estimate scatter-gather) run on that actor. There is no
// concurrent View: an immutable copy costs O(len) time and a second copy of
// the memory on every publish (tens of MB at a million blocks), which is not
// cheap. The actor publishes Len, Capacity and Bytes in its snapshot instead.
package kvindex

import (
	"github.com/inferrail/inferrail/model/prefix"
)

// nodeBytes is the size of one list entry (see node).
const nodeBytes = 32

// slotBytes is the memory one map slot takes in a Go swiss map of
// map[prefix.Hash]int32: a 16-byte key and a 4-byte value padded to 24 bytes,
// plus one control byte.
const slotBytes = 25

// node is one block in the recency list. Entries live in a slice and link by
// index, so the list holds no pointers and costs the GC nothing to scan.
// Index 0 is the sentinel: its next is the most recent block, its prev the
// least recent.
type node struct {
	h          prefix.Hash
	prev, next int32
	// stamp says which Record last touched the block: 2*seq when that Record
	// inserted it, 2*seq+1 when it was already present.
	stamp uint64
}

// Index is an LRU of block hashes, closed under prefixes. The zero value is
// not usable; call New.
type Index struct {
	m     map[prefix.Hash]int32
	nodes []node // nodes[0] is the sentinel
	free  int32  // head of the free list, linked by next; 0 when empty
	n     int    // blocks present
	cap   int    // capacity in blocks
	seq   uint64 // Records so far; never reset, so stale receipts never match
	peak  int    // largest len(m) since m was made, for Bytes
}

// New returns an empty Index holding at most capacity blocks. The caller
// chooses capacity: kv_capacity_blocks when set, else what the engine reports,
// else index.default_capacity_blocks. A capacity ≤ 0 holds nothing.
func New(capacity int) *Index {
	x := &Index{
		m:     make(map[prefix.Hash]int32),
		nodes: make([]node, 1, 64),
	}
	x.cap = max(capacity, 0)
	return x
}

// Len is the number of blocks present.
func (x *Index) Len() int { return x.n }

// Capacity is the most blocks the index holds.
func (x *Index) Capacity() int { return x.cap }

// Bytes approximates the memory the index holds: its list entries plus an
// estimate of its map's tables (the map never shrinks, so the estimate
// follows its largest size since it was made).
func (x *Index) Bytes() int64 {
	slots := 8
	for slots*7/8 < x.peak {
		slots *= 2
	}
	return int64(cap(x.nodes))*nodeBytes + int64(slots)*slotBytes
}

// Receipt names what one Record inserted, so that TakeBack can remove it. It
// aliases the slice passed to Record: leave those hashes unchanged while the
// receipt is held. The zero Receipt takes back nothing.
type Receipt struct {
	x        *Index
	blocks   []prefix.Hash // the part of the chain that may hold inserted blocks
	seq      uint64
	inserted int
}

// Inserted is the number of blocks the Record added to the index.
func (r Receipt) Inserted() int { return r.inserted }

// Record notes that the prompt whose block chain is hashes was sent to the
// replica, and returns a receipt for TakeBack. hashes must be a chain as
// prefix.Hasher.Chain makes it, from the first block; other sequences leave
// the index consistent and within capacity, but their predictions may be off.
//
// Afterwards the chain's first min(len(hashes), Capacity()) blocks are the most
// recent, in chain order (the first block most recent); blocks past the
// capacity are not recorded, since the engine could not hold them either.
// Blocks that were present are moved, new ones inserted, and the least recent
// blocks outside the chain are evicted to stay within capacity.
func (x *Index) Record(hashes []prefix.Hash) Receipt {
	x.seq++
	seq := x.seq
	hashes = hashes[:min(len(hashes), x.cap)]
	if len(hashes) == 0 {
		return Receipt{}
	}
	// The present blocks of the chain are its first k (prefix closure). Move
	// them to the front, last first, so that the first ends up most recent.
	k := x.Lookup(hashes)
	for i := k - 1; i >= 0; i-- {
		j, ok := x.m[hashes[i]]
		if !ok {
			// Only when hashes is not a chain: the general loop below
			// handles present and absent blocks alike.
			k = 0
			break
		}
		x.unlink(j)
		x.linkAfter(j, 0)
		x.nodes[j].stamp = 2*seq + 1
	}
	// Insert the rest behind their parents. Every chain block handled so far
	// sits at the front and there are fewer of them than the capacity, so the
	// block evicted to make room is never one of them.
	at := int32(0)
	if k > 0 {
		at = x.m[hashes[k-1]]
	}
	inserted := 0
	for i := k; i < len(hashes); i++ {
		h := hashes[i]
		j, ok := x.m[h]
		if ok && j == at {
			continue // the same hash twice in a row
		}
		if ok {
			// Only when the chain breaks prefix closure (a repeated hash):
			// keep the list consistent and do not claim the block.
			x.unlink(j)
			if x.nodes[j].stamp != 2*seq {
				x.nodes[j].stamp = 2*seq + 1
			}
		} else {
			if x.n >= x.cap {
				x.evict()
			}
			j = x.alloc(h)
			x.m[h] = j
			x.n++
			x.peak = max(x.peak, len(x.m))
			x.nodes[j].stamp = 2 * seq
			inserted++
		}
		x.linkAfter(j, at)
		at = j
	}
	if inserted == 0 {
		return Receipt{}
	}
	return Receipt{x: x, blocks: hashes[k:], seq: seq, inserted: inserted}
}

// TakeBack undoes what r's Record inserted, for an attempt the engine refused,
// answered with an error or failed before answering. It removes exactly the
// blocks that Record inserted and that are still present with no later Record
// having touched them, and returns how many it removed:
//   - blocks that were present before the Record stay, and keep the recency
//     the Record gave them (it is not rolled back);
//   - a block a later Record touched stays, since that attempt may have made
//     the engine compute it; so does one evicted and inserted again since;
//   - after Clear, a second TakeBack, or with a receipt of another Index or the
//     zero Receipt, nothing is removed.
//
// Every block removed has no child left present (a child inserted later would
// have touched it), so the index stays closed under prefixes.
//
// The rule errs toward keeping blocks: when two attempts share new blocks and
// both fail, the blocks the first inserted and the second touched stay,
// although no engine computed them. Telling that apart needs to know which
// attempts succeeded, which the index is not told.
func (x *Index) TakeBack(r Receipt) int {
	if r.x != x {
		return 0
	}
	removed := 0
	for _, h := range r.blocks {
		j, ok := x.m[h]
		if !ok || x.nodes[j].stamp != 2*r.seq {
			continue
		}
		x.remove(j)
		removed++
	}
	return removed
}

// Lookup returns how many leading blocks of hashes are present. It changes no
// recency and does not allocate.
func (x *Index) Lookup(hashes []prefix.Hash) int {
	lo, hi := 0, len(hashes)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if _, ok := x.m[hashes[mid]]; ok {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

// Predict returns how many of a prompt's promptTokens the engine will find
// cached, given the prompt's block chain hashes and the engine's block size.
// As vLLM does (max_cache_hit_length = num_tokens - 1), a hit covers at most
// promptTokens-1 tokens, in whole blocks: the last token is always computed,
// so a fully cached prompt whose length is a multiple of blockSize hits one
// block short.
func (x *Index) Predict(hashes []prefix.Hash, promptTokens, blockSize int) int {
	if promptTokens <= 0 || blockSize <= 0 {
		return 0
	}
	limit := min(len(hashes), (promptTokens-1)/blockSize)
	return x.Lookup(hashes[:limit]) * blockSize
}

// Clear empties the index, as when its engine restarted. Capacity stays, and
// receipts taken before take back nothing.
func (x *Index) Clear() {
	clear(x.m)
	x.nodes = x.nodes[:1]
	x.nodes[0] = node{}
	x.free = 0
	x.n = 0
}

// SetCapacity changes the capacity, evicting the least recent blocks first when
// it shrinks. A capacity ≤ 0 holds nothing. Shrinking below a quarter of the
// memory held releases it.
func (x *Index) SetCapacity(capacity int) {
	x.cap = max(capacity, 0)
	for x.n > x.cap {
		x.evict()
	}
	if x.cap < cap(x.nodes)/4 && cap(x.nodes) > 1024 {
		x.compact()
	}
}

// compact rebuilds the list and the map at their present size.
func (x *Index) compact() {
	nodes := make([]node, 1, x.n+1)
	m := make(map[prefix.Hash]int32, x.n)
	for j := x.nodes[0].prev; j != 0; j = x.nodes[j].prev {
		nd := x.nodes[j]
		k := int32(len(nodes))
		nodes = append(nodes, node{h: nd.h, stamp: nd.stamp})
		m[nd.h] = k
	}
	// Appended least recent first: link each at the front.
	nodes[0].prev, nodes[0].next = 0, 0
	x.nodes, x.m, x.free, x.peak = nodes, m, 0, len(m)
	for k := int32(1); k < int32(len(nodes)); k++ {
		x.linkAfter(k, 0)
	}
}

// evict removes the least recent block.
func (x *Index) evict() {
	if j := x.nodes[0].prev; j != 0 {
		x.remove(j)
	}
}

func (x *Index) remove(j int32) {
	delete(x.m, x.nodes[j].h)
	x.unlink(j)
	x.nodes[j] = node{next: x.free}
	x.free = j
	x.n--
}

func (x *Index) alloc(h prefix.Hash) int32 {
	if j := x.free; j != 0 {
		x.free = x.nodes[j].next
		x.nodes[j] = node{h: h}
		return j
	}
	x.nodes = append(x.nodes, node{h: h})
	return int32(len(x.nodes) - 1)
}

func (x *Index) unlink(j int32) {
	nd := &x.nodes[j]
	x.nodes[nd.prev].next = nd.next
	x.nodes[nd.next].prev = nd.prev
	nd.prev, nd.next = 0, 0
}

// linkAfter puts j just behind at, that is, just less recent than at; at == 0
// makes j the most recent.
func (x *Index) linkAfter(j, at int32) {
	nx := x.nodes[at].next
	x.nodes[j].prev = at
	x.nodes[j].next = nx
	x.nodes[nx].prev = j
	x.nodes[at].next = j
}

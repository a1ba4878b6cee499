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
// finds the longest one by binary search, O(log n) table probes, exactly.
//
// # Memory
//
// A million blocks spread over 64 replicas must cost at most 64 bytes a block
// (the index's memory target; a Go map of the same blocks took 86 to 92). An
// Index allocates its arrays once, for its capacity, and never grows them
// while the capacity stays: a 32-byte list entry per block (the hash, two
// int32 links and the stamp TakeBack needs), and an open-addressing table of
// 4-byte slots, about 1.5 per block, that hold list entry numbers. Full, at
// 15,625 blocks, that is 38.8 bytes a block, which is what Bytes reports and
// what the heap holds (BenchmarkMemory1M). The memory is taken at New even
// for an empty index, so the capacity it is given should be real.
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
	"iter"
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"
	"unsafe"

	"github.com/inferrail/inferrail/model/prefix"
)

// maxCapacity is the most blocks an Index holds: list entries are numbered
// with int32 and entry 0 is the sentinel.
const maxCapacity = math.MaxInt32 - 1

// nodeBytes is the size of one list entry (see node).
const nodeBytes = int64(unsafe.Sizeof(node{}))

// node is one block in the recency list. Entries live in a slice and link by
// number, so the list holds no pointers and costs the GC nothing to scan.
// Entry 0 is the sentinel: its next is the most recent block, its prev the
// least recent. A free entry is linked into the free list by next.
type node struct {
	h          prefix.Hash
	prev, next int32
	// stamp says which Record last touched the block: 2*seq when that Record
	// inserted it, 2*seq+1 when it was already present. TakeBack needs it.
	stamp uint64
}

// Index is an LRU of block hashes, closed under prefixes. The zero value is
// not usable; call New.
//
// The hash table is open addressing with linear probing over slots. A slot
// is 0 when empty, else the number of the list entry it holds in its low bits
// (mask) and, in the bits above, a tag: the same bits of the block's key
// (key). The tag settles most probes that miss without reading the entry. Removal shifts
// the rest of the probe run back (Knuth's Algorithm R, TAOCP 6.4), so there
// are no tombstones and a probe ends at the first empty slot.
type Index struct {
	nodes []node   // nodes[0] is the sentinel; cap(nodes) > cap, allocated once
	slots []uint32 // the table: len(slots) > cap, so a probe always ends
	mask  uint32   // the entry-number bits of a slot
	free  int32    // head of the free list, linked by next; 0 when empty
	n     int      // blocks present
	cap   int      // capacity in blocks
	seq   uint64   // Records so far; never reset, so stale receipts never match
	// seed salts the table's hash, as Go seeds each map (from the same
	// runtime source): prompts are the clients', and unsalted XXH3 lets a
	// client grind blocks whose hashes share a slot, making every probe that
	// reaches them long. It changes where blocks sit in the table, never
	// what the index answers.
	seed uint64
}

// New returns an empty Index holding at most capacity blocks. The caller
// chooses capacity: kv_capacity_blocks when set, else what the engine reports,
// else index.default_capacity_blocks. A capacity ≤ 0 holds nothing; one over
// 2³¹−2 is taken as 2³¹−2.
//
// The memory for capacity blocks is allocated here, up front (see Bytes).
func New(capacity int) *Index {
	x := &Index{seed: rand.Uint64()}
	x.cap = min(max(capacity, 0), maxCapacity)
	x.alloc(x.cap)
	return x
}

// Len is the number of blocks present.
func (x *Index) Len() int { return x.n }

// Capacity is the most blocks the index holds.
func (x *Index) Capacity() int { return x.cap }

// Bytes is the memory the index holds: its list entries and table, as
// allocated for its capacity (with the allocator's rounding), whether or not
// they are in use, and the Index itself.
func (x *Index) Bytes() int64 {
	return int64(cap(x.nodes))*nodeBytes + int64(cap(x.slots))*4 + int64(unsafe.Sizeof(*x))
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
	// at ends as the entry of block k-1, behind which the rest go.
	k := x.Lookup(hashes)
	// When they are the k most recent already, in chain order (a prefix
	// recorded again before any other, as a hot system prompt or session
	// is), moving changes nothing: walk the list from the front, stamping,
	// without a probe per block (issue 16: the Record of an 8,000-token
	// prompt was the replica actor's largest cost per decision).
	at, m := int32(0), 0
	for j := x.nodes[0].next; m < k && j != 0 && x.nodes[j].h == hashes[m]; j = x.nodes[j].next {
		x.nodes[j].stamp = 2*seq + 1
		at, m = j, m+1
	}
	if m < k {
		at = 0
	}
	for i := k - 1; m < k && i >= 0; i-- {
		j := x.find(hashes[i])
		if j == 0 {
			// Only when hashes is not a chain: the general loop below
			// handles present and absent blocks alike.
			k, at = 0, 0
			break
		}
		if i == k-1 {
			at = j
		}
		x.unlink(j)
		x.linkAfter(j, 0)
		x.nodes[j].stamp = 2*seq + 1
	}
	// Insert the rest behind their parents. Every chain block handled so far
	// sits at the front and there are fewer of them than the capacity, so the
	// block evicted to make room is never one of them.
	inserted := 0
	for i := k; i < len(hashes); i++ {
		h := hashes[i]
		j := x.find(h)
		if j != 0 && j == at {
			continue // the same hash twice in a row
		}
		if j != 0 {
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
			j = x.insert(h)
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
		j := x.find(h)
		if j == 0 || x.nodes[j].stamp != 2*r.seq {
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
		if x.find(hashes[mid]) != 0 {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

// All yields every block present, least recent first, so that each block
// comes before its parent (prefix closure: a parent is more recent than its
// children). The index must not change while it runs.
func (x *Index) All() iter.Seq[prefix.Hash] {
	return func(yield func(prefix.Hash) bool) {
		for j := x.nodes[0].prev; j != 0; j = x.nodes[j].prev {
			if !yield(x.nodes[j].h) {
				return
			}
		}
	}
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

// Remove drops block h, as when its engine reported evicting it, and
// reports whether it was present. Receipts that named it take back nothing
// for it afterwards.
//
// The index stays closed under prefixes only if h has no child present.
// Engines evict that way (vLLM frees a request's blocks last first, and a
// parent is always used at least as recently as its children), and so does
// the index's own LRU; a caller that removes a parent before its children
// makes lookups of those children's chains answer too long.
func (x *Index) Remove(h prefix.Hash) bool {
	j := x.find(h)
	if j == 0 {
		return false
	}
	x.remove(j)
	return true
}

// Clear empties the index, as when its engine restarted. Capacity and memory
// stay, and receipts taken before take back nothing.
func (x *Index) Clear() {
	clear(x.slots)
	x.nodes = x.nodes[:1]
	x.nodes[0] = node{}
	x.free = 0
	x.n = 0
}

// SetCapacity changes the capacity, evicting the least recent blocks first when
// it shrinks. A capacity ≤ 0 holds nothing; one over 2³¹−2 is taken as 2³¹−2.
// The memory held follows the capacity: a change reallocates it and moves
// every block present, in O(Len) time, while setting the same capacity again
// does nothing.
func (x *Index) SetCapacity(capacity int) {
	capacity = min(max(capacity, 0), maxCapacity)
	if capacity == x.cap {
		return
	}
	x.cap = capacity
	for x.n > x.cap {
		x.evict()
	}
	// Copy the list least recent first, linking each entry at the front, and
	// rebuild the table.
	old := x.nodes
	x.alloc(x.cap)
	for j := old[0].prev; j != 0; j = old[j].prev {
		k := x.insert(old[j].h)
		x.nodes[k].stamp = old[j].stamp
		x.linkAfter(k, 0)
	}
}

// alloc makes the index empty, with new arrays for capacity blocks: the list entries, and a table
// 1.5 times as large, which keeps probe runs short (Knuth: a miss reads about
// 5 slots at that load, a hit 2). Either takes all the memory its allocation
// was rounded up to.
func (x *Index) alloc(capacity int) {
	x.nodes = slices.Grow([]node(nil), capacity+1)[:1]
	x.slots = slices.Grow([]uint32(nil), capacity+capacity/2+1)
	x.slots = x.slots[:cap(x.slots)]
	x.mask = 1<<bits.Len(uint(capacity)) - 1
	x.free, x.n = 0, 0
}

// key hashes a block for the table: home takes the slot from its top bits and
// the tag is taken from its low 32. Only h.Lo goes in: XXH3's bits are
// uniform, and so blocks that share Lo share slot and tag in every table,
// which the tests use to build collisions. The mix is MurmurHash3's fmix64, so
// that each bit of the seed reaches the slot.
func (x *Index) key(h prefix.Hash) uint64 {
	k := h.Lo ^ x.seed
	k ^= k >> 33
	k *= 0xff51afd7ed558ccd
	k ^= k >> 33
	k *= 0xc4ceb9fe1a85ec53
	k ^= k >> 33
	return k
}

// home is the slot a probe for key k starts at: k scaled to the table's
// length (Lemire's fast range), which need not be a power of two.
func (x *Index) home(k uint64) int {
	s, _ := bits.Mul64(k, uint64(len(x.slots)))
	return int(s)
}

// find returns the list entry holding h, or 0 when h is absent.
func (x *Index) find(h prefix.Hash) int32 {
	k := x.key(h)
	tag := uint32(k) &^ x.mask
	for i := x.home(k); ; {
		s := x.slots[i]
		if s == 0 {
			return 0
		}
		if s&^x.mask == tag {
			if j := int32(s & x.mask); x.nodes[j].h == h {
				return j
			}
		}
		if i++; i == len(x.slots) {
			i = 0
		}
	}
}

// insert takes a free list entry for h, which must be absent, and puts it in
// the table. It does not link the entry into the list. There must be room:
// Len() < Capacity().
func (x *Index) insert(h prefix.Hash) int32 {
	j := x.free
	if j != 0 {
		x.free = x.nodes[j].next
		x.nodes[j] = node{h: h}
	} else {
		// len(nodes) = 1 + Len + free entries ≤ Capacity < cap(nodes):
		// append never reallocates.
		j = int32(len(x.nodes))
		x.nodes = append(x.nodes, node{h: h})
	}
	k := x.key(h)
	i := x.home(k)
	for x.slots[i] != 0 {
		if i++; i == len(x.slots) {
			i = 0
		}
	}
	x.slots[i] = uint32(k)&^x.mask | uint32(j)
	x.n++
	return j
}

// evict removes the least recent block.
func (x *Index) evict() {
	if j := x.nodes[0].prev; j != 0 {
		x.remove(j)
	}
}

// remove takes entry j out of the table and the list, onto the free list.
func (x *Index) remove(j int32) {
	x.unslot(j)
	x.unlink(j)
	x.nodes[j] = node{next: x.free}
	x.free = j
	x.n--
}

// unslot empties the slot holding entry j, then moves back each later slot
// of the probe run whose probe would otherwise start after the hole, so that
// no probe for a present block meets an empty slot before finding it.
func (x *Index) unslot(j int32) {
	n := len(x.slots)
	i := x.home(x.key(x.nodes[j].h))
	for probes := 0; x.slots[i]&x.mask != uint32(j); probes++ {
		if probes == n {
			panic("BUG: kvindex: entry missing from the table")
		}
		if i++; i == n {
			i = 0
		}
	}
	for k := i; ; {
		x.slots[i] = 0
		// Find the next slot of the run that may fill hole i.
		for {
			if k++; k == n {
				k = 0
			}
			s := x.slots[k]
			if s == 0 {
				return
			}
			// The block in slot k stays if its home is cyclically in
			// (i, k]: a probe from there never passes the hole.
			at := x.home(x.key(x.nodes[s&x.mask].h))
			if i <= k && (i < at && at <= k) || i > k && (i < at || at <= k) {
				continue
			}
			x.slots[i] = s
			i = k
			break
		}
	}
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

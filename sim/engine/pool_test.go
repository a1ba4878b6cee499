package engine

import (
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/inferrail/inferrail/model/kvevent"
	"github.com/inferrail/inferrail/model/prefix"
)

// refPool is a naive model of vLLM's BlockPool: plain slices and maps, O(n)
// everything, written from block_pool.py rather than from pool.go.
type refPool struct {
	caching bool
	ref     []int
	hash    []prefix.Hash
	hashed  []bool
	queue   []int32 // free queue, head first
	cached  map[prefix.Hash][]int32
	events  []kvevent.Event
}

func newRefPool(n int, caching bool) *refPool {
	p := &refPool{
		caching: caching,
		ref:     make([]int, n),
		hash:    make([]prefix.Hash, n),
		hashed:  make([]bool, n),
		cached:  map[prefix.Hash][]int32{},
	}
	for i := range n {
		p.queue = append(p.queue, int32(i))
	}
	return p
}

func (p *refPool) alloc(k int) []int32 {
	ids := slices.Clone(p.queue[:k])
	p.queue = p.queue[k:]
	for _, id := range ids {
		if p.hashed[id] {
			h := p.hash[id]
			l := p.cached[h]
			l = slices.Delete(l, slices.Index(l, id), slices.Index(l, id)+1)
			if len(l) == 0 {
				delete(p.cached, h)
			} else {
				p.cached[h] = l
			}
			p.hashed[id], p.hash[id] = false, prefix.Hash{}
			p.events = append(p.events, &kvevent.BlockRemoved{BlockHashes: []uint64{h.External()}, Medium: "GPU"})
		}
		p.ref[id] = 1
	}
	return ids
}

func (p *refPool) free(ids []int32) {
	var with, without []int32
	for i := len(ids) - 1; i >= 0; i-- {
		id := ids[i]
		p.ref[id]--
		if p.ref[id] == 0 {
			if p.hashed[id] || !p.caching {
				with = append(with, id)
			} else {
				without = append(without, id)
			}
		}
	}
	p.queue = append(append(without, p.queue...), with...)
}

func (p *refPool) touch(ids []int32) {
	for _, id := range ids {
		if p.ref[id] == 0 {
			i := slices.Index(p.queue, id)
			p.queue = slices.Delete(p.queue, i, i+1)
		}
		p.ref[id]++
	}
}

func (p *refPool) lookup(h prefix.Hash) (int32, bool) {
	l := p.cached[h]
	if !p.caching || len(l) == 0 {
		return 0, false
	}
	return l[0], true
}

func (p *refPool) cache(ids []int32, hashes []prefix.Hash, from, to int, toks []uint32, bs int) {
	if !p.caching || from >= to {
		return
	}
	ev := &kvevent.BlockStored{TokenIDs: toks, BlockSize: bs, Medium: "GPU"}
	if from > 0 {
		x := hashes[from-1].External()
		ev.ParentBlockHash = &x
	}
	for i := from; i < to; i++ {
		p.hashed[ids[i]], p.hash[ids[i]] = true, hashes[i]
		p.cached[hashes[i]] = append(p.cached[hashes[i]], ids[i])
		ev.BlockHashes = append(ev.BlockHashes, hashes[i].External())
	}
	p.events = append(p.events, ev)
}

func (p *refPool) reset() bool {
	for _, r := range p.ref {
		if r > 0 {
			return false
		}
	}
	if !p.caching {
		return true
	}
	clear(p.cached)
	for i := range p.hashed {
		p.hashed[i], p.hash[i] = false, prefix.Hash{}
	}
	p.events = append(p.events, &kvevent.AllBlocksCleared{})
	return true
}

// queueOrder walks p's free queue from the head.
func queueOrder(p *pool) []int32 {
	var out []int32
	for id := p.blocks[p.sent].next; id != p.sent; id = p.blocks[id].next {
		out = append(out, id)
	}
	return out
}

// hashMap is p's hash → blocks map, oldest block first.
func hashMap(p *pool) map[prefix.Hash][]int32 {
	m := map[prefix.Hash][]int32{}
	for h, id := range p.cached {
		m[h] = append([]int32{id}, p.dups[h]...)
	}
	return m
}

func comparePools(t *testing.T, step int, got *pool, want *refPool) {
	t.Helper()
	if q, wq := queueOrder(got), want.queue; !slices.Equal(q, wq) {
		t.Fatalf("op %d: free queue %v, want %v", step, q, wq)
	}
	if got.numFree() != len(want.queue) {
		t.Fatalf("op %d: numFree %d, want %d", step, got.numFree(), len(want.queue))
	}
	ncached := 0
	for id := range want.ref {
		b := got.blocks[id]
		if int(b.ref) != want.ref[id] || b.hashed != want.hashed[id] || b.hash != want.hash[id] {
			t.Fatalf("op %d: block %d = %+v, want ref %d hashed %v %v", step, id, b, want.ref[id], want.hashed[id], want.hash[id])
		}
		if b.hashed {
			ncached++
		}
	}
	if got.ncached != ncached {
		t.Fatalf("op %d: ncached %d, want %d", step, got.ncached, ncached)
	}
	if m := hashMap(got); !reflect.DeepEqual(m, want.cached) {
		t.Fatalf("op %d: hash map %v, want %v", step, m, want.cached)
	}
	ge, we := got.takeEvents(), want.events
	want.events = nil
	if len(ge) != 0 || len(we) != 0 {
		if !reflect.DeepEqual(ge, we) {
			t.Fatalf("op %d: events %s, want %s", step, fmtEvents(ge), fmtEvents(we))
		}
	}
}

// owner is a holder of blocks in the random pool test: a request's block
// table.
type owner struct {
	ids       []int32
	hashes    []prefix.Hash
	numCached int
}

// TestPoolMatchesReference drives pool and refPool with the same random
// allocate/free/touch/cache/reset operations and compares them after each.
func TestPoolMatchesReference(t *testing.T) {
	for seed := range uint64(40) {
		for _, caching := range []bool{true, false} {
			rng := rand.New(rand.NewPCG(seed, 7))
			n := 4 + rng.IntN(24)
			got, want := newPool(n, caching), newRefPool(n, caching)
			universe := make([]prefix.Hash, 3+rng.IntN(12)) // small: duplicates happen
			for i := range universe {
				universe[i] = prefix.Hash{Hi: rng.Uint64(), Lo: rng.Uint64()}
			}
			var owners []*owner
			for op := range 400 {
				switch k := rng.IntN(100); {
				case k < 30: // allocate for a new or existing owner
					c := 1 + rng.IntN(4)
					if c > got.numFree() {
						continue
					}
					var o *owner
					if len(owners) > 0 && rng.IntN(2) == 0 {
						o = owners[rng.IntN(len(owners))]
					} else {
						o = &owner{}
						owners = append(owners, o)
					}
					o.ids = got.alloc(c, o.ids)
					if w := want.alloc(c); !slices.Equal(o.ids[len(o.ids)-c:], w) {
						t.Fatalf("seed %d op %d: alloc %v, want %v", seed, op, o.ids[len(o.ids)-c:], w)
					}
				case k < 50: // free an owner
					if len(owners) == 0 {
						continue
					}
					i := rng.IntN(len(owners))
					got.free(owners[i].ids)
					want.free(owners[i].ids)
					owners = slices.Delete(owners, i, i+1)
				case k < 70: // a cache hit on a random cached hash
					h := universe[rng.IntN(len(universe))]
					id, ok := got.lookup(h)
					wid, wok := want.lookup(h)
					if id != wid || ok != wok {
						t.Fatalf("seed %d op %d: lookup (%d,%v), want (%d,%v)", seed, op, id, ok, wid, wok)
					}
					if !ok {
						continue
					}
					got.touch([]int32{id})
					want.touch([]int32{id})
					owners = append(owners, &owner{ids: []int32{id}, hashes: []prefix.Hash{h}, numCached: 1})
				case k < 97: // cache a run of an owner's blocks
					if len(owners) == 0 {
						continue
					}
					o := owners[rng.IntN(len(owners))]
					if o.numCached == len(o.ids) {
						continue
					}
					to := o.numCached + 1 + rng.IntN(len(o.ids)-o.numCached)
					for len(o.hashes) < to {
						o.hashes = append(o.hashes, universe[rng.IntN(len(universe))])
					}
					toks := make([]uint32, 2*(to-o.numCached))
					for i := range toks {
						toks[i] = rng.Uint32()
					}
					got.cache(o.ids, o.hashes, o.numCached, to, toks, 2)
					want.cache(o.ids, o.hashes, o.numCached, to, slices.Clone(toks), 2)
					o.numCached = to
				default:
					if g, w := got.reset(), want.reset(); g != w {
						t.Fatalf("seed %d op %d: reset %v, want %v", seed, op, g, w)
					}
				}
				comparePools(t, op, got, want)
			}
		}
	}
}

// TestPoolFreeOrder pins the free queue order of vLLM's free_blocks: a
// request's blocks are freed tail first; hashed ones go to the tail of the
// queue, unhashed ones to its head.
func TestPoolFreeOrder(t *testing.T) {
	p := newPool(6, true)
	ids := p.alloc(4, nil) // 0 1 2 3; queue: 4 5
	hs := []prefix.Hash{{Lo: 10}, {Lo: 11}}
	p.cache(ids, hs, 0, 2, make([]uint32, 2), 1)
	p.free(ids)
	// 3 and 2 are unhashed: head, in freeing order. 1 then 0 go to the tail.
	if q, want := queueOrder(p), []int32{3, 2, 4, 5, 1, 0}; !slices.Equal(q, want) {
		t.Fatalf("queue %v, want %v", q, want)
	}
	ev := p.takeEvents()
	st := ev[0].(*kvevent.BlockStored)
	if len(ev) != 1 || !slices.Equal(st.BlockHashes, []uint64{10, 11}) || st.ParentBlockHash != nil || st.Medium != "GPU" {
		t.Fatalf("events %s", fmtEvents(ev))
	}
	// Allocating 5 blocks evicts block 1 (hash 11) only.
	p.alloc(5, nil)
	ev = p.takeEvents()
	if len(ev) != 1 || !reflect.DeepEqual(ev[0], &kvevent.BlockRemoved{BlockHashes: []uint64{11}, Medium: "GPU"}) {
		t.Fatalf("events %s", fmtEvents(ev))
	}
	if id, ok := p.lookup(hs[0]); !ok || id != 0 {
		t.Fatalf("lookup = %d, %v; want block 0", id, ok)
	}
	if p.reset() {
		t.Fatal("reset succeeded with blocks in use")
	}
}

// TestDeque checks the waiting queue's ring buffer against a slice.
func TestDeque(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var q deque
	var want []*seq
	for op := range 5000 {
		switch k := rng.IntN(10); {
		case k < 4:
			s := &seq{}
			q.pushBack(s)
			want = append(want, s)
		case k < 6:
			s := &seq{}
			q.pushFront(s)
			want = append([]*seq{s}, want...)
		case k < 8:
			if len(want) > 0 {
				if s := q.popFront(); s != want[0] {
					t.Fatalf("op %d: popFront mismatch", op)
				}
				want = want[1:]
			}
		default:
			if len(want) > 0 {
				i := rng.IntN(len(want))
				if !q.remove(want[i]) {
					t.Fatalf("op %d: remove failed", op)
				}
				want = slices.Delete(want, i, i+1)
			}
		}
		if q.len() != len(want) {
			t.Fatalf("op %d: len %d, want %d", op, q.len(), len(want))
		}
		for i, s := range want {
			if q.at(i) != s {
				t.Fatalf("op %d: at(%d) mismatch", op, i)
			}
		}
	}
}

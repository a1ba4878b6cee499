package kvindex

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"

	"github.com/inferrail/inferrail/model/prefix"
)

// naive is the reference model: a slice in recency order (most recent first)
// and, per block, the Record that inserted it while no later Record touched it.
type naive struct {
	order []prefix.Hash
	owner map[prefix.Hash]int // attempt that inserted it; -1 once touched since
	cap   int
}

func newNaive(capacity int) *naive {
	return &naive{owner: map[prefix.Hash]int{}, cap: max(capacity, 0)}
}

func (n *naive) present(h prefix.Hash) bool { return slices.Contains(n.order, h) }

// record returns how many blocks it inserted.
func (n *naive) record(chain []prefix.Hash, attempt int) int {
	chain = chain[:min(len(chain), n.cap)]
	inserted := 0
	for _, h := range chain {
		if n.present(h) {
			n.owner[h] = -1
		} else {
			n.owner[h] = attempt
			inserted++
		}
	}
	order := slices.Clone(chain)
	for _, h := range n.order {
		if !slices.Contains(chain, h) {
			order = append(order, h)
		}
	}
	n.order = order
	n.truncate()
	return inserted
}

func (n *naive) truncate() {
	for len(n.order) > n.cap {
		h := n.order[len(n.order)-1]
		n.order = n.order[:len(n.order)-1]
		delete(n.owner, h)
	}
}

func (n *naive) takeBack(attempt int) int {
	removed := 0
	n.order = slices.DeleteFunc(n.order, func(h prefix.Hash) bool {
		if n.owner[h] == attempt {
			delete(n.owner, h)
			removed++
			return true
		}
		return false
	})
	return removed
}

func (n *naive) clear() { n.order = nil; clear(n.owner) }

func (n *naive) remove(h prefix.Hash) bool {
	i := slices.Index(n.order, h)
	if i < 0 {
		return false
	}
	n.order = slices.Delete(n.order, i, i+1)
	delete(n.owner, h)
	return true
}

func (n *naive) setCapacity(c int) { n.cap = max(c, 0); n.truncate() }

func (n *naive) lookup(chain []prefix.Hash) int {
	for i, h := range chain {
		if !n.present(h) {
			return i
		}
	}
	return len(chain)
}

// tree generates block chains that share prefixes, as real prompts do.
type tree struct {
	hasher   prefix.Hasher
	roots    []prefix.Hash
	children map[prefix.Hash][]prefix.Hash
	parent   map[prefix.Hash]prefix.Hash // absent for a chain's first block
	next     uint32
	// fresh, when set, makes new block hashes in place of the hasher.
	fresh func() prefix.Hash
}

func newTree() *tree {
	return &tree{
		roots:    []prefix.Hash{prefix.Root("m", "", ""), prefix.Root("m", "lora", ""), prefix.Root("n", "", "")},
		children: map[prefix.Hash][]prefix.Hash{},
		parent:   map[prefix.Hash]prefix.Hash{},
	}
}

// hashing says how the tree makes its block hashes.
type hashing int

const (
	// chained hashes as prefix.Hasher makes them.
	chained hashing = iota
	// sameLo gives every block one of three Lo values under a unique Hi:
	// whatever the table's size or seed, the blocks sharing a Lo share home
	// slot and tag, so probes run long and every tag matches a wrong block.
	sameLo
	// wrapping searches for hashes whose home, in the table the index has
	// when the block is made, is one of its last two slots or its first:
	// probe runs wrap around the table's end and mix homes.
	wrapping
)

// chain walks down from a random root for up to maxLen blocks, following an
// existing child most of the time.
func (t *tree) chain(r intner, maxLen int) []prefix.Hash {
	at := t.roots[r.IntN(len(t.roots))]
	n := r.IntN(maxLen + 1)
	out := make([]prefix.Hash, 0, n)
	for range n {
		kids := t.children[at]
		var h prefix.Hash
		if len(kids) > 0 && r.IntN(4) != 0 {
			h = kids[r.IntN(len(kids))]
		} else {
			t.next++
			if t.fresh != nil {
				h = t.fresh()
			} else {
				h = t.hasher.Next(at, []uint32{t.next})
			}
			t.children[at] = append(t.children[at], h)
			if len(out) > 0 {
				t.parent[h] = at
			}
		}
		out = append(out, h)
		at = h
	}
	return out
}

type intner interface{ IntN(n int) int }

// bytesIntn draws choices from fuzz input, then zeros.
type bytesIntn struct{ b []byte }

func (s *bytesIntn) IntN(n int) int {
	if len(s.b) == 0 {
		return 0
	}
	v := int(s.b[0])
	s.b = s.b[1:]
	return v % n
}

// order lists x's blocks, most recent first, checking the list, the free
// list and the table against each other.
func (x *Index) order(t *testing.T) []prefix.Hash {
	t.Helper()
	var out []prefix.Hash
	prev := int32(0)
	for j := x.nodes[0].next; j != 0; j = x.nodes[j].next {
		if x.nodes[j].prev != prev {
			t.Fatalf("node %d: prev %d, want %d", j, x.nodes[j].prev, prev)
		}
		if x.find(x.nodes[j].h) != j {
			t.Fatalf("node %d not found in the table", j)
		}
		out = append(out, x.nodes[j].h)
		prev = j
		if len(out) > len(x.nodes) {
			t.Fatal("cycle in the list")
		}
	}
	if x.nodes[0].prev != prev {
		t.Fatalf("sentinel prev %d, want %d", x.nodes[0].prev, prev)
	}
	free := 0
	for j := x.free; j != 0; j = x.nodes[j].next {
		free++
	}
	used := x.table(t)
	if len(out) != x.n || used != x.n || 1+x.n+free != len(x.nodes) {
		t.Fatalf("list %d, n %d, table %d, free %d, nodes %d", len(out), x.n, used, free, len(x.nodes))
	}
	if cap(x.nodes) <= x.cap || len(x.slots) <= x.cap {
		t.Fatalf("capacity %d: %d nodes, %d slots", x.cap, cap(x.nodes), len(x.slots))
	}
	return out
}

// table checks the table's slots and returns how many are used: each names a
// distinct entry in use, carries its tag, and lies at the end of an unbroken
// run from its home slot, so that a probe reaches it.
func (x *Index) table(t *testing.T) int {
	t.Helper()
	used := 0
	seen := make(map[int32]bool)
	for i, s := range x.slots {
		if s == 0 {
			continue
		}
		used++
		j := int32(s & x.mask)
		if j <= 0 || int(j) >= len(x.nodes) || seen[j] {
			t.Fatalf("slot %d: entry %d out of range or seen twice", i, j)
		}
		seen[j] = true
		k := x.key(x.nodes[j].h)
		if s&^x.mask != uint32(k)&^x.mask {
			t.Fatalf("slot %d: tag %#x, want %#x", i, s&^x.mask, uint32(k)&^x.mask)
		}
		for p := x.home(k); p != i; p = (p + 1) % len(x.slots) {
			if x.slots[p] == 0 {
				t.Fatalf("slot %d: empty slot %d between it and its home %d", i, p, x.home(k))
			}
		}
	}
	return used
}

type attempt struct {
	id int
	r  Receipt
}

// shape bounds what run generates.
type shape struct {
	maxCap   int // capacities are drawn up to this, and a little past it
	maxChain int // chain lengths are drawn up to this
	hashing  hashing
}

var shapes = []struct {
	name  string
	seeds uint64 // for TestAgainstNaive
	shape
}{
	{"chained", 150, shape{40, 12, chained}},
	// Chains longer than the capacity: most blocks are evicted soon.
	{"evicting", 150, shape{8, 20, chained}},
	{"sameLo", 150, shape{40, 12, sameLo}},
	{"sameLo-evicting", 150, shape{8, 20, sameLo}},
	{"wrapping", 150, shape{40, 12, wrapping}},
	// A larger table, so that runs from different homes merge.
	{"large", 30, shape{300, 40, chained}},
}

// run applies a random sequence of operations to an Index and the naive model
// and checks after each that they agree and that the index is prefix-closed,
// with every parent more recent than its children.
func run(t *testing.T, r intner, steps int, sh shape) {
	t.Helper()
	capacity := 1 + r.IntN(sh.maxCap)
	x, ref, tr := New(capacity), newNaive(capacity), newTree()
	var made uint64
	switch sh.hashing {
	case sameLo:
		tr.fresh = func() prefix.Hash {
			made++
			return prefix.Hash{Hi: made, Lo: made % 3}
		}
	case wrapping:
		tr.fresh = func() prefix.Hash {
			for {
				made++
				h := prefix.Hash{Hi: made, Lo: made * 0x9e3779b97f4a7c15}
				if i := x.home(x.key(h)); i == 0 || i >= len(x.slots)-2 {
					return h
				}
			}
		}
	}
	var open []attempt
	ids := 0
	for step := range steps {
		var op string
		switch k := r.IntN(100); {
		case k < 55:
			op = "record"
			c := tr.chain(r, sh.maxChain)
			ids++
			rc := x.Record(c)
			want := ref.record(c, ids)
			if rc.Inserted() != want {
				t.Fatalf("step %d: record inserted %d, want %d", step, rc.Inserted(), want)
			}
			open = append(open, attempt{ids, rc})
		case k < 80:
			op = "takeback"
			if len(open) == 0 {
				continue
			}
			i := r.IntN(len(open))
			a := open[i]
			// Now and then take back the same receipt twice.
			if r.IntN(5) != 0 {
				open = slices.Delete(open, i, i+1)
			}
			got, want := x.TakeBack(a.r), ref.takeBack(a.id)
			if got != want {
				t.Fatalf("step %d: takeback removed %d, want %d", step, got, want)
			}
		case k < 83:
			op = "clear"
			x.Clear()
			ref.clear()
		case k < 87:
			// An engine's eviction: a block no present block descends from,
			// or now and then one that is absent.
			op = "remove"
			leaf := func(h prefix.Hash) bool {
				return !slices.ContainsFunc(ref.order, func(c prefix.Hash) bool { p, ok := tr.parent[c]; return ok && p == h })
			}
			var h prefix.Hash
			if c := tr.chain(r, sh.maxChain); len(c) > 0 && leaf(c[len(c)-1]) {
				h = c[len(c)-1]
			}
			if leaves := slices.DeleteFunc(slices.Clone(ref.order), func(h prefix.Hash) bool { return !leaf(h) }); len(leaves) > 0 && r.IntN(4) != 0 {
				h = leaves[r.IntN(len(leaves))]
			}
			if got, want := x.Remove(h), ref.remove(h); got != want {
				t.Fatalf("step %d: remove %v, want %v", step, got, want)
			}
		case k < 92:
			op = "capacity"
			c := r.IntN(sh.maxCap + 5)
			x.SetCapacity(c)
			ref.setCapacity(c)
		default:
			op = "lookup"
		}
		got := x.order(t)
		if !slices.Equal(got, ref.order) {
			t.Fatalf("step %d after %s: order\n%v\nwant\n%v", step, op, got, ref.order)
		}
		if x.Len() > x.Capacity() {
			t.Fatalf("step %d: len %d over capacity %d", step, x.Len(), x.Capacity())
		}
		pos := make(map[prefix.Hash]int, len(got))
		for i, h := range got {
			pos[h] = i
		}
		for i, h := range got {
			if p, ok := tr.parent[h]; ok {
				pp, ok := pos[p]
				if !ok {
					t.Fatalf("step %d after %s: block present without its parent", step, op)
				}
				if pp >= i {
					t.Fatalf("step %d after %s: parent at %d less recent than child at %d", step, op, pp, i)
				}
			}
		}
		for range 3 {
			c := tr.chain(r, sh.maxChain+2)
			if g, w := x.Lookup(c), ref.lookup(c); g != w {
				t.Fatalf("step %d: lookup %d, want %d", step, g, w)
			}
			bs := 1 + r.IntN(4)
			tokens := len(c)*bs + r.IntN(bs+1) - r.IntN(2)
			hit := min(ref.lookup(c), max(tokens-1, 0)/bs)
			if g := x.Predict(c, tokens, bs); g != hit*bs {
				t.Fatalf("step %d: predict(%d blocks, %d tokens, bs %d) %d, want %d", step, len(c), tokens, bs, g, hit*bs)
			}
		}
	}
}

func TestAgainstNaive(t *testing.T) {
	for _, sh := range shapes {
		t.Run(sh.name, func(t *testing.T) {
			for seed := range sh.seeds {
				t.Run(fmt.Sprint(seed), func(t *testing.T) {
					run(t, rand.New(rand.NewPCG(seed, 7)), 300, sh.shape)
				})
			}
		})
	}
}

// FuzzAgainstNaive draws the shape from the first byte and every choice of
// run from the rest.
func FuzzAgainstNaive(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 3, 0, 0, 5, 1, 2, 3, 4, 60, 0, 10, 10, 85, 1, 81, 0})
	f.Add([]byte{3, 3, 0, 0, 5, 1, 2, 3, 4, 60, 0, 10, 10, 85, 1, 81, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		r := &bytesIntn{b}
		run(t, r, len(b)/2+1, shapes[r.IntN(len(shapes))].shape)
	})
}

func hashes(n int) []prefix.Hash { return chainOf("m", n) }

// chainOf is a chain of n blocks under model's root.
func chainOf(model string, n int) []prefix.Hash {
	var h prefix.Hasher
	c := make([]prefix.Hash, n)
	at := prefix.Root(model, "", "")
	for i := range c {
		at = h.Next(at, []uint32{uint32(i)})
		c[i] = at
	}
	return c
}

func TestPredict(t *testing.T) {
	c := hashes(4)
	x := New(100)
	x.Record(c[:3]) // blocks 0..2 present, 3 absent
	for _, tc := range []struct {
		name               string
		blocks, tokens, bs int
		want               int
	}{
		{"no blocks, no tokens", 0, 0, 16, 0},
		{"partial block only", 0, 15, 16, 0},
		{"one full block, fully cached", 1, 16, 16, 0},
		{"one full block plus one token", 1, 17, 16, 16},
		{"two blocks, fully cached multiple", 2, 32, 16, 16},
		{"two blocks plus one token", 2, 33, 16, 32},
		{"two blocks plus partial", 2, 40, 16, 32},
		{"two blocks, one short of the third", 2, 47, 16, 32},
		{"three cached, fully cached multiple", 3, 48, 16, 32},
		{"three cached plus partial", 3, 50, 16, 48},
		{"fourth block absent", 4, 64, 16, 48},
		{"fourth block absent plus partial", 4, 70, 16, 48},
		{"more hashes than tokens cover", 3, 20, 16, 16},
		{"fewer hashes than tokens cover", 2, 100, 16, 32},
		{"block size 1", 3, 3, 1, 2},
		{"zero block size", 3, 48, 0, 0},
		{"negative tokens", 3, -1, 16, 0},
	} {
		if got := x.Predict(c[:tc.blocks], tc.tokens, tc.bs); got != tc.want {
			t.Errorf("%s: Predict(%d blocks, %d tokens, bs %d) = %d, want %d", tc.name, tc.blocks, tc.tokens, tc.bs, got, tc.want)
		}
	}
	if got := New(100).Predict(c, 100, 16); got != 0 {
		t.Errorf("empty index predicts %d", got)
	}
}

func TestTakeBack(t *testing.T) {
	c := hashes(6)
	a, b := c[:2], c[:4]
	f := func(name string, x *Index, want []prefix.Hash) {
		t.Helper()
		if got := x.order(t); !slices.Equal(got, want) {
			t.Fatalf("%s: order %v, want %v", name, got, want)
		}
	}

	// Only what the attempt inserted goes; the present prefix stays and keeps
	// the recency the attempt gave it.
	x := New(10)
	other := chainOf("other", 1)
	x.Record(a)
	x.Record(other)
	r := x.Record(b)
	if r.Inserted() != 2 {
		t.Fatalf("inserted %d, want 2", r.Inserted())
	}
	if n := x.TakeBack(r); n != 2 {
		t.Fatalf("took back %d, want 2", n)
	}
	f("prefix stays", x, []prefix.Hash{c[0], c[1], other[0]})
	if n := x.TakeBack(r); n != 0 {
		t.Fatalf("second take back removed %d", n)
	}

	// A block a later attempt touched stays; untouched ones go.
	x = New(10)
	r = x.Record(c[:3])
	x.Record(c[:2])
	if n := x.TakeBack(r); n != 1 {
		t.Fatalf("took back %d, want 1", n)
	}
	f("touched stays", x, []prefix.Hash{c[0], c[1]})

	// A block evicted and inserted again since is not the attempt's.
	x = New(2)
	r = x.Record(c[:2])
	x.Record(chainOf("other", 2))
	x.Record(c[:2])
	if n := x.TakeBack(r); n != 0 {
		t.Fatalf("took back %d after re-insert", n)
	}

	// Clear, another index's receipt and the zero receipt take back nothing.
	x = New(10)
	r = x.Record(c[:2])
	x.Clear()
	x.Record(c[:2])
	if n := x.TakeBack(r); n != 0 {
		t.Fatalf("took back %d across Clear", n)
	}
	y := New(10)
	y.Record(c[:2])
	if n := y.TakeBack(x.Record(c[:3])); n != 0 {
		t.Fatalf("took back %d with another index's receipt", n)
	}
	if n := y.TakeBack(Receipt{}); n != 0 {
		t.Fatalf("zero receipt took back %d", n)
	}
	if n := x.TakeBack(x.Record(c[:2])); n != 0 {
		t.Fatalf("took back %d of a record that inserted nothing", n)
	}
}

func TestCapacity(t *testing.T) {
	c := hashes(8)
	x := New(0)
	if r := x.Record(c); r.Inserted() != 0 || x.Len() != 0 {
		t.Fatal("capacity 0 recorded blocks")
	}
	x.SetCapacity(3)
	x.Record(c) // only the first 3 blocks fit
	if x.Lookup(c) != 3 || x.Len() != 3 {
		t.Fatalf("lookup %d len %d, want 3", x.Lookup(c), x.Len())
	}
	x.SetCapacity(1)
	if x.Lookup(c) != 1 {
		t.Fatalf("shrink kept %d blocks, want the first", x.Lookup(c))
	}
	// Shrinking far releases memory.
	big := hashes(5000)
	x.SetCapacity(5000)
	x.Record(big)
	before := x.Bytes()
	x.SetCapacity(100)
	x.order(t)
	if x.Lookup(big) != 100 || x.Bytes() >= before/4 {
		t.Fatalf("lookup %d, bytes %d from %d", x.Lookup(big), x.Bytes(), before)
	}
	x.Record(big[:200])
	x.order(t)
	if x.Lookup(big) != 100 {
		t.Fatalf("after compaction lookup %d", x.Lookup(big))
	}

	// Growing keeps the blocks, their order and what receipts take back;
	// setting the same capacity again reallocates nothing.
	x = New(4)
	x.Record(chainOf("other", 1))
	r := x.Record(c[:3])
	want := x.order(t)
	x.SetCapacity(1000)
	if got := x.order(t); !slices.Equal(got, want) {
		t.Fatalf("after growing: order %v, want %v", got, want)
	}
	if n := testing.AllocsPerRun(10, func() { x.SetCapacity(1000) }); n != 0 {
		t.Errorf("same capacity: %v allocs", n)
	}
	if n := x.TakeBack(r); n != 3 || x.Len() != 1 {
		t.Fatalf("after growing: took back %d, len %d", n, x.Len())
	}
}

func TestAllocs(t *testing.T) {
	c := hashes(512)
	x := New(1 << 14)
	x.Record(c)
	if n := testing.AllocsPerRun(100, func() { x.Lookup(c) }); n != 0 {
		t.Errorf("Lookup: %v allocs", n)
	}
	if n := testing.AllocsPerRun(100, func() { x.Predict(c, 512*16, 16) }); n != 0 {
		t.Errorf("Predict: %v allocs", n)
	}
	if n := testing.AllocsPerRun(100, func() { x.Record(c) }); n != 0 {
		t.Errorf("Record of present blocks: %v allocs", n)
	}
	// Steady churn at capacity: new blocks evict old ones.
	chains := make([][]prefix.Hash, 64)
	for i := range chains {
		chains[i] = chainOf(fmt.Sprint(i), 512)
	}
	for range 3 {
		for _, ch := range chains {
			x.TakeBack(x.Record(ch))
			x.Record(ch)
		}
	}
	i := 0
	if n := testing.AllocsPerRun(200, func() {
		x.Record(chains[i%len(chains)])
		i++
	}); n != 0 {
		t.Errorf("Record under churn: %v allocs", n)
	}
	if n := testing.AllocsPerRun(100, func() {
		x.TakeBack(x.Record(chains[i%len(chains)]))
		i++
	}); n != 0 {
		t.Errorf("Record and TakeBack under churn: %v allocs", n)
	}
	if n := testing.AllocsPerRun(10, func() { x.Clear(); x.SetCapacity(1 << 14) }); n != 0 {
		t.Errorf("Clear: %v allocs", n)
	}
}

// TestArbitraryHashes feeds sequences that are not chains (repeated and
// unrelated hashes): predictions may be off, but the index must stay
// consistent and within capacity.
func TestArbitraryHashes(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	x := New(8)
	var open []Receipt
	for range 5000 {
		c := make([]prefix.Hash, rng.IntN(12))
		for i := range c {
			c[i] = prefix.Hash{Lo: uint64(rng.IntN(16)) + 1}
		}
		switch rng.IntN(10) {
		case 0:
			x.SetCapacity(rng.IntN(12))
		case 1, 2, 3:
			if len(open) > 0 {
				x.TakeBack(open[rng.IntN(len(open))])
			}
		default:
			r := x.Record(c)
			open = append(open, r)
			if l := x.Lookup(c); l > len(c) {
				t.Fatalf("lookup %d of %d", l, len(c))
			}
		}
		if got := x.order(t); len(got) > x.Capacity() {
			t.Fatalf("len %d over capacity %d", len(got), x.Capacity())
		}
	}
}

// gc collects until the heap holds only what is reachable: a first cycle only
// moves sync.Pool contents (fmt's, the testing package's) to the victim cache,
// and a second frees them.
func gc() {
	runtime.GC()
	runtime.GC()
}

// TestBytes checks that Bytes is the heap an Index holds, and that it meets
// the memory target of 64 bytes a block for a replica's share of a million
// blocks over 64 replicas.
func TestBytes(t *testing.T) {
	capacities := []int{0, 1, 7, 100, 1000, 15625, 100_000}
	xs := make([]*Index, len(capacities))
	var before, after runtime.MemStats
	gc()
	runtime.ReadMemStats(&before)
	for i, c := range capacities {
		xs[i] = New(c)
	}
	// Filling them allocates nothing that stays.
	for i, x := range xs {
		for c := 0; x.Len() < x.Capacity(); c++ {
			x.Record(chainOf(fmt.Sprint(i, "/", c), 512))
		}
	}
	gc()
	runtime.ReadMemStats(&after)
	heap := int64(after.HeapAlloc - before.HeapAlloc)
	var bytes int64
	for _, x := range xs {
		bytes += x.Bytes()
	}
	// Within 0.5%: the Index struct itself goes in a size class a little
	// larger than it, and the runtime allocates a few KB of its own now and
	// then.
	if d := heap - bytes; d < -bytes/200 || d > bytes/200 {
		t.Errorf("Bytes %d, heap held %d", bytes, heap)
	}
	if x := New(15625); x.Bytes() > 15625*64 {
		t.Errorf("15,625 blocks: %.1f bytes a block", float64(x.Bytes())/15625)
	}
	runtime.KeepAlive(xs)
}

// All yields every block, least recent first: a chain's last block before
// its first.
func TestAll(t *testing.T) {
	x := New(10)
	var h prefix.Hasher
	a := h.Chain(nil, prefix.Root("m", "", ""), []uint32{1, 2, 3, 4, 5, 6}, 2)
	b := h.Chain(nil, prefix.Root("m", "", ""), []uint32{9, 9}, 2)
	x.Record(a)
	x.Record(b)
	var got []prefix.Hash
	for blk := range x.All() {
		got = append(got, blk)
	}
	want := []prefix.Hash{a[2], a[1], a[0], b[0]}
	if !slices.Equal(got, want) {
		t.Fatalf("All = %v, want %v", got, want)
	}
	for range x.All() {
		break // stopping early is allowed
	}
}

// A chain recorded again keeps the order and TakeBack rules of any Record,
// whether its present blocks are the most recent already (the walk from
// the front) or only some of them are (the moves): the list, most recent
// first, is what each Record says.
func TestRecordAgain(t *testing.T) {
	a, b := chainOf("a", 6), chainOf("b", 3)
	order := func(x *Index) []prefix.Hash {
		var got []prefix.Hash
		for h := range x.All() {
			got = append([]prefix.Hash{h}, got...) // most recent first
		}
		return got
	}
	f := func(name string, x *Index, want ...[]prefix.Hash) {
		t.Helper()
		w := slices.Concat(want...)
		if got := order(x); !slices.Equal(got, w) {
			t.Fatalf("%s: %d blocks in the wrong order", name, len(got))
		}
	}
	x := New(16)
	x.Record(a[:4])
	if r := x.Record(a[:4]); r.Inserted() != 0 {
		t.Fatalf("present again: %d inserted", r.Inserted())
	}
	f("present again", x, a[:4])
	r := x.Record(a) // the 4 at the front, then 2 new behind them
	f("extended", x, a)
	x.Record(a) // all at the front: touched by the walk alone
	if n := x.TakeBack(r); n != 0 {
		t.Fatalf("took back %d blocks the Record again touched", n)
	}
	f("again", x, a)
	x.Record(b)
	f("other chain", x, b, a)
	x.Record(a[:2])
	f("prefix moved", x, a[:2], b, a[2:])
	x.Record(a) // the front holds a[:2] only: a[2:] moves behind them
	f("rest moved", x, a, b)
	r = x.Record(chainOf("a", 8))
	if n := x.TakeBack(r); n != 2 {
		t.Fatalf("took back %d blocks, want the 2 new ones", n)
	}
	f("after take-back", x, a, b)
}

package kvindex

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/inferrail/inferrail/model/prefix"
)

// filled returns an index of entries blocks made of 512-block chains, and the
// chains.
func filled(entries int) (*Index, [][]prefix.Hash) {
	x := New(entries)
	chains := make([][]prefix.Hash, entries/512)
	for i := range chains {
		chains[i] = chainOf(fmt.Sprint(i), 512)
		x.Record(chains[i])
	}
	return x, chains
}

// BenchmarkLookup looks up a 512-block chain that is fully present, half
// present or absent. heapB/entry is the heap the filled index holds per block;
// estB/entry is what Bytes reports.
func BenchmarkLookup(b *testing.B) {
	for _, entries := range []int{16 << 10, 1 << 20} {
		var before, after runtime.MemStats
		gc()
		runtime.ReadMemStats(&before)
		x, chains := filled(entries)
		// Keep chains out of the measurement: only the index counts.
		keep := chains[len(chains)/2]
		chains = nil
		gc()
		runtime.ReadMemStats(&after)
		heap := float64(after.HeapAlloc-before.HeapAlloc) - float64(len(keep))*16
		half := append(append([]prefix.Hash(nil), keep[:256]...), chainOf("absent", 256)...)
		miss := chainOf("absent", 512)
		for _, tc := range []struct {
			name  string
			chain []prefix.Hash
		}{{"hit", keep}, {"half", half}, {"miss", miss}} {
			b.Run(fmt.Sprintf("entries=%d/%s", entries, tc.name), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					x.Lookup(tc.chain)
				}
				b.ReportMetric(heap/float64(x.Len()), "heapB/entry")
				b.ReportMetric(float64(x.Bytes())/float64(x.Len()), "estB/entry")
			})
		}
		// Every lookup on another chain, so that the probes miss the CPU cache
		// as they would across many prompts: present chains, and absent ones
		// (most replicas a prompt is priced on lack it). chains was dropped
		// above to measure the heap; rebuild the chain list from the roots.
		all := make([][]prefix.Hash, min(entries/512, 256))
		absent := make([][]prefix.Hash, 256)
		for i := range all {
			all[i] = chainOf(fmt.Sprint(i*(entries/512)/len(all)), 512)
		}
		for i := range absent {
			absent[i] = chainOf(fmt.Sprint("absent", i), 512)
		}
		for _, tc := range []struct {
			name   string
			chains [][]prefix.Hash
			want   int
		}{{"hit-rotating", all, 512}, {"miss-rotating", absent, 0}} {
			b.Run(fmt.Sprintf("entries=%d/%s", entries, tc.name), func(b *testing.B) {
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					if x.Lookup(tc.chains[i%len(tc.chains)]) != tc.want {
						b.Fatal("wrong lookup")
					}
					i++
				}
			})
		}
		runtime.KeepAlive(x)
	}
}

// BenchmarkRecord records a 512-block chain: all present (touches only), or all
// new at capacity (512 insertions and 512 evictions), or new and taken back.
func BenchmarkRecord(b *testing.B) {
	const entries = 16 << 10
	x, chains := filled(entries)
	b.Run("present", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			x.Record(chains[0])
		}
		perBlock(b, 512)
	})
	// Twice as many chains as fit: each Record finds its chain evicted.
	more := make([][]prefix.Hash, 2*len(chains))
	for i := range more {
		more[i] = chainOf(fmt.Sprint("more", i), 512)
	}
	b.Run("new", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			x.Record(more[i%len(more)])
			i++
		}
		perBlock(b, 512)
	})
	b.Run("new+takeback", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			x.TakeBack(x.Record(more[i%len(more)]))
			i++
		}
		perBlock(b, 512)
	})
}

// perBlock reports the time per block of an op on blocks blocks.
func perBlock(b *testing.B, blocks int) {
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(blocks), "ns/block")
}

// BenchmarkMemory1M holds a million blocks as a router does for 64 replicas:
// 64 indexes of 15,625 blocks, all full (the index's memory target is 64
// bytes a block). B/block is the heap they hold per block, from HeapAlloc
// after GC; Bytes/block is what Bytes reports. Each op looks up a 512-block
// chain, all present, in the next index, so that probes go to memory as they
// do when one prompt is priced on every replica.
func BenchmarkMemory1M(b *testing.B) {
	const replicas, capacity, chain = 64, 15625, 512
	// Allocated before the measurement: the chains looked up, and the slice of
	// indexes.
	last := make([][]prefix.Hash, replicas)
	for i := range last {
		last[i] = chainOf(fmt.Sprint("last", i), chain)
	}
	xs := make([]*Index, replicas)
	var before, after runtime.MemStats
	gc()
	runtime.ReadMemStats(&before)
	for i := range xs {
		xs[i] = New(capacity)
		for c := 0; xs[i].Len() < capacity; c++ {
			xs[i].Record(chainOf(fmt.Sprint(i, "/", c), chain))
		}
		xs[i].Record(last[i])
	}
	gc()
	runtime.ReadMemStats(&after)
	heap := float64(after.HeapAlloc - before.HeapAlloc)
	var blocks, bytes int64
	for _, x := range xs {
		blocks += int64(x.Len())
		bytes += x.Bytes()
	}
	if blocks != replicas*capacity {
		b.Fatalf("%d blocks, want %d", blocks, replicas*capacity)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if xs[i%replicas].Lookup(last[i%replicas]) != chain {
			b.Fatal("chain not present")
		}
		i++
	}
	b.ReportMetric(heap/float64(blocks), "B/block")
	b.ReportMetric(float64(bytes)/float64(blocks), "Bytes/block")
}

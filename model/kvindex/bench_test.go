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
		runtime.GC()
		runtime.ReadMemStats(&before)
		x, chains := filled(entries)
		// Keep chains out of the measurement: only the index counts.
		keep := chains[len(chains)/2]
		chains = nil
		runtime.GC()
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
		// as they would across many prompts. chains was dropped above to
		// measure the heap; rebuild the chain list from the roots.
		all := make([][]prefix.Hash, min(entries/512, 256))
		for i := range all {
			all[i] = chainOf(fmt.Sprint(i*(entries/512)/len(all)), 512)
		}
		b.Run(fmt.Sprintf("entries=%d/hit-rotating", entries), func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if x.Lookup(all[i%len(all)]) != 512 {
					b.Fatal("chain not present")
				}
				i++
			}
		})
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
	})
	b.Run("new+takeback", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			x.TakeBack(x.Record(more[i%len(more)]))
			i++
		}
	})
}

package requestlog

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/inferrail/inferrail/model/prefix"
)

// realistic returns the chained engine-block hashes (16 tokens each) of n
// prompts of 12,000 tokens: each starts with one of 50 system prompts of
// 4,096 tokens and goes on with a conversation of its own, one in four
// repeating the one before it with more turns (so shares 8,192 tokens
// with it). Each has 24 request-log blocks of 512.
func realistic(n int) [][]prefix.Hash {
	const tokens, engine = 12000, 16
	var h prefix.Hasher
	root := prefix.Root("inferrail/sim-8b", "", "")
	system := make([][]prefix.Hash, 50)
	for i := range system {
		parent := root
		for j := range 4096 / engine {
			parent = h.Next(parent, []uint32{uint32(i), uint32(j)})
			system[i] = append(system[i], parent)
		}
	}
	out := make([][]prefix.Hash, n)
	for i := range out {
		base := system[i%len(system)]
		if i%4 == 1 {
			base = out[i-1][:8192/engine]
		}
		p := append(make([]prefix.Hash, 0, tokens/engine), base...)
		parent := p[len(p)-1]
		for len(p) < tokens/engine {
			parent = h.Next(parent, []uint32{uint32(i), uint32(len(p)), 7})
			p = append(p, parent)
		}
		out[i] = p
	}
	return out
}

var replicas = []string{"r0", "r1", "r2", "r3", "r4", "r5", "r6", "r7"}

func realisticEntry(i int, t0 time.Time) Entry {
	return Entry{Arrival: t0.Add(time.Duration(i) * 7 * time.Millisecond), Model: "inferrail/sim-8b",
		Session: uint64(i/4+1) * 0x9e3779b97f4a7c15, InputLength: 12000, OutputLength: 300, Policy: "cost_model",
		Replica: replicas[i%len(replicas)], Status: 200, Predicted: 4096, HasPredicted: true, Cached: 4096, HasCached: true,
		FirstByte: 123456 * time.Microsecond, End: 4567891 * time.Microsecond}
}

// BenchmarkRequestLogEnqueue is what a request pays on its path: Log with
// a 12,000-token prompt (750 engine blocks, 24 identities copied), the
// writer draining to /dev/null on its own goroutine meanwhile. queued: the
// queue has room (the clock stops every 1,024 records until the writer has
// caught up); full: records come faster than the writer takes them, and
// dropped/op of them find no room and are dropped, for less.
func BenchmarkRequestLogEnqueue(b *testing.B) {
	for _, full := range []bool{false, true} {
		name := "queued"
		if full {
			name = "full"
		}
		b.Run(name, func(b *testing.B) {
			set := metrics.NewSet()
			w, err := Open(Options{Path: os.DevNull, SampleRate: 1, BlockSize: 512}, set)
			if err != nil {
				b.Fatal(err)
			}
			prompts := realistic(64)
			t0 := time.Now()
			entries := make([]Entry, len(prompts))
			for i := range entries {
				entries[i] = realisticEntry(i, t0)
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				k := i % len(prompts)
				w.Log(uint64(i), &entries[k], prompts[k], 16)
				i++
				if !full && i%1024 == 0 {
					b.StopTimer()
					for w.q.Len() > 0 {
						time.Sleep(100 * time.Microsecond)
					}
					b.StartTimer()
				}
			}
			b.StopTimer()
			w.Close()
			b.ReportMetric(float64(set.GetOrCreateCounter(recordsMetric+`{result="dropped"}`).Get())/float64(i), "dropped/op")
		})
	}
}

// BenchmarkRequestLogEncode is the writer goroutine's cost per record
// without the disk: numbering 24 identities and formatting the line.
func BenchmarkRequestLogEncode(b *testing.B) {
	w := &Writer{blockSize: 512}
	prompts := realistic(1024)
	t0 := time.Now()
	ids := make([]*[]uint64, len(prompts))
	for i, p := range prompts {
		ids[i] = w.identities(p, 12000, 16)
	}
	c := &encoder{blockSize: 512, maxIDs: MaxIDs}
	c.Reset()
	var buf []byte
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if i%len(prompts) == 0 {
			c.Reset() // the same prompts again would cost no new ids
		}
		e := realisticEntry(i, t0)
		e.ids = ids[i%len(prompts)]
		buf, _ = c.Append(buf[:0], e)
		i++
	}
	Sink = len(buf)
}

// Sink keeps benchmark results alive.
var Sink int

// BenchmarkRequestLogWrite writes 100,000 realistic requests through a
// Writer to a file, Put rather than Log so that none is dropped, and
// reports the bytes each record takes on disk and the writer's time per
// record (encoding and writing).
func BenchmarkRequestLogWrite(b *testing.B) {
	const n = 100_000
	prompts := realistic(n)
	t0 := time.Now()
	for b.Loop() {
		b.StopTimer()
		dir := b.TempDir()
		set := metrics.NewSet()
		w, err := Open(Options{Path: filepath.Join(dir, "requests.jsonl"), SampleRate: 1, BlockSize: 512, MaxFiles: 8}, set)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start := time.Now()
		for i := range n {
			e := realisticEntry(i, t0)
			e.ids = w.identities(prompts[i], e.InputLength, 16)
			if err := w.q.Put(b.Context(), e); err != nil {
				b.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			b.Fatal(err)
		}
		took := time.Since(start)
		b.StopTimer()
		var size int64
		files, _ := filepath.Glob(filepath.Join(dir, "requests.jsonl*"))
		for _, f := range files {
			st, _ := os.Stat(f)
			size += st.Size()
		}
		if got := set.GetOrCreateCounter(recordsMetric + `{result="written"}`).Get(); got != n {
			b.Fatalf("%d of %d written", got, n)
		}
		b.ReportMetric(float64(size)/n, "bytes/record")
		b.ReportMetric(float64(took.Nanoseconds())/n, "ns/record")
		b.ReportMetric(float64(len(files)), "files")
		// Each iteration writes about 48 MB: b.TempDir keeps every
		// iteration's until the benchmark ends, which a long -benchtime
		// grew to tens of gigabytes.
		if err := os.RemoveAll(dir); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

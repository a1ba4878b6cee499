package prefix

import (
	"encoding/binary"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/zeebo/xxh3"
)

func TestChainPrefixStable(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var h Hasher
	root := Root("m", "", "")
	for iter := 0; iter < 200; iter++ {
		n := rng.IntN(300)
		toks := make([]uint32, n)
		for i := range toks {
			toks[i] = rng.Uint32N(50)
		}
		full := h.Chain(nil, root, toks, 16)
		if len(full) != n/16 {
			t.Fatalf("len %d want %d", len(full), n/16)
		}
		// A prefix hashes the same alone as inside the longer prompt.
		cut := rng.IntN(n + 1)
		part := h.Chain(nil, root, toks[:cut], 16)
		for i := range part {
			if part[i] != full[i] {
				t.Fatalf("block %d differs between prefix and full prompt", i)
			}
		}
		// A changed token changes its block and every later one, never an earlier one.
		if n == 0 {
			continue
		}
		pos := rng.IntN(n)
		mut := append([]uint32(nil), toks...)
		mut[pos]++
		changed := h.Chain(nil, root, mut, 16)
		for i := range changed {
			same := changed[i] == full[i]
			if i < pos/16 && !same {
				t.Fatalf("block %d before the change at %d differs", i, pos)
			}
			if i >= pos/16 && same {
				t.Fatalf("block %d at or after the change at %d is unchanged", i, pos)
			}
		}
	}
}

func TestRootSalts(t *testing.T) {
	f := func(a, b [3]string) {
		t.Helper()
		if Root(a[0], a[1], a[2]) == Root(b[0], b[1], b[2]) {
			t.Fatalf("Root%v == Root%v", a, b)
		}
	}
	f([3]string{"m", "", ""}, [3]string{"n", "", ""})
	f([3]string{"m", "", ""}, [3]string{"m", "lora", ""})
	f([3]string{"m", "", ""}, [3]string{"m", "", "salt"})
	f([3]string{"ab", "", ""}, [3]string{"a", "b", ""})
	f([3]string{"m", "a", ""}, [3]string{"m", "", "a"})
}

// Sink keeps benchmark results alive.
var Sink []Hash

func BenchmarkChain(b *testing.B) {
	toks := make([]uint32, 8192)
	for i := range toks {
		toks[i] = uint32(i * 7)
	}
	var h Hasher
	root := Root("m", "", "")
	dst := make([]Hash, 0, 512)
	b.ReportAllocs()
	b.SetBytes(int64(len(toks) * 4))
	for b.Loop() {
		dst = h.Chain(dst[:0], root, toks, 16)
	}
	Sink = dst
}

// TestWordsMatchXXH3: the hash of a block is xxh3.Hash128 of the block's
// bytes (parent Hi, Lo, tokens, little-endian) for every length from 0 to
// 70 tokens and random contents: in place (2 to 28 tokens, even), through
// the buffer, and in Chain.
func TestWordsMatchXXH3(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	var h Hasher
	for n := 0; n <= 70; n++ {
		for range 200 {
			toks := make([]uint32, n)
			for i := range toks {
				toks[i] = rng.Uint32()
				if rng.IntN(4) == 0 {
					toks[i] = rng.Uint32N(300)
				}
			}
			parent := Hash{Hi: rng.Uint64(), Lo: rng.Uint64()}
			buf := binary.LittleEndian.AppendUint64(nil, parent.Hi)
			buf = binary.LittleEndian.AppendUint64(buf, parent.Lo)
			for _, tk := range toks {
				buf = binary.LittleEndian.AppendUint32(buf, tk)
			}
			u := xxh3.Hash128(buf)
			want := Hash{Hi: u.Hi, Lo: u.Lo}
			if got := h.nextBuf(parent, toks); got != want {
				t.Fatalf("%d tokens: nextBuf %v, xxh3 %v", n, got, want)
			}
			if got := h.Next(parent, toks); got != want {
				t.Fatalf("%d tokens: Next %v, xxh3 %v", n, got, want)
			}
			if n == 16 {
				if got := next16(parent, (*[16]uint32)(toks)); got != want {
					t.Fatalf("next16 %v, xxh3 %v", got, want)
				}
			}
			if n > 0 {
				chain := h.Chain(nil, parent, toks, n)
				if len(chain) != 1 || chain[0] != want {
					t.Fatalf("%d tokens: Chain %v, xxh3 %v", n, chain, want)
				}
			}
		}
	}
}

// BenchmarkBlock is the cost of one block of 16 tokens in a chain, in
// ns/block, for the in-place hash (words) and through a buffer (buf).
func BenchmarkBlock(b *testing.B) {
	toks := make([]uint32, 8192)
	for i := range toks {
		toks[i] = uint32(i*7919) % 151_000
	}
	root := Root("m", "", "")
	for _, bs := range []int{16, 8, 32} {
		b.Run("size="+strconv.Itoa(bs), func(b *testing.B) {
			var h Hasher
			dst := make([]Hash, 0, len(toks)/bs)
			b.ReportAllocs()
			for b.Loop() {
				dst = h.Chain(dst[:0], root, toks, bs)
			}
			Sink = dst
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(dst)), "ns/block")
		})
	}
	b.Run("size=16/buf", func(b *testing.B) {
		var h Hasher
		dst := make([]Hash, 0, len(toks)/16)
		b.ReportAllocs()
		for b.Loop() {
			dst = dst[:0]
			parent := root
			for i := 0; i+16 <= len(toks); i += 16 {
				parent = h.nextBuf(parent, toks[i:i+16])
				dst = append(dst, parent)
			}
		}
		Sink = dst
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(dst)), "ns/block")
	})
}

package prefix

import (
	"math/rand/v2"
	"testing"
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

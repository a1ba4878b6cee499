package prefix

import "math/bits"

// XXH3-128 of a block, read in place. A block's bytes are its parent's Hi
// and Lo, then its tokens, all little-endian; with an even number of tokens
// and at most 128 bytes (blocks of 2 to 28 tokens, vLLM's default of 16
// among them) every 64-bit word XXH3 reads is either half of the parent or
// two whole tokens, so the hash is computed from them directly instead of
// from a filled buffer. This is XXH3_len_17to128_128b with the default
// secret, as github.com/zeebo/xxh3 (BSD-2-Clause) writes it;
// TestWordsMatchXXH3 checks it against that package bit for bit.

const (
	prime64_1 = 11400714785074694791
	prime64_2 = 14029467366897019727
	prime64_4 = 9650029242287828579

	key64_000 = 0xbe4ba423396cfeb8
	key64_008 = 0x1cad21f72c81017c
	key64_016 = 0xdb979083e96dd4de
	key64_024 = 0x1f67b3b7a4a44072
	key64_032 = 0x78e5c0cc4ee679cb
	key64_040 = 0x2172ffcc7dd05a82
	key64_048 = 0x8e2443f7744608b8
	key64_056 = 0x4c263a81e69035e0
	key64_064 = 0xcb00c391bb52283c
	key64_072 = 0xa32e531b8b65d088
	key64_080 = 0x4ef90da297486471
	key64_088 = 0xd8acdea946ef1938
	key64_096 = 0x3f349ce33f76faa8
	key64_104 = 0x1d4f0bc7c7bbdcf9
	key64_112 = 0x3159b4cd4be0518a
	key64_120 = 0x647378d9c97e9fc8
)

// wordsOK reports whether a block of n tokens hashes in place.
func wordsOK(n int) bool { return n >= 2 && n <= 28 && n%2 == 0 }

// word is the i-th little-endian 64-bit word of the block's bytes.
func word(parent Hash, t []uint32, i int) uint64 {
	switch i {
	case 0:
		return parent.Hi
	case 1:
		return parent.Lo
	}
	return uint64(t[2*i-4]) | uint64(t[2*i-3])<<32
}

func mulFold64(x, y uint64) uint64 {
	hi, lo := bits.Mul64(x, y)
	return hi ^ lo
}

func avalanche(x uint64) uint64 {
	x ^= x >> 37
	x *= 0x165667919e3779f9
	x ^= x >> 32
	return x
}

// nextWords is Next for a block of n tokens with wordsOK(n).
func nextWords(parent Hash, t []uint32) Hash {
	l := uint64(16 + 4*len(t))
	nw := int(l / 8)
	var hi, lo uint64
	lo = l * prime64_1
	if l > 32 {
		if l > 64 {
			if l > 96 {
				in8, in7 := word(parent, t, nw-8), word(parent, t, nw-7)
				i6, i7 := word(parent, t, 6), word(parent, t, 7)
				hi += mulFold64(in8^key64_112, in7^key64_120)
				hi ^= i6 + i7
				lo += mulFold64(i6^key64_096, i7^key64_104)
				lo ^= in8 + in7
			}
			in6, in5 := word(parent, t, nw-6), word(parent, t, nw-5)
			i4, i5 := word(parent, t, 4), word(parent, t, 5)
			hi += mulFold64(in6^key64_080, in5^key64_088)
			hi ^= i4 + i5
			lo += mulFold64(i4^key64_064, i5^key64_072)
			lo ^= in6 + in5
		}
		in4, in3 := word(parent, t, nw-4), word(parent, t, nw-3)
		i2, i3 := word(parent, t, 2), word(parent, t, 3)
		hi += mulFold64(in4^key64_048, in3^key64_056)
		hi ^= i2 + i3
		lo += mulFold64(i2^key64_032, i3^key64_040)
		lo ^= in4 + in3
	}
	in2, in1 := word(parent, t, nw-2), word(parent, t, nw-1)
	i0, i1 := parent.Hi, parent.Lo
	hi += mulFold64(in2^key64_016, in1^key64_024)
	hi ^= i0 + i1
	lo += mulFold64(i0^key64_000, i1^key64_008)
	lo ^= in2 + in1
	hi, lo = lo*prime64_1+hi*prime64_4+l*prime64_2, hi+lo
	return Hash{Hi: -avalanche(hi), Lo: avalanche(lo)}
}

// next16 is nextWords for a block of 16 tokens (80 bytes), unrolled.
func next16(parent Hash, t *[16]uint32) Hash {
	l := uint64(80)
	w := func(i int) uint64 { return uint64(t[2*i-4]) | uint64(t[2*i-3])<<32 }
	var hi uint64
	lo := l * prime64_1
	in6, in5, i4, i5 := w(4), w(5), w(4), w(5)
	hi += mulFold64(in6^key64_080, in5^key64_088)
	hi ^= i4 + i5
	lo += mulFold64(i4^key64_064, i5^key64_072)
	lo ^= in6 + in5
	in4, in3, i2, i3 := w(6), w(7), w(2), w(3)
	hi += mulFold64(in4^key64_048, in3^key64_056)
	hi ^= i2 + i3
	lo += mulFold64(i2^key64_032, i3^key64_040)
	lo ^= in4 + in3
	in2, in1, i0, i1 := w(8), w(9), parent.Hi, parent.Lo
	hi += mulFold64(in2^key64_016, in1^key64_024)
	hi ^= i0 + i1
	lo += mulFold64(i0^key64_000, i1^key64_008)
	lo ^= in2 + in1
	hi, lo = lo*prime64_1+hi*prime64_4+l*prime64_2, hi+lo
	return Hash{Hi: -avalanche(hi), Lo: avalanche(lo)}
}

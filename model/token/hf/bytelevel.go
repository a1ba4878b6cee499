package hf

import "unicode/utf8"

// byteRune is GPT-2's bytes_to_unicode table, as the Rust ByteLevel pre-tokenizer and
// decoder build it: printable Latin-1 bytes map to themselves and the other 68 bytes
// to U+0100 onwards, in byte order. It is an immutable table built at package init.
var byteRune, runeByte = buildByteLevel()

func buildByteLevel() (br [256]rune, rb map[rune]byte) {
	rb = make(map[rune]byte, 256)
	n := rune(0)
	for b := 0; b < 256; b++ {
		if (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF) {
			br[b] = rune(b)
		} else {
			br[b] = 256 + n
			n++
		}
		rb[br[b]] = byte(b)
	}
	return br, rb
}

// appendByteLevel appends the byte-level form of raw (one rune per byte) to dst.
func appendByteLevel(dst []byte, raw string) []byte {
	for i := 0; i < len(raw); i++ {
		dst = utf8.AppendRune(dst, byteRune[raw[i]])
	}
	return dst
}

// fromByteLevel maps a byte-level string back to raw bytes. ok is false when s holds
// a rune outside the byte-level alphabet.
func fromByteLevel(dst []byte, s string) ([]byte, bool) {
	for _, r := range s {
		b, ok := runeByte[r]
		if !ok {
			return dst, false
		}
		dst = append(dst, b)
	}
	return dst, true
}

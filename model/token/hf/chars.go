package hf

import (
	"unicode"
	"unicode/utf8"
)

// Character classes as the engines behind tokenizer.json define them.
//
// Oniguruma (the Rust library's regex engine) with a Unicode encoding gives \s as
// U+0009–U+000D, U+0085, Line_Separator, Paragraph_Separator and Space_Separator,
// which is the Unicode White_Space property: the same set as unicode.IsSpace and as
// Rust's char::is_whitespace. \p{L} and \p{N} are the general categories.
const (
	clL  = 1 << iota // \p{L}
	clN              // \p{N}
	clS              // \s
	clNL             // \r or \n
	clW              // \w (word: letter, mark, decimal digit, connector punctuation)
	clP              // punctuation (Rust is_ascii_punctuation || general category P)
)

// asciiClass is an immutable table for the ASCII fast path.
var asciiClass = buildASCIIClass()

func buildASCIIClass() (t [128]uint8) {
	for r := rune(0); r < 128; r++ {
		t[r] = classOfSlow(r)
	}
	return t
}

func classOfSlow(r rune) uint8 {
	var c uint8
	if unicode.IsLetter(r) || r >= 0x1c89 && unicode.Is(letter16, r) {
		c |= clL
	}
	if unicode.IsNumber(r) || r >= 0x1c89 && unicode.Is(number16, r) {
		c |= clN
	}
	if unicode.IsSpace(r) {
		c |= clS
	}
	if r == '\r' || r == '\n' {
		c |= clNL
	}
	if isWordSlow(r) {
		c |= clW
	}
	if (r < 128 && r > ' ' && r != 127 && !(r >= '0' && r <= '9') && !(r >= 'a' && r <= 'z') && !(r >= 'A' && r <= 'Z')) || unicode.IsPunct(r) {
		c |= clP
	}
	return c
}

// isWordSlow is the Unicode \w of Rust's regex crate and Oniguruma: Alphabetic,
// Mark, Decimal_Number, Connector_Punctuation and Join_Control.
func isWordSlow(r rune) bool {
	return unicode.IsLetter(r) || r >= 0x1c89 && unicode.Is(letter16, r) || unicode.Is(unicode.Nl, r) || unicode.Is(unicode.Other_Alphabetic, r) ||
		unicode.IsMark(r) || unicode.Is(unicode.Nd, r) || r >= 0x1c89 && unicode.Is(number16, r) || unicode.Is(unicode.Pc, r) || r == 0x200C || r == 0x200D
}

// classOf returns the class bits of r; for non-ASCII runes only clL, clN and clS
// (what the scanners need). isWordRune and isPunc cover the other classes. \p{L} and \p{N} follow Unicode 16.0, as the
// Rust library's Oniguruma does (unicode16.go).
func classOf(r rune) uint8 {
	if r < 128 {
		return asciiClass[r]
	}
	// CJK Unified Ideographs are the commonest non-ASCII letters in prompts.
	if r >= 0x4E00 && r <= 0x9FFF {
		return clL
	}
	var c uint8
	if unicode.IsLetter(r) || r >= 0x1c89 && unicode.Is(letter16, r) {
		c |= clL
	} else if unicode.IsNumber(r) || r >= 0x1c89 && unicode.Is(number16, r) {
		c |= clN
	} else if unicode.IsSpace(r) {
		c |= clS
	}
	return c
}

// decode returns the rune at s[i] and its width, with an ASCII fast path. Input is
// valid UTF-8 by the time it reaches the scanners.
func decode(s string, i int) (rune, int) {
	if c := s[i]; c < utf8.RuneSelf {
		return rune(c), 1
	}
	return utf8.DecodeRuneInString(s[i:])
}

// lastRuneStart returns the index of the first byte of the last rune of s[:end].
func lastRuneStart(s string, end int) int {
	_, w := utf8.DecodeLastRuneInString(s[:end])
	return end - w
}

package token

import (
	"strings"

	"github.com/zeebo/xxh3"
)

// Sim is the simulator's tokenizer. It is not a real vocabulary; it is built so
// that prefix caching behaves as it does on a real engine:
//
//   - A token boundary at byte i is decided from bytes [0, i] alone, so the tokens
//     of a prefix of some text are the tokens of the text, except that the prefix's
//     last token may be cut short. Shared text therefore means shared tokens.
//   - Special markers of the form "<|...|>" are one token each.
//   - Text made of the pieces Generate produces retokenizes to the same ids, so
//     an answer resent in the next turn of a conversation hits the blocks the
//     engine cached while generating it.
//
// A token ends after whitespace or ASCII punctuation, after MaxPiece bytes, or
// after the "|>" that closes a marker; a '<' always starts a new token.
// Ids are a hash of the token's bytes folded into [FirstID, VocabSize).
type Sim struct{}

const (
	// VocabSize is the id space of the Sim tokenizer.
	VocabSize = 32000
	// FirstID is the lowest id an ordinary token gets; lower ids are unused,
	// as real vocabularies keep them for special tokens.
	FirstID = 256
	// MaxPiece is the longest ordinary token in bytes.
	MaxPiece = 4
	// maxMarker caps a "<|...|>" marker, so a stray "<|" cannot swallow a prompt.
	maxMarker = 32
)

// Encode appends the ids of text to dst and returns the extended slice.
func (Sim) Encode(dst []uint32, text string) []uint32 {
	for start := 0; start < len(text); {
		end := pieceEnd(text, start)
		dst = append(dst, pieceID(text[start:end]))
		start = end
	}
	return dst
}

// pieceEnd is where the token that starts at text[start] ends: a '<' after
// start begins the next one, and endsAfter closes it.
func pieceEnd(text string, start int) int {
	for i := start; i < len(text); i++ {
		if text[i] == '<' && i > start {
			return i
		}
		if endsAfter(text[start : i+1]) {
			return i + 1
		}
	}
	return len(text)
}

// Count is the number of tokens in text, without building the ids.
func (Sim) Count(text string) int {
	n, start := 0, 0
	for i := 0; i < len(text); i++ {
		if text[i] == '<' && i > start {
			n++
			start = i
		}
		if endsAfter(text[start : i+1]) {
			n++
			start = i + 1
		}
	}
	if start < len(text) {
		n++
	}
	return n
}

// endsAfter reports whether a token that has grown to piece ends with its last byte.
func endsAfter(piece string) bool {
	c := piece[len(piece)-1]
	if len(piece) >= 2 && piece[0] == '<' && piece[1] == '|' {
		return (c == '>' && piece[len(piece)-2] == '|' && len(piece) > 3) || len(piece) >= maxMarker
	}
	return isBreak(c) || len(piece) >= MaxPiece
}

func isBreak(c byte) bool {
	switch {
	case c == ' ' || c == '\n' || c == '\t' || c == '\r':
		return true
	case c < 0x80 && (c >= '!' && c <= '/' || c >= ':' && c <= '@' || c >= '[' && c <= '`' || c >= '{' && c <= '~'):
		return c != '<'
	}
	return false
}

func pieceID(p string) uint32 {
	return FirstID + uint32(xxh3.HashString(p)%(VocabSize-FirstID))
}

// genWords are the words Generate draws from. Each is at most MaxPiece-1 bytes,
// so a word and its trailing space make exactly one token.
var genWords = [...]string{
	"the", "a", "of", "to", "and", "in", "is", "it", "for", "on",
	"we", "as", "be", "at", "by", "or", "an", "so", "if", "no",
	"can", "may", "new", "one", "two", "use", "way", "set", "run", "key",
	"map", "log", "row", "bit", "net", "gpu", "kv", "job", "io", "ok",
}

// Piece is the text of generated token i of a sequence seeded by seed. The same
// seed and index always give the same piece, so answers are deterministic.
func Piece(seed uint64, i int) string {
	x := seed + uint64(i)*0x9e3779b97f4a7c15
	x ^= x >> 31
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 29
	return genWords[x%uint64(len(genWords))] + " "
}

// Generate returns the text of n generated tokens seeded by seed. Encoding the
// result yields exactly n ids.
func Generate(seed uint64, n int) string {
	var b strings.Builder
	b.Grow(4 * n)
	for i := 0; i < n; i++ {
		b.WriteString(Piece(seed, i))
	}
	return b.String()
}

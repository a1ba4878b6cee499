package hf

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// normalizer is one tokenizer.json normalizer. normalize returns s itself when it
// changes nothing, so the common case allocates nothing.
type normalizer interface {
	normalize(s string) string
}

// unicodeForm is NFC, NFD, NFKC or NFKD. keep holds the runes the Rust library's
// older normalization data leaves alone (unicode16.go); text around them is
// normalized piece by piece, as those runes are starters without decompositions
// there.
type unicodeForm struct {
	f    norm.Form
	keep *unicode.RangeTable // nil: none
}

func (u unicodeForm) normalize(s string) string {
	if u.keep == nil || isASCII(s) {
		return u.f.String(s)
	}
	var b strings.Builder
	last := 0
	for i, r := range s {
		if r >= 0x80 && unicode.Is(u.keep, r) {
			if b.Len() == 0 && last == 0 {
				b.Grow(len(s))
			}
			b.WriteString(u.f.String(s[last:i]))
			last = i + utf8.RuneLen(r)
			b.WriteString(s[i:last])
		}
	}
	if last == 0 {
		return u.f.String(s)
	}
	b.WriteString(u.f.String(s[last:]))
	return b.String()
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

type normSequence []normalizer

func (q normSequence) normalize(s string) string {
	for _, n := range q {
		s = n.normalize(s)
	}
	return s
}

// lowercase is NormalizedString::lowercase: char::to_lowercase rune by rune, with
// no context (so no final sigma); U+0130 is the only rune that lowercases to two.
type lowercase struct{}

func (lowercase) normalize(s string) string {
	i := 0
	for i < len(s) {
		r, w := decode(s, i)
		if l, ok := lowerRune(r); !ok || l != r {
			break
		}
		i += w
	}
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteString(s[:i])
	for _, r := range s[i:] {
		if l, ok := lowerRune(r); ok {
			b.WriteRune(l)
		} else if r == 0x130 {
			b.WriteString("i\u0307")
		} else {
			b.WriteString(lowerRust[r])
		}
	}
	return b.String()
}

// lowerRune returns the lowercase of r when it is a single rune; ok is false when
// the string form is needed (U+0130, or an entry of lowerRust).
func lowerRune(r rune) (rune, bool) {
	if r < 0x80 {
		if r >= 'A' && r <= 'Z' {
			r += 'a' - 'A'
		}
		return r, true
	}
	if r == 0x130 {
		return 0, false
	}
	if _, ok := lowerRust[r]; ok {
		return 0, false
	}
	return unicode.ToLower(r), true
}

// strip removes char::is_whitespace runes at either end.
type strip struct{ left, right bool }

func (st strip) normalize(s string) string {
	if st.left {
		s = strings.TrimLeftFunc(s, unicode.IsSpace)
	}
	if st.right {
		s = strings.TrimRightFunc(s, unicode.IsSpace)
	}
	return s
}

// stripAccents removes combining marks, as the Rust StripAccents does
// (is_combining_mark, with the Rust crate's Unicode data: combiningMark).
type stripAccents struct{}

func (stripAccents) normalize(s string) string {
	if strings.IndexFunc(s, isMn) < 0 {
		return s
	}
	return strings.Map(func(r rune) rune {
		if isMn(r) {
			return -1
		}
		return r
	}, s)
}

func isMn(r rune) bool { return r >= 0x300 && unicode.Is(combiningMark, r) }

// replace replaces every match of a pattern with content.
type replace struct {
	m       matcher
	content string
}

func (rp replace) normalize(s string) string {
	if l, ok := rp.m.(literal); ok {
		if l == "" {
			return s
		}
		return strings.ReplaceAll(s, string(l), rp.content) // returns s when nothing matches
	}
	var buf [16]span
	ms := rp.m.appendMatches(buf[:0], s)
	if len(ms) == 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + len(ms)*len(rp.content))
	last := 0
	for _, sp := range ms {
		b.WriteString(s[last:sp.start])
		b.WriteString(rp.content)
		last = sp.end
	}
	b.WriteString(s[last:])
	return b.String()
}

// prepend adds a string in front of any non-empty text.
type prepend string

func (p prepend) normalize(s string) string {
	if s == "" {
		return s
	}
	return string(p) + s
}

// byteLevelNorm maps every byte to its ByteLevel rune (the ByteLevel normalizer).
type byteLevelNorm struct{}

func (byteLevelNorm) normalize(s string) string {
	return string(appendByteLevel(make([]byte, 0, 2*len(s)), s))
}

// bertNorm is the BertNormalizer.
type bertNorm struct {
	cleanText, chinese, accents, lower bool
}

func (bn bertNorm) normalize(s string) string {
	var b strings.Builder
	for _, r := range s {
		if bn.cleanText {
			if r == 0 || r == 0xFFFD || isBertControl(r) {
				continue
			}
			if isBertWhitespace(r) {
				r = ' '
			}
		}
		if bn.chinese && isCJK(r) {
			b.WriteByte(' ')
			b.WriteRune(r)
			b.WriteByte(' ')
			continue
		}
		b.WriteRune(r)
	}
	out := b.String()
	if bn.accents {
		out = stripAccents{}.normalize(unicodeForm{f: norm.NFD, keep: keepNFD}.normalize(out))
	}
	if bn.lower {
		out = lowercase{}.normalize(out)
	}
	return out
}

func isBertWhitespace(r rune) bool { return unicode.IsSpace(r) }

func isBertControl(r rune) bool {
	switch r {
	case '\t', '\n', '\r':
		return false
	}
	return unicode.In(r, unicode.Cc, unicode.Cf, unicode.Co)
}

func isCJK(r rune) bool {
	return (r >= 0x4E00 && r <= 0x9FFF) || (r >= 0x3400 && r <= 0x4DBF) || (r >= 0x20000 && r <= 0x2A6DF) ||
		(r >= 0x2A700 && r <= 0x2B73F) || (r >= 0x2B740 && r <= 0x2B81F) || (r >= 0x2B820 && r <= 0x2CEAF) ||
		(r >= 0xF900 && r <= 0xFAFF) || (r >= 0x2F800 && r <= 0x2FA1F)
}

// toValidUTF8 replaces each byte of an invalid UTF-8 sequence with U+FFFD, as Go's
// range loop decodes it. The Rust library only takes valid UTF-8 (&str); callers
// holding JSON-decoded text never hit this.
func toValidUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for _, r := range s {
		b.WriteRune(r)
	}
	return b.String()
}

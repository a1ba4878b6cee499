package hf

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/dlclark/regexp2"
)

// span is a byte range [start, end) of a string; match tells a pattern match from
// the text between matches.
type span struct {
	start, end int
	match      bool
}

// matcher finds the matches of a Split, Replace or pre-tokenizer pattern.
type matcher interface {
	// appendMatches appends the non-overlapping matches of the pattern in s, left
	// to right, with the semantics of the Rust library's find_iter for that pattern.
	appendMatches(dst []span, s string) []span
}

// appendMatches for the hand-written scanners: the matches tile s.
func (sc *scanner) appendMatches(dst []span, s string) []span {
	for i := 0; i < len(s); {
		_, e, _ := sc.find(s, i)
		dst = append(dst, span{i, e, true})
		i = e
	}
	return dst
}

// literal matches a fixed string, as the Rust library does for a String pattern
// (it escapes the string into a regex).
type literal string

func (l literal) appendMatches(dst []span, s string) []span {
	if len(l) == 0 {
		return dst
	}
	for i := 0; ; {
		k := strings.Index(s[i:], string(l))
		if k < 0 {
			return dst
		}
		dst = append(dst, span{i + k, i + k + len(l), true})
		i += k + len(l)
	}
}

// runeClass matches every single rune for which fn is true, each rune a match of
// its own, as the Rust library's Pattern impl for Fn(char) -> bool does.
type runeClass func(rune) bool

func (f runeClass) appendMatches(dst []span, s string) []span {
	for i, r := range s {
		if f(r) {
			dst = append(dst, span{i, i + utf8.RuneLen(r), true})
		}
	}
	return dst
}

// regex runs any other pattern on regexp2, whose .NET syntax and backtracking
// semantics are close to Oniguruma's for the constructs tokenizer.json patterns use
// (\p{..}, lookaround, (?i:...), possessive-free alternation). It is the fallback;
// the hand-written scanners are exact and faster.
type regex struct {
	re *regexp2.Regexp
}

func compileRegex(pattern string) (*regex, error) {
	// Oniguruma folds case with Unicode case folding, under which U+017F (ſ)
	// matches s; .NET's (?i) does not. Spell out the contraction group that the
	// GPT-4-style patterns use.
	p := strings.ReplaceAll(pattern, `(?i:'s|'t|'re|'ve|'m|'ll|'d)`, `(?:'[sSſ]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])`)
	re, err := regexp2.Compile(widenClasses(p), regexp2.None)
	if err != nil {
		return nil, fmt.Errorf("regex %q: %w", pattern, err)
	}
	return &regex{re: re}, nil
}

func (r *regex) appendMatches(dst []span, s string) []span {
	if len(s) == 0 {
		return dst
	}
	runes := []rune(s)
	// offs[k] is the byte offset of rune k; offs[len(runes)] == len(s).
	offs := make([]int, 0, len(runes)+1)
	for i := range s {
		offs = append(offs, i)
	}
	offs = append(offs, len(s))
	// Oniguruma's find_iter as the onig crate drives it: an empty match right where
	// the previous match ended is skipped by moving on one character.
	lastEnd, lastMatchEnd := 0, -1
	for lastEnd <= len(runes) {
		m, err := r.re.FindRunesMatchStartingAt(runes, lastEnd)
		if err != nil || m == nil {
			break
		}
		st, en := m.Index, m.Index+m.Length
		if st == en && en == lastMatchEnd {
			lastEnd++
			continue
		}
		lastEnd, lastMatchEnd = en, en
		dst = append(dst, span{offs[st], offs[en], true})
		if st == en && en == len(runes) {
			break
		}
	}
	return dst
}

// behavior is a SplitDelimiterBehavior.
type behavior uint8

const (
	removed behavior = iota
	isolated
	mergedWithPrevious
	mergedWithNext
	contiguous
)

func parseBehavior(s string) (behavior, error) {
	switch s {
	case "Removed":
		return removed, nil
	case "Isolated", "":
		return isolated, nil
	case "MergedWithPrevious":
		return mergedWithPrevious, nil
	case "MergedWithNext":
		return mergedWithNext, nil
	case "Contiguous":
		return contiguous, nil
	}
	return 0, fmt.Errorf("unknown split behavior %q", s)
}

// splitSpans turns the matches of a pattern in s into the pieces that
// NormalizedString::split keeps, following the Rust code step by step: the
// matches and the gaps between them cover s, invert swaps the two, and the
// behavior merges or drops them. Empty pieces are dropped. It reuses buf.
func splitSpans(buf []span, s string, m matcher, b behavior, invert bool) []span {
	buf = m.appendMatches(buf[:0], s)
	nm := len(buf)
	// Interleave gaps: build the full cover after the matches, then move it down.
	prev := 0
	for k := 0; k < nm; k++ {
		sp := buf[k]
		if prev != sp.start {
			buf = append(buf, span{prev, sp.start, false})
		}
		buf = append(buf, sp)
		prev = sp.end
	}
	if prev != len(s) {
		buf = append(buf, span{prev, len(s), false})
	}
	n := copy(buf, buf[nm:])
	cover := buf[:n]
	if invert {
		for k := range cover {
			cover[k].match = !cover[k].match
		}
	}
	out := cover[:0] // in place: each output piece is written at or before its input
	switch b {
	case isolated:
		out = append(out, cover...)
		for k := range out {
			out[k].match = false
		}
	case removed:
		for _, sp := range cover {
			if !sp.match {
				out = append(out, sp)
			}
		}
	case contiguous:
		prevMatch := false
		for _, sp := range cover {
			if sp.match == prevMatch && len(out) > 0 {
				out[len(out)-1].end = sp.end
			} else {
				out = append(out, span{sp.start, sp.end, false})
			}
			prevMatch = sp.match
		}
	case mergedWithPrevious:
		prevMatch := false
		for _, sp := range cover {
			if sp.match && !prevMatch && len(out) > 0 {
				out[len(out)-1].end = sp.end
			} else {
				out = append(out, span{sp.start, sp.end, false})
			}
			prevMatch = sp.match
		}
	case mergedWithNext:
		// The Rust code folds from the right; do the same into the tail of cover,
		// then move the result down.
		w := len(cover)
		prevMatch := false
		for k := len(cover) - 1; k >= 0; k-- {
			sp := cover[k]
			if sp.match && !prevMatch && w < len(cover) {
				cover[w].start = sp.start
			} else {
				w--
				cover[w] = span{sp.start, sp.end, false}
			}
			prevMatch = sp.match
		}
		out = append(out, cover[w:]...)
	}
	// Drop empty pieces.
	k := 0
	for _, sp := range out {
		if sp.end > sp.start {
			out[k] = sp
			k++
		}
	}
	return out[:k]
}

// widenClasses adds to each \p{X} (X a general category) and \d of a pattern
// the code points that Oniguruma's Unicode 16.0 tables have and Go's (which
// regexp2 uses) lack (category16), inside or outside a bracket expression.
func widenClasses(p string) string {
	if !strings.Contains(p, `\p{`) && !strings.Contains(p, `\d`) {
		return p
	}
	var b strings.Builder
	depth := 0
	widen := func(class string, t *unicode.RangeTable) {
		if depth == 0 {
			b.WriteByte('[')
		}
		b.WriteString(class)
		writeRanges(&b, t)
		if depth == 0 {
			b.WriteByte(']')
		}
	}
	for i := 0; i < len(p); i++ {
		c := p[i]
		if c == '\\' && i+1 < len(p) {
			if p[i+1] == 'p' && i+2 < len(p) && p[i+2] == '{' {
				if end := strings.IndexByte(p[i:], '}'); end > 0 {
					if t, ok := category16[p[i+3:i+end]]; ok {
						widen(p[i:i+end+1], t)
						i += end
						continue
					}
				}
			}
			if p[i+1] == 'd' { // Oniguruma's Unicode \d is Nd
				widen(`\d`, category16["Nd"])
				i++
				continue
			}
			b.WriteString(p[i : i+2])
			i++
			continue
		}
		switch {
		case c == '[':
			depth++
		case c == ']' && depth > 0:
			depth--
		}
		b.WriteByte(c)
	}
	return b.String()
}

func writeRanges(b *strings.Builder, t *unicode.RangeTable) {
	for _, r := range t.R16 {
		b.WriteRune(rune(r.Lo))
		b.WriteByte('-')
		b.WriteRune(rune(r.Hi))
	}
	for _, r := range t.R32 {
		b.WriteRune(rune(r.Lo))
		b.WriteByte('-')
		b.WriteRune(rune(r.Hi))
	}
}

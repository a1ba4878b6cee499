package hf

import (
	"strings"
	"unicode/utf8"
)

// decoder is one tokenizer.json decoder: decode_chain of the Rust library.
type decoder interface {
	decode(toks []string) []string
}

type decSequence []decoder

func (q decSequence) decode(toks []string) []string {
	for _, d := range q {
		toks = d.decode(toks)
	}
	return toks
}

// decByteLevel maps byte-level runes back to bytes; a token holding any other rune
// is kept as its UTF-8. Invalid UTF-8 in the result becomes U+FFFD.
type decByteLevel struct{}

func (decByteLevel) decode(toks []string) []string {
	var b []byte
	for _, t := range toks {
		n := len(b)
		var ok bool
		if b, ok = fromByteLevel(b, t); !ok {
			b = append(b[:n], t...)
		}
	}
	return []string{strings.ToValidUTF8(string(b), "\uFFFD")}
}

type decReplace struct {
	m       matcher
	content string
}

func (d decReplace) decode(toks []string) []string {
	out := make([]string, len(toks))
	for i, t := range toks {
		out[i] = replace(d).normalize(t)
	}
	return out
}

// decByteFallback turns runs of "<0xNN>" tokens into the text they encode, or into
// one U+FFFD per byte when that is not valid UTF-8.
type decByteFallback struct{}

func (decByteFallback) decode(toks []string) []string {
	var out []string
	var pending []byte
	flush := func() {
		if len(pending) == 0 {
			return
		}
		if utf8.Valid(pending) {
			out = append(out, string(pending))
		} else {
			for range pending {
				out = append(out, "\uFFFD")
			}
		}
		pending = pending[:0]
	}
	for _, t := range toks {
		if b, ok := byteToken(t); ok {
			pending = append(pending, b)
			continue
		}
		flush()
		out = append(out, t)
	}
	flush()
	return out
}

func byteToken(t string) (byte, bool) {
	if len(t) != 6 || !strings.HasPrefix(t, "<0x") || t[5] != '>' {
		return 0, false
	}
	var v byte
	for _, c := range []byte(t[3:5]) {
		switch {
		case c >= '0' && c <= '9':
			v = v<<4 | (c - '0')
		case c >= 'A' && c <= 'F':
			v = v<<4 | (c - 'A' + 10)
		case c >= 'a' && c <= 'f':
			v = v<<4 | (c - 'a' + 10)
		default:
			return 0, false
		}
	}
	return v, true
}

type decFuse struct{}

func (decFuse) decode(toks []string) []string { return []string{strings.Join(toks, "")} }

// decStrip removes up to start leading and stop trailing copies of content from
// every token.
type decStrip struct {
	content     string
	start, stop int
}

func (d decStrip) decode(toks []string) []string {
	out := make([]string, len(toks))
	for i, t := range toks {
		for k := 0; k < d.start && strings.HasPrefix(t, d.content); k++ {
			t = t[len(d.content):]
		}
		for k := 0; k < d.stop && strings.HasSuffix(t, d.content); k++ {
			t = t[:len(t)-len(d.content)]
		}
		out[i] = t
	}
	return out
}

// decMetaspace turns the replacement back into spaces and drops the prepended one.
type decMetaspace struct {
	repl   string
	scheme prependScheme
}

func (d decMetaspace) decode(toks []string) []string {
	out := make([]string, len(toks))
	for i, t := range toks {
		t = strings.ReplaceAll(t, d.repl, " ")
		if i == 0 && d.scheme != prependNever {
			t = strings.TrimPrefix(t, " ")
		}
		out[i] = t
	}
	return out
}

// decWordPiece joins "##" continuations and, with cleanup, tidies spaces.
type decWordPiece struct {
	prefix  string
	cleanup bool
}

func (d decWordPiece) decode(toks []string) []string {
	out := make([]string, len(toks))
	for i, t := range toks {
		if i != 0 {
			if strings.HasPrefix(t, d.prefix) {
				t = t[len(d.prefix):]
			} else {
				t = " " + t
			}
		}
		if d.cleanup {
			t = cleanupSpaces(t)
		}
		out[i] = t
	}
	return out
}

func cleanupSpaces(s string) string {
	r := strings.NewReplacer(" .", ".", " ?", "?", " !", "!", " ,", ",", " ' ", "'", " n't", "n't",
		" 'm", "'m", " do not", " don't", " 's", "'s", " 've", "'ve", " 're", "'re")
	return r.Replace(s)
}

// decBPE replaces the end-of-word suffix with a space.
type decBPE struct{ suffix string }

func (d decBPE) decode(toks []string) []string {
	out := make([]string, len(toks))
	for i, t := range toks {
		rep := " "
		if i == len(toks)-1 {
			rep = ""
		}
		out[i] = strings.ReplaceAll(t, d.suffix, rep)
	}
	return out
}

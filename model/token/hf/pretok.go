package hf

import (
	"strings"
	"unicode"
	"unsafe"
)

// stage is one step of the pre-tokenizer. A tokenizer.json pre-tokenizer becomes a
// flat list of stages (Sequence is flattened, ByteLevel becomes prefix-space, regex
// and byte-mapping stages); each stage splits or rewrites every piece the previous
// stage produced, depth first, so no list of pieces is ever built.
type stage struct {
	kind   stageKind
	m      matcher  // stSplit
	sc     *scanner // stScan
	beh    behavior // stSplit
	invert bool     // stSplit

	// stMetaspace
	repl    string
	scheme  prependScheme
	msSplit bool
}

type stageKind uint8

const (
	stSplit       stageKind = iota // split on matcher with a behavior
	stScan                         // hand-written scanner, Isolated, not inverted
	stPrefixSpace                  // ByteLevel add_prefix_space
	stByteMap                      // ByteLevel rune mapping, when more stages follow it
	stMetaspace                    // Metaspace
)

type prependScheme uint8

const (
	prependAlways prependScheme = iota
	prependFirst
	prependNever
)

// isPunc is the Rust pre-tokenizers' is_punc: ASCII or Unicode punctuation.
func isPunc(r rune) bool { return r < 128 && asciiClass[r]&clP != 0 || r >= 128 && unicode.IsPunct(r) }

// isNumeric is Rust's char::is_numeric (Nd, Nl, No), with Unicode 16 data.
func isNumeric(r rune) bool { return classOf(r)&clN != 0 }

// wordRuns is the Whitespace pre-tokenizer's regex \w+|[^\w\s]+ (Oniguruma classes).
type wordRuns struct{}

func (wordRuns) appendMatches(dst []span, s string) []span {
	for i := 0; i < len(s); {
		r, w := decode(s, i)
		j := i + w
		switch {
		case isWordRune(r):
			for j < len(s) {
				r, w := decode(s, j)
				if !isWordRune(r) {
					break
				}
				j += w
			}
		case !unicode.IsSpace(r):
			for j < len(s) {
				r, w := decode(s, j)
				if isWordRune(r) || unicode.IsSpace(r) {
					break
				}
				j += w
			}
		default:
			i = j
			continue
		}
		dst = append(dst, span{i, j, true})
		i = j
	}
	return dst
}

var (
	_ matcher = (*scanner)(nil)
	_ matcher = literal("")
	_ matcher = runeClass(nil)
	_ matcher = (*regex)(nil)
	_ matcher = wordRuns{}
)

func whitespaceSplit() stage {
	return stage{kind: stSplit, m: runeClass(unicode.IsSpace), beh: removed}
}

// encoder holds the scratch state of one Encode or PreTokenize call. Encoders are
// pooled by the Tokenizer and owned by one call at a time.
type encoder struct {
	t     *Tokenizer
	dst   []uint32
	own   []uint32 // Count's buffer
	ws    wordScratch
	segs  []seg
	segs2 []seg
	spans [][]span // per stage
	bufs  [][]byte // per stage
	// pieces collects pre-tokens instead of encoding them (PreTokenize).
	pieces  []string
	collect bool
	// cache, when set, keeps the ids of the pieces between added tokens
	// (EncodeCached).
	cache *PieceCache
}

// view returns a string that aliases b. The string is only read while b is not
// written: every stage consumes a piece fully before it rewrites its buffer, and
// nothing keeps a piece (collect copies).
func view(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// pre runs stage k and the ones after it on one piece. first tells whether the
// piece starts at offset 0 of the original text (Metaspace prepend_scheme first).
func (e *encoder) pre(k int, s string, first bool) {
	stages := e.t.stages
	if k == len(stages) {
		e.word(s)
		return
	}
	st := &stages[k]
	switch st.kind {
	case stScan:
		for i := 0; i < len(s); {
			_, j, _ := st.sc.find(s, i)
			e.pre(k+1, s[i:j], first && i == 0)
			i = j
		}
	case stSplit:
		sp := splitSpans(e.spans[k], s, st.m, st.beh, st.invert)
		e.spans[k] = sp
		for _, x := range sp {
			e.pre(k+1, s[x.start:x.end], first && x.start == 0)
		}
	case stPrefixSpace:
		if len(s) > 0 && s[0] != ' ' {
			b := append(append(e.bufs[k][:0], ' '), s...)
			e.bufs[k] = b
			s = view(b)
		}
		e.pre(k+1, s, first)
	case stByteMap:
		b := appendByteLevel(e.bufs[k][:0], s)
		e.bufs[k] = b
		e.pre(k+1, view(b), first)
	case stMetaspace:
		b := e.bufs[k][:0]
		replaced := strings.ReplaceAll(s, " ", st.repl) // allocates only when s has a space
		pre := false
		switch st.scheme {
		case prependAlways:
			pre = !strings.HasPrefix(replaced, st.repl)
		case prependFirst:
			pre = !strings.HasPrefix(replaced, st.repl) && first
		}
		if pre {
			b = append(b, st.repl...)
		}
		b = append(b, replaced...)
		e.bufs[k] = b
		s = view(b)
		if !st.msSplit {
			e.pre(k+1, s, first)
			return
		}
		sp := splitSpans(e.spans[k], s, literal(st.repl), mergedWithNext, false)
		e.spans[k] = sp
		for _, x := range sp {
			e.pre(k+1, s[x.start:x.end], first && x.start == 0)
		}
	}
}

// word hands one pre-token to the model (or collects it).
func (e *encoder) word(s string) {
	if len(s) == 0 {
		return
	}
	if e.collect {
		if e.t.model.raw {
			s = string(appendByteLevel(nil, s))
		} else {
			s = strings.Clone(s)
		}
		e.pieces = append(e.pieces, s)
		return
	}
	e.dst = e.t.model.appendWord(e.dst, s, &e.ws)
}

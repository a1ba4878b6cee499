package hf

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// addedToken is one entry of tokenizer.json's added_tokens.
type addedToken struct {
	ID         uint32 `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized bool   `json:"normalized"`
	Special    bool   `json:"special"`
}

// addedSet finds added tokens in text the way the Rust AddedVocabulary does: an
// Aho-Corasick automaton in leftmost-longest mode, then single_word, lstrip and
// rstrip applied to each match (find_matches). Immutable after load.
type addedSet struct {
	toks  []*addedToken // by pattern
	pats  []string      // the pattern of each token (its content, or normalized content)
	nodes []trieNode    // nodes[0] is the root
	root  [256]int32    // child of the root per byte, 0 if none
	// lead is the byte every pattern starts with ('<' in most
	// tokenizers), or -1: split then jumps between them with IndexByte.
	lead int
}

type trieNode struct {
	edges []trieEdge
	term  int32 // index into toks + 1, 0 if no pattern ends here
}

type trieEdge struct {
	b    byte
	node int32
}

func newAddedSet(toks []*addedToken, pats []string) *addedSet {
	a := &addedSet{nodes: make([]trieNode, 1)}
	for i, p := range pats {
		if p == "" {
			continue
		}
		n := int32(0)
		for k := 0; k < len(p); k++ {
			n = a.child(n, p[k], true)
		}
		// With equal patterns the first one wins, as aho-corasick reports the
		// lowest pattern id.
		if a.nodes[n].term == 0 {
			a.nodes[n].term = int32(len(a.toks)) + 1
		}
		a.toks = append(a.toks, toks[i])
		a.pats = append(a.pats, p)
	}
	if len(a.toks) == 0 {
		return nil
	}
	a.lead = -1
	for b, c := range a.root {
		if c == 0 {
			continue
		}
		if a.lead != -1 {
			a.lead = -1
			break
		}
		a.lead = b
	}
	return a
}

func (a *addedSet) child(n int32, b byte, create bool) int32 {
	if n == 0 {
		if c := a.root[b]; c != 0 || !create {
			return c
		}
	} else {
		for _, e := range a.nodes[n].edges {
			if e.b == b {
				return e.node
			}
		}
		if !create {
			return 0
		}
	}
	a.nodes = append(a.nodes, trieNode{})
	c := int32(len(a.nodes) - 1)
	if n == 0 {
		a.root[b] = c
	} else {
		a.nodes[n].edges = append(a.nodes[n].edges, trieEdge{b, c})
	}
	return c
}

// longestAt returns the longest pattern starting at s[i]: its token index and end.
func (a *addedSet) longestAt(s string, i int) (int, int) {
	n := a.root[s[i]]
	best, end := -1, 0
	for j := i + 1; n != 0; j++ {
		if t := a.nodes[n].term; t != 0 {
			best, end = int(t-1), j
		}
		if j >= len(s) {
			break
		}
		n = a.child(n, s[j], false)
	}
	return best, end
}

// seg is a piece of text between added tokens (tok < 0) or an added token.
type seg struct {
	start, end int
	tok        int32
}

// split appends the pieces of s: find_matches of the Rust AddedVocabulary. With
// skipSpecial (split_special_tokens), special tokens are left in the text.
func (a *addedSet) split(dst []seg, s string, skipSpecial bool) []seg {
	startOffset := 0
	for i := 0; i < len(s); {
		if a.root[s[i]] == 0 {
			if a.lead < 0 {
				i++
				continue
			}
			k := strings.IndexByte(s[i:], byte(a.lead))
			if k < 0 {
				break
			}
			i += k
		}
		k, mend := a.longestAt(s, i)
		if k < 0 {
			i++
			continue
		}
		start, stop := i, mend
		i = mend // the automaton goes on after the match, whatever is done with it
		t := a.toks[k]
		if skipSpecial && t.Special {
			continue
		}
		if t.SingleWord {
			startSpace := start == 0 || !endsWithWord(s[:start])
			stopSpace := stop == len(s) || !startsWithWord(s[stop:])
			if !startSpace || !stopSpace {
				continue
			}
		}
		if t.LStrip {
			start = max(trailingSpaceStart(s[:start]), startOffset)
		}
		if t.RStrip {
			stop += leadingSpaceLen(s[stop:])
		}
		if startOffset < start {
			dst = append(dst, seg{startOffset, start, -1})
		}
		dst = append(dst, seg{start, stop, int32(k)})
		startOffset = stop
	}
	if startOffset != len(s) {
		dst = append(dst, seg{startOffset, len(s), -1})
	}
	return dst
}

// The four helpers are the Rust regexes \w$, ^\w, \s*$ and ^\s* (regex crate,
// Unicode classes).
func endsWithWord(s string) bool {
	r, _ := utf8.DecodeLastRuneInString(s)
	return len(s) > 0 && isWordRune(r)
}

func startsWithWord(s string) bool {
	r, _ := utf8.DecodeRuneInString(s)
	return len(s) > 0 && isWordRune(r)
}

func isWordRune(r rune) bool { return r < 128 && asciiClass[r]&clW != 0 || r >= 128 && isWordSlow(r) }

func trailingSpaceStart(s string) int {
	for len(s) > 0 {
		r, w := utf8.DecodeLastRuneInString(s)
		if !unicode.IsSpace(r) {
			break
		}
		s = s[:len(s)-w]
	}
	return len(s)
}

func leadingSpaceLen(s string) int {
	n := 0
	for n < len(s) {
		r, w := utf8.DecodeRuneInString(s[n:])
		if !unicode.IsSpace(r) {
			break
		}
		n += w
	}
	return n
}

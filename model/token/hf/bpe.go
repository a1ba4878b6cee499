package hf

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// bpe is the BPE model of tokenizer.json, with the merge loop of the Rust library's
// Word::merge_all: repeatedly merge the adjacent pair of lowest rank, the leftmost
// one on ties. A pair's merged id is determined by the concatenated string, so a
// queue entry is stale exactly when its pair is no longer adjacent; both the simple
// scan used for short words and the heap used for long ones pick the same merge
// as the Rust heap at every step.
//
// Immutable after load; safe for concurrent use.
type bpe struct {
	vocab  map[string]uint32
	tokens []string // id -> token, for the model's own vocabulary
	size   int      // number of entries in vocab (Rust's get_vocab_size)
	merges map[uint64]uint64

	unk          int64 // id of unk_token, -1 if none
	prefix       string
	suffix       string
	fuseUnk      bool
	byteFallback bool
	ignoreMerges bool
	fallback     [256]int64 // ids of "<0xNN>", -1 where missing

	// raw is true when words arrive as raw bytes that stand for their ByteLevel
	// runes (the ByteLevel pre-tokenizer is the last stage), so no word is ever
	// mapped to its byte-level string.
	raw bool
	// rawInit[k][b] is the initial symbol for byte b, where k says whether the byte
	// is first/last in the word (prefix/suffix); -1 where the vocabulary lacks it.
	rawInit [4][256]int64
	// charInit holds the initial symbols of single runes when there is no
	// prefix/suffix, for char mode.
	charASCII [128]int64
	// whole maps a word (in the input alphabet of the mode) straight to its id when
	// BPE gives that single token: every vocabulary entry under ignore_merges,
	// otherwise the entries whose own merge gives back the entry. Computed at load.
	whole map[string]uint32
	// bigrams holds every pair of adjacent runes inside a vocabulary token, when
	// words can be long (no pre-tokenizer) and merged tokens are plain
	// concatenations (no subword prefix); nil otherwise. A merge is a vocabulary
	// token, so no symbol ever spans a boundary whose two runes are not a bigram:
	// a long word is cut there and the parts merged on their own, with the same
	// result as merging it whole.
	bigrams map[uint64]struct{}
}

func pairKey(a, b uint32) uint64 { return uint64(a)<<32 | uint64(b) }

// rank returns the rank and merged id of the pair (a, b).
func (m *bpe) rank(a, b uint32) (uint32, uint32, bool) {
	v, ok := m.merges[pairKey(a, b)]
	return uint32(v >> 32), uint32(v), ok
}

// bpeConfig is the JSON model section.
type bpeConfig struct {
	Type                    string            `json:"type"`
	Dropout                 *float64          `json:"dropout"`
	UnkToken                *string           `json:"unk_token"`
	ContinuingSubwordPrefix *string           `json:"continuing_subword_prefix"`
	EndOfWordSuffix         *string           `json:"end_of_word_suffix"`
	FuseUnk                 bool              `json:"fuse_unk"`
	ByteFallback            bool              `json:"byte_fallback"`
	IgnoreMerges            bool              `json:"ignore_merges"`
	Vocab                   map[string]uint32 `json:"vocab"`
	Merges                  mergesJSON        `json:"merges"`
}

func newBPE(c *bpeConfig, raw bool) (*bpe, error) {
	if c.Dropout != nil && *c.Dropout != 0 {
		// Dropout makes encoding random; an engine never serves with it, and no
		// exact prediction is possible.
		return nil, fmt.Errorf("bpe: dropout %v is not supported", *c.Dropout)
	}
	m := &bpe{
		vocab:        c.Vocab,
		size:         len(c.Vocab),
		unk:          -1,
		fuseUnk:      c.FuseUnk,
		byteFallback: c.ByteFallback,
		ignoreMerges: c.IgnoreMerges,
		raw:          raw,
	}
	if c.ContinuingSubwordPrefix != nil {
		m.prefix = *c.ContinuingSubwordPrefix
	}
	if c.EndOfWordSuffix != nil {
		m.suffix = *c.EndOfWordSuffix
	}
	maxID := -1
	for _, id := range m.vocab {
		maxID = max(maxID, int(id))
	}
	m.tokens = make([]string, maxID+1)
	for s, id := range m.vocab {
		m.tokens[id] = s
	}
	if c.UnkToken != nil {
		// The Rust model errors only when an unknown rune needs the unk token; an
		// unk_token missing from the vocabulary behaves as none here.
		if id, ok := m.vocab[*c.UnkToken]; ok {
			m.unk = int64(id)
		}
	}
	for b := 0; b < 256; b++ {
		m.fallback[b] = -1
		if id, ok := m.vocab[fmt.Sprintf("<0x%02X>", b)]; ok {
			m.fallback[b] = int64(id)
		}
	}
	m.merges = make(map[uint64]uint64, len(c.Merges))
	for i, mg := range c.Merges {
		a, ok := m.vocab[mg[0]]
		if !ok {
			return nil, fmt.Errorf("bpe: merge %d: token %q not in vocab", i, mg[0])
		}
		b, ok := m.vocab[mg[1]]
		if !ok {
			return nil, fmt.Errorf("bpe: merge %d: token %q not in vocab", i, mg[1])
		}
		if len(mg[1]) < len(m.prefix) {
			return nil, fmt.Errorf("bpe: merge %d: token %q shorter than the subword prefix", i, mg[1])
		}
		merged := mg[0] + mg[1][len(m.prefix):]
		id, ok := m.vocab[merged]
		if !ok {
			return nil, fmt.Errorf("bpe: merge %d: merged token %q not in vocab", i, merged)
		}
		// Later duplicates win, as in the Rust HashMap collect.
		m.merges[pairKey(a, b)] = uint64(i)<<32 | uint64(id)
	}
	for r := 0; r < 128; r++ {
		m.charASCII[r] = -1
		if id, ok := m.vocab[string(rune(r))]; ok {
			m.charASCII[r] = int64(id)
		}
	}
	for k := 0; k < 4; k++ {
		first, last := k&1 != 0, k&2 != 0
		for b := 0; b < 256; b++ {
			s := string(byteRune[b])
			if !first {
				s = m.prefix + s
			}
			if last {
				s += m.suffix
			}
			m.rawInit[k][b] = -1
			if id, ok := m.vocab[s]; ok {
				m.rawInit[k][b] = int64(id)
			}
		}
	}
	m.buildWhole()
	return m, nil
}

// buildWhole fills the whole-word table (see the field).
func (m *bpe) buildWhole() {
	m.whole = make(map[string]uint32, len(m.vocab))
	var ws wordScratch
	var buf []byte
	for s, id := range m.vocab {
		if !m.ignoreMerges {
			ws.syms = m.initChars(ws.syms[:0], s)
			ws.syms = m.mergeAll(ws.syms, &ws)
			if len(ws.syms) != 1 || ws.syms[0] != id {
				continue
			}
		}
		key := s
		if m.raw {
			var ok bool
			buf, ok = fromByteLevel(buf[:0], s)
			if !ok {
				continue
			}
			key = string(buf)
		}
		m.whole[key] = id
	}
}

// wordScratch holds the buffers of one word's merge; owned by one encode call.
type wordScratch struct {
	syms  []uint32
	ranks []uint32
	ids   []uint32
	links []link
	heap  []hitem
	part  []uint32
	tmp   []byte
}

// appendWord appends the ids of one pre-tokenized word.
func (m *bpe) appendWord(dst []uint32, w string, ws *wordScratch) []uint32 {
	if len(w) == 0 {
		return dst
	}
	if id, ok := m.whole[w]; ok {
		return append(dst, id)
	}
	if m.raw {
		syms, ok := m.initRaw(ws.syms[:0], w)
		if !ok {
			// A byte without an initial symbol: go through the byte-level string so
			// that unk and byte fallback see the runes the Rust model sees.
			ws.tmp = appendByteLevel(ws.tmp[:0], w)
			syms = m.initChars(ws.syms[:0], string(ws.tmp))
		}
		ws.syms = m.mergeAll(syms, ws)
	} else {
		ws.syms = m.initChars(ws.syms[:0], w)
		if len(ws.syms) > shortWord && m.bigrams != nil {
			return m.mergeParts(dst, ws)
		}
		ws.syms = m.mergeAll(ws.syms, ws)
	}
	return append(dst, ws.syms...)
}

func runePair(a, b rune) uint64 { return uint64(a)<<32 | uint64(uint32(b)) }

// buildBigrams fills m.bigrams (see the field).
func (m *bpe) buildBigrams() {
	m.bigrams = make(map[uint64]struct{})
	for s := range m.vocab {
		prev := rune(-1)
		for _, r := range s {
			if prev >= 0 {
				m.bigrams[runePair(prev, r)] = struct{}{}
			}
			prev = r
		}
	}
}

// mergeParts merges the initial symbols in ws.syms part by part, cutting where
// the last rune of one symbol and the first rune of the next never meet inside a
// vocabulary token, and appends the result to dst.
func (m *bpe) mergeParts(dst []uint32, ws *wordScratch) []uint32 {
	syms := ws.syms
	part := ws.part[:0]
	prevLast := rune(-1)
	for i, id := range syms {
		tok := m.tokens[id]
		first, _ := utf8.DecodeRuneInString(tok)
		if i > 0 {
			if _, ok := m.bigrams[runePair(prevLast, first)]; !ok {
				part = m.mergeAll(part, ws)
				dst = append(dst, part...)
				part = part[:0]
			}
		}
		prevLast, _ = utf8.DecodeLastRuneInString(tok)
		part = append(part, id)
	}
	part = m.mergeAll(part, ws)
	ws.part = part[:0]
	return append(dst, part...)
}

func (m *bpe) initRaw(syms []uint32, w string) ([]uint32, bool) {
	n := len(w)
	if m.prefix == "" && m.suffix == "" {
		t := &m.rawInit[0]
		for i := 0; i < n; i++ {
			id := t[w[i]]
			if id < 0 {
				return syms, false
			}
			syms = append(syms, uint32(id))
		}
		return syms, true
	}
	for i := 0; i < n; i++ {
		k := 0
		if i == 0 {
			k |= 1
		}
		if i == n-1 {
			k |= 2
		}
		id := m.rawInit[k][w[i]]
		if id < 0 {
			return syms, false
		}
		syms = append(syms, uint32(id))
	}
	return syms, true
}

// initChars is the first half of the Rust merge_word: one symbol per rune, with
// the subword prefix/suffix, byte fallback and (fused) unk.
func (m *bpe) initChars(syms []uint32, w string) []uint32 {
	unk, unkPending := uint32(0), false
	plain := m.prefix == "" && m.suffix == ""
	for i := 0; i < len(w); {
		r, n := utf8.DecodeRuneInString(w[i:])
		if plain && r < 128 && m.charASCII[r] >= 0 {
			if unkPending {
				syms = append(syms, unk)
				unkPending = false
			}
			syms = append(syms, uint32(m.charASCII[r]))
			i += n
			continue
		}
		s := w[i : i+n]
		if m.prefix != "" && i > 0 {
			s = m.prefix + s
		}
		if m.suffix != "" && i+n == len(w) {
			s += m.suffix
		}
		i += n
		if id, ok := m.vocab[s]; ok {
			if unkPending {
				syms = append(syms, unk)
				unkPending = false
			}
			syms = append(syms, id)
			continue
		}
		if m.byteFallback {
			ok := true
			for k := 0; k < len(s); k++ {
				if m.fallback[s[k]] < 0 {
					ok = false
					break
				}
			}
			if ok {
				// As in Rust, a pending unk is not flushed before the fallback bytes.
				for k := 0; k < len(s); k++ {
					syms = append(syms, uint32(m.fallback[s[k]]))
				}
				continue
			}
		}
		if m.unk >= 0 {
			if unkPending && !m.fuseUnk {
				syms = append(syms, unk)
			}
			unk, unkPending = uint32(m.unk), true
		}
	}
	if unkPending {
		syms = append(syms, unk)
	}
	return syms
}

// shortWord is the longest word merged by the quadratic scan; longer words use the
// heap. Both give the Rust merge order (see bpe).
const shortWord = 64

func (m *bpe) mergeAll(syms []uint32, ws *wordScratch) []uint32 {
	if len(syms) < 2 {
		return syms
	}
	if len(syms) > shortWord {
		return m.mergeHeap(syms, ws)
	}
	n := len(syms)
	ranks := growU32(ws.ranks, n)
	ids := growU32(ws.ids, n)
	ws.ranks, ws.ids = ranks, ids
	const none = ^uint32(0)
	for i := 0; i < n-1; i++ {
		if r, id, ok := m.rank(syms[i], syms[i+1]); ok {
			ranks[i], ids[i] = r, id
		} else {
			ranks[i] = none
		}
	}
	for n > 1 {
		best, bi := none, -1
		for i := 0; i < n-1; i++ {
			if ranks[i] < best {
				best, bi = ranks[i], i
			}
		}
		if bi < 0 {
			break
		}
		syms[bi] = ids[bi]
		if bi+2 < n {
			copy(syms[bi+1:], syms[bi+2:n])
			copy(ranks[bi+1:], ranks[bi+2:n-1])
			copy(ids[bi+1:], ids[bi+2:n-1])
		}
		n--
		if bi > 0 {
			if r, id, ok := m.rank(syms[bi-1], syms[bi]); ok {
				ranks[bi-1], ids[bi-1] = r, id
			} else {
				ranks[bi-1] = none
			}
		}
		if bi < n-1 {
			if r, id, ok := m.rank(syms[bi], syms[bi+1]); ok {
				ranks[bi], ids[bi] = r, id
			} else {
				ranks[bi] = none
			}
		}
	}
	return syms[:n]
}

func growU32(b []uint32, n int) []uint32 {
	if cap(b) < n {
		return make([]uint32, n, 2*n)
	}
	return b[:n]
}

type link struct {
	prev, next int32 // -1 at the ends
	dead       bool
}

// hitem is a queued merge, ordered by rank, then position (Rust's Merge).
type hitem struct {
	rank, pos, newID uint32
}

func hless(a, b hitem) bool { return a.rank < b.rank || a.rank == b.rank && a.pos < b.pos }

func hpush(h []hitem, x hitem) []hitem {
	h = append(h, x)
	for i := len(h) - 1; i > 0; {
		p := (i - 1) / 2
		if !hless(h[i], h[p]) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
	return h
}

func hpop(h []hitem) (hitem, []hitem) {
	top := h[0]
	n := len(h) - 1
	h[0] = h[n]
	h = h[:n]
	for i := 0; ; {
		l := 2*i + 1
		if l >= n {
			break
		}
		c := l
		if r := l + 1; r < n && hless(h[r], h[l]) {
			c = r
		}
		if !hless(h[c], h[i]) {
			break
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
	return top, h
}

// mergeHeap is Word::merge_all with its binary heap and linked symbols.
func (m *bpe) mergeHeap(syms []uint32, ws *wordScratch) []uint32 {
	n := len(syms)
	if cap(ws.links) < n {
		ws.links = make([]link, n, 2*n)
	}
	links := ws.links[:n]
	for i := range links {
		links[i] = link{prev: int32(i - 1), next: int32(i + 1)}
	}
	links[n-1].next = -1
	h := ws.heap[:0]
	for i := 0; i < n-1; i++ {
		if r, id, ok := m.rank(syms[i], syms[i+1]); ok {
			h = hpush(h, hitem{r, uint32(i), id})
		}
	}
	for len(h) > 0 {
		var top hitem
		top, h = hpop(h)
		p := int32(top.pos)
		if links[p].dead || links[p].next < 0 {
			continue
		}
		q := links[p].next
		if _, id, ok := m.rank(syms[p], syms[q]); !ok || id != top.newID {
			continue // stale
		}
		syms[p] = top.newID
		links[q].dead = true
		nx := links[q].next
		links[p].next = nx
		if nx >= 0 {
			links[nx].prev = p
		}
		if pv := links[p].prev; pv >= 0 {
			if r, id, ok := m.rank(syms[pv], syms[p]); ok {
				h = hpush(h, hitem{r, uint32(pv), id})
			}
		}
		if nx >= 0 {
			if r, id, ok := m.rank(syms[p], syms[nx]); ok {
				h = hpush(h, hitem{r, uint32(p), id})
			}
		}
	}
	ws.heap = h
	k := 0
	for i := 0; i < n; i++ {
		if !links[i].dead {
			syms[k] = syms[i]
			k++
		}
	}
	return syms[:k]
}

// mergesJSON accepts both merge forms: "a b" strings and ["a", "b"] pairs.
type mergesJSON [][2]string

func (ms *mergesJSON) UnmarshalJSON(b []byte) error {
	// Peek at the first element to pick the form without decoding twice.
	i := 0
	for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\r' || b[i] == '\t' || b[i] == '[') {
		if b[i] == '[' {
			i++
			for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\r' || b[i] == '\t') {
				i++
			}
			break
		}
		i++
	}
	if i < len(b) && b[i] == '[' {
		var pairs [][2]string
		if err := jsonUnmarshal(b, &pairs); err != nil {
			return err
		}
		*ms = pairs
		return nil
	}
	var lines []string
	if err := jsonUnmarshal(b, &lines); err != nil {
		return err
	}
	// Legacy form, as convert_merges_to_hashmap reads it: "#version" lines are
	// skipped and every other line is exactly two tokens split at a space.
	out := make([][2]string, 0, len(lines))
	for _, line := range lines {
		if strings.HasPrefix(line, "#version") {
			continue
		}
		a, b, ok := strings.Cut(line, " ")
		if !ok || strings.Contains(b, " ") {
			return fmt.Errorf("merge %d: %s is not two tokens", len(out)+1, strconv.Quote(line))
		}
		out = append(out, [2]string{a, b})
	}
	*ms = out
	return nil
}

package hf

import (
	"hash/maphash"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"
)

// minCachedBytes is the shortest piece a PieceCache keeps: encoding a piece
// this short ("\n", "assistant\n") costs less than looking it up.
const minCachedBytes = 32

// PieceCache keeps the ids of the pieces of text between added tokens, so
// that the pieces prompts repeat (a system prompt, the earlier turns of a
// conversation) are tokenized once. It holds at most a given number of
// tokens and evicts the least recently used pieces beyond that.
//
// Caching a piece is exact, not an approximation: the Rust library (and
// Encode) cuts the text at every added token and runs the normalizer,
// pre-tokenizer and model on each piece between them on its own
// (AddedVocabulary::extract_and_normalize), so a piece's ids depend on
// nothing but its text and on whether it starts the text (Metaspace's
// prepend_scheme "first"); both are the key. The post-processor's special
// tokens (addSpecial) are added around the pieces, outside the cache.
//
// A PieceCache belongs to the Tokenizer that made it (NewCache) and is safe
// for concurrent use: one mutex guards the index and the recency list, and
// is never held while text is hashed, compared or encoded. Pieces, once
// stored, are immutable. It starts no goroutines.
type PieceCache struct {
	t         *Tokenizer
	seed      maphash.Seed
	maxTokens int

	mu     sync.Mutex
	pieces map[pieceKey]*piece // guarded by mu
	lru    piece               // guarded by mu; sentinel: lru.next is the most recent
	tokens int                 // guarded by mu; sum of the stored pieces' cost

	hits, misses atomic.Uint64
}

type pieceKey struct {
	hash  uint64 // maphash of the text
	first bool   // the piece starts the text
}

// piece is one cached piece. text and ids never change once stored; prev
// and next are guarded by the cache's mutex.
type piece struct {
	key        pieceKey
	text       string
	ids        []uint32
	prev, next *piece
}

func (p *piece) cost() int { return max(1, len(p.ids)) }

// NewCache returns an empty cache of t's pieces holding at most maxTokens
// tokens; maxTokens ≤ 0 gives a cache that keeps nothing.
func (t *Tokenizer) NewCache(maxTokens int) *PieceCache {
	c := &PieceCache{t: t, seed: maphash.MakeSeed(), maxTokens: maxTokens, pieces: make(map[pieceKey]*piece)}
	c.lru.next, c.lru.prev = &c.lru, &c.lru
	return c
}

// Tokenizer returns the tokenizer whose pieces c keeps.
func (c *PieceCache) Tokenizer() *Tokenizer { return c.t }

// Encode is c's Tokenizer's Encode, with the pieces looked up in c first
// and stored in c after; the ids are the same.
func (c *PieceCache) Encode(dst []uint32, text string, addSpecial bool) []uint32 {
	return c.t.EncodeCached(dst, text, addSpecial, c)
}

// CacheStats is a snapshot of a PieceCache's counters.
type CacheStats struct {
	Pieces, Tokens int    // stored now
	Hits, Misses   uint64 // lookups of pieces long enough to be cached
}

// Stats returns c's counters.
func (c *PieceCache) Stats() CacheStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return CacheStats{Pieces: len(c.pieces), Tokens: c.tokens, Hits: c.hits.Load(), Misses: c.misses.Load()}
}

// EncodeCached is Encode with the ids of the pieces between added tokens
// taken from cache, and those it lacks stored in it. The ids are exactly
// Encode's. A nil cache, or one made by another Tokenizer, is not used.
func (t *Tokenizer) EncodeCached(dst []uint32, text string, addSpecial bool, cache *PieceCache) []uint32 {
	if cache == nil || cache.t != t || cache.maxTokens <= 0 {
		return t.Encode(dst, text, addSpecial)
	}
	if !utf8.ValidString(text) {
		text = toValidUTF8(text)
	}
	if addSpecial {
		dst = append(dst, t.specialPrefix...)
	}
	e := t.getEncoder()
	e.dst = dst
	e.cache = cache
	e.encode(text)
	dst = e.dst
	t.putEncoder(e)
	if addSpecial {
		dst = append(dst, t.specialSuffix...)
	}
	return dst
}

// cachedSegment is segment through e.cache.
func (e *encoder) cachedSegment(s string, first bool) {
	c := e.cache
	if len(s) < minCachedBytes {
		e.segment(s, first)
		return
	}
	key := pieceKey{maphash.String(c.seed, s), first}
	if ids, ok := c.get(key, s); ok {
		e.dst = append(e.dst, ids...)
		return
	}
	n := len(e.dst)
	e.segment(s, first)
	c.put(key, s, e.dst[n:])
}

// get returns the ids of the piece (key, s). The text is compared outside
// the lock: a stored piece's text and ids never change.
func (c *PieceCache) get(key pieceKey, s string) ([]uint32, bool) {
	c.mu.Lock()
	p := c.pieces[key]
	if p != nil {
		c.unlink(p)
		c.pushFront(p)
	}
	c.mu.Unlock()
	if p != nil && p.text == s {
		c.hits.Add(1)
		return p.ids, true
	}
	// Absent, or another text with the same 64-bit hash: a miss.
	c.misses.Add(1)
	return nil, false
}

// put stores a copy of the piece (key, s) with ids, replacing a piece of the
// same key, then evicts the least recent pieces beyond maxTokens.
func (c *PieceCache) put(key pieceKey, s string, ids []uint32) {
	if max(1, len(ids)) > c.maxTokens {
		return
	}
	p := &piece{key: key, text: strings.Clone(s), ids: slices.Clone(ids)}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old := c.pieces[key]; old != nil {
		c.unlink(old)
		c.tokens -= old.cost()
	}
	c.pieces[key] = p
	c.pushFront(p)
	c.tokens += p.cost()
	for c.tokens > c.maxTokens {
		last := c.lru.prev
		c.unlink(last)
		delete(c.pieces, last.key)
		c.tokens -= last.cost()
	}
}

func (c *PieceCache) unlink(p *piece) {
	p.prev.next, p.next.prev = p.next, p.prev
	p.prev, p.next = nil, nil
}

func (c *PieceCache) pushFront(p *piece) {
	p.prev, p.next = &c.lru, c.lru.next
	c.lru.next.prev = p
	c.lru.next = p
}

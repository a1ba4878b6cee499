package hf

import (
	"strings"
	"sync"
	"unicode/utf8"
)

// Tokenizer encodes text to token ids exactly as the Hugging Face tokenizers
// library (Rust, 0.22) does for the same tokenizer.json: added tokens, normalizer,
// pre-tokenizer, BPE model and post-processor.
//
// A Tokenizer is immutable after Load and safe for concurrent use. It keeps no cache
// of encoded words: BPE results that the vocabulary fixes (a word that is itself a
// token and that BPE maps to itself) are looked up in a table built at load, and
// everything else is merged afresh, so every Encode is "cold". The only shared
// mutable state is a sync.Pool of scratch buffers. A caller that sees the same
// prompt pieces again and again (system prompts, conversation history) passes a
// PieceCache to EncodeCached, which reuses the ids of whole pieces between added
// tokens.
type Tokenizer struct {
	model     *bpe
	norm      normalizer // nil: none
	added     *addedSet  // tokens matched on the raw text; nil if none
	addedNorm *addedSet  // tokens matched on the normalized text; nil if none
	stages    []stage
	decoder   decoder // nil: concatenate tokens

	// Post-processor ids around a single sequence when addSpecial is true.
	specialPrefix, specialSuffix []uint32

	addedByID      map[uint32]*addedToken
	addedByContent map[string]uint32
	splitSpecial   bool // tokenizer_config split_special_tokens
	// tokenizer_config clean_up_tokenization_spaces, and whether it is set
	cleanUp, cleanUpSet bool
	vocabSize           int

	specials map[string]SpecialToken // from tokenizer_config.json

	pool sync.Pool // *encoder
}

// SpecialToken is a special token named by tokenizer_config.json (bos_token, ...).
type SpecialToken struct {
	Content string
	ID      uint32
}

func (t *Tokenizer) getEncoder() *encoder {
	if e, ok := t.pool.Get().(*encoder); ok {
		return e
	}
	return &encoder{
		t:     t,
		spans: make([][]span, len(t.stages)),
		bufs:  make([][]byte, len(t.stages)),
	}
}

func (t *Tokenizer) putEncoder(e *encoder) {
	e.dst, e.pieces, e.collect, e.cache = nil, nil, false, nil
	t.pool.Put(e)
}

// Encode appends the ids of text to dst and returns the extended slice. With
// addSpecial the post-processor's special tokens are added around the text, as
// Hugging Face's encode(text, add_special_tokens=True) does; vLLM's chat path uses
// addSpecial false, since the template already holds them.
//
// Invalid UTF-8 (which the Rust library cannot receive) is first replaced, byte by
// byte, with U+FFFD.
func (t *Tokenizer) Encode(dst []uint32, text string, addSpecial bool) []uint32 {
	if !utf8.ValidString(text) {
		text = toValidUTF8(text)
	}
	if addSpecial {
		dst = append(dst, t.specialPrefix...)
	}
	e := t.getEncoder()
	e.dst = dst
	e.encode(text)
	dst = e.dst
	t.putEncoder(e)
	if addSpecial {
		dst = append(dst, t.specialSuffix...)
	}
	return dst
}

// encode runs the pipeline of TokenizerImpl::encode_single_sequence.
func (e *encoder) encode(text string) {
	t := e.t
	if t.added == nil {
		e.piece(text, true)
		return
	}
	e.segs = t.added.split(e.segs[:0], text, t.splitSpecial)
	for _, sg := range e.segs {
		if sg.tok >= 0 {
			e.dst = append(e.dst, t.added.toks[sg.tok].ID)
			continue
		}
		if sg.end > sg.start {
			e.piece(text[sg.start:sg.end], sg.start == 0)
		}
	}
}

// piece encodes a piece of text between added tokens, through the cache
// when there is one. first tells whether it starts the text.
func (e *encoder) piece(s string, first bool) {
	if e.cache != nil {
		e.cachedSegment(s, first)
		return
	}
	e.segment(s, first)
}

// segment normalizes a piece of text between added tokens, splits it on the
// normalized added tokens, and pre-tokenizes and encodes what is left.
func (e *encoder) segment(s string, first bool) {
	t := e.t
	if t.norm != nil {
		s = t.norm.normalize(s)
	}
	if len(s) == 0 {
		return
	}
	if t.addedNorm == nil {
		e.pre(0, s, first)
		return
	}
	segs := t.addedNorm.split(e.segs2[:0], s, t.splitSpecial)
	e.segs2 = segs
	for _, sg := range segs {
		if sg.tok >= 0 {
			e.dst = append(e.dst, t.addedNorm.toks[sg.tok].ID)
			continue
		}
		if sg.end > sg.start {
			e.pre(0, s[sg.start:sg.end], first && sg.start == 0)
		}
	}
}

// Count returns the number of ids Encode would produce.
func (t *Tokenizer) Count(text string, addSpecial bool) int {
	if !utf8.ValidString(text) {
		text = toValidUTF8(text)
	}
	e := t.getEncoder()
	e.dst = e.own[:0]
	e.encode(text)
	n := len(e.dst)
	e.own = e.dst[:0]
	t.putEncoder(e)
	if addSpecial {
		n += len(t.specialPrefix) + len(t.specialSuffix)
	}
	return n
}

// PreTokenize returns the pieces the pre-tokenizer alone makes of text (no
// normalizer, no added tokens), in the vocabulary's alphabet: the output of the
// Rust pre_tokenize_str. It exists for tests and debugging.
func (t *Tokenizer) PreTokenize(text string) []string {
	text = toValidUTF8(text)
	e := t.getEncoder()
	e.collect = true
	if len(text) > 0 {
		e.pre(0, text, true)
	}
	out := e.pieces
	t.putEncoder(e)
	return out
}

// TokenID returns the id of a token string (added tokens first, then the model's
// vocabulary), as the Rust token_to_id does.
func (t *Tokenizer) TokenID(s string) (uint32, bool) {
	if id, ok := t.addedByContent[s]; ok {
		return id, true
	}
	id, ok := t.model.vocab[s]
	return id, ok
}

// Token returns the token string of an id, as the Rust id_to_token does.
func (t *Tokenizer) Token(id uint32) (string, bool) {
	if a, ok := t.addedByID[id]; ok {
		return a.Content, true
	}
	if int(id) < len(t.model.tokens) {
		if s := t.model.tokens[id]; s != "" {
			return s, true
		}
		if e, ok := t.model.vocab[""]; ok && e == id {
			return "", true
		}
	}
	return "", false
}

// VocabSize is the number of distinct tokens: the model's vocabulary plus the added
// tokens it does not hold (Rust get_vocab_size(true)).
func (t *Tokenizer) VocabSize() int { return t.vocabSize }

// Special returns a special token named in tokenizer_config.json: "bos_token",
// "eos_token", "pad_token" or "unk_token". It is false when no config was given,
// the config does not set it, or the tokenizer has no such token.
func (t *Tokenizer) Special(name string) (SpecialToken, bool) {
	s, ok := t.specials[name]
	return s, ok
}

// BOS returns the beginning-of-sequence token of tokenizer_config.json.
func (t *Tokenizer) BOS() (SpecialToken, bool) { return t.Special("bos_token") }

// EOS returns the end-of-sequence token of tokenizer_config.json.
func (t *Tokenizer) EOS() (SpecialToken, bool) { return t.Special("eos_token") }

// Decode turns ids back into text through the tokenizer's decoder, keeping special
// tokens. It is meant for debugging; unknown ids are skipped.
func (t *Tokenizer) Decode(ids []uint32) string {
	toks := make([]string, 0, len(ids))
	for _, id := range ids {
		if s, ok := t.Token(id); ok {
			toks = append(toks, s)
		}
	}
	if t.decoder == nil {
		return strings.Join(toks, " ") // the Rust default without a decoder
	}
	return strings.Join(t.decoder.decode(toks), "")
}

// DecodeText decodes ids as transformers' decode(ids) does with its default
// skip_special_tokens=False, which is vLLM's /detokenize: Decode, then
// clean_up_tokenization when tokenizer_config.json sets
// clean_up_tokenization_spaces. ok is false when the config does not set
// it, since transformers' default for it has changed between releases.
func (t *Tokenizer) DecodeText(ids []uint32) (text string, ok bool) {
	if !t.cleanUpSet {
		return "", false
	}
	text = t.Decode(ids)
	if t.cleanUp {
		text = cleanUpTokenization(text)
	}
	return text, true
}

// cleanUpTokenization is transformers' clean_up_tokenization: the spaces
// an English word-piece decode leaves before punctuation and contractions
// removed, in its order (each replacement as Python's str.replace).
func cleanUpTokenization(s string) string {
	for _, r := range [...][2]string{{" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","}, {" ' ", "'"},
		{" n't", "n't"}, {" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}} {
		s = strings.ReplaceAll(s, r[0], r[1])
	}
	return s
}

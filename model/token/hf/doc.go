// Package hf loads a Hugging Face tokenizer.json and encodes text to the token ids
// that Hugging Face's Rust tokenizers library (0.22, the one vLLM uses through
// transformers) produces for it, with no model-specific code.
//
// It owns the whole encode pipeline of the Rust TokenizerImpl for BPE models:
// added tokens (special or not, single_word/lstrip/rstrip/normalized, matched
// leftmost-longest on the raw text and then on the normalized text), normalizers
// (NFC/NFD/NFKC/NFKD, Lowercase, Strip, StripAccents, Replace, Prepend, ByteLevel,
// BertNormalizer, Sequence), pre-tokenizers (Split with every behavior and invert,
// ByteLevel, Metaspace, Digits, Whitespace, WhitespaceSplit, Punctuation,
// BertPreTokenizer, CharDelimiterSplit, Sequence), the BPE model (byte-level, or
// SentencePiece-style with byte_fallback, fuse_unk, unk, ignore_merges,
// continuing_subword_prefix, end_of_word_suffix), post-processors
// (TemplateProcessing, RobertaProcessing, BertProcessing, ByteLevel, Sequence) and
// decoders, the last for debugging. Other models (WordPiece, Unigram, WordLevel),
// the Precompiled and Nmt normalizers and BPE dropout are reported by Load as
// unsupported rather than approximated.
//
// hf starts no goroutines and does no I/O: Load takes bytes and LoadDir an fs.FS.
// It keeps no mutable globals, only immutable tables. A Tokenizer is immutable after
// Load and safe for concurrent use; so is a PieceCache, behind its own mutex.
//
// Design notes:
//   - Split regexes: the patterns real byte-level models ship (GPT-2's, the
//     cl100k-style Qwen2/2.5/3 one, Llama 3's) run on hand-written scanners that
//     reproduce Oniguruma's backtracking exactly (scanner.go); any other pattern
//     runs on regexp2. On the Qwen pattern the scanner is about 40 times faster
//     than regexp2 (BenchmarkSplit) and allocates nothing.
//   - Character classes follow the Rust library, not Go's Unicode 15 tables: its
//     Oniguruma has Unicode 16.0 letters and digits, its lowercasing Rust std's
//     Unicode, and its NFKC/NFKD/StripAccents an older Unicode than x/text.
//     unicode16.go holds the differences, read back from the Rust library itself
//     (scripts/gen-hf-unicode.sh).
//   - BPE merges follow Word::merge_all: the lowest-rank adjacent pair, leftmost
//     on ties. Short words use a quadratic scan, long ones a heap; both pick the
//     same pair as the Rust heap at every step. Without a pre-tokenizer (Mistral,
//     Llama 2) a whole segment is one word; it is cut where no vocabulary token can
//     span and the parts merged alone, which gives the same result.
//   - There is no word cache. A word that is itself a token, and that BPE maps to
//     itself, is found in a table built at load; every other word is merged
//     afresh. Every call is therefore "cold", and still well over ten times faster
//     than the Rust library (bench/results/tokenizer-*.md).
//   - PieceCache (EncodeCached) caches above the model instead: the ids of each
//     piece of text between added tokens, keyed by the piece and whether it
//     starts the text. The Rust library encodes those pieces independently, so
//     the cached ids are exact; a repeated system prompt costs a hash and a
//     copy (bench/results/prepare-2026-11-29.md). The cache is bounded in
//     tokens, evicts the least recently used pieces and is safe for
//     concurrent use.
//   - Text is handled as bytes until the model: the ByteLevel byte-to-rune mapping
//     is folded into the model's initial symbols when ByteLevel is the last
//     pre-tokenizer, so no byte-level string is built.
//
// Known differences from the Rust library, all outside what real tokenizers hit:
// the regexp2 fallback uses Go's Unicode 15 tables for \p{Lu}, \p{Lo}, \p{M} and
// the like (only \p{L}, \p{N} and \d are widened to Unicode 16) and .NET case
// folding under (?i); Metaspace's prepend_scheme "first" decides "at the start of
// the text" from the piece's offset in the normalized text, which differs from the
// Rust alignment only when a normalizer deletes or inserts text at the start and a
// Split precedes the Metaspace; invalid UTF-8 (which the Rust library cannot
// receive) is encoded as U+FFFD per bad byte; truncation and padding are ignored.
package hf

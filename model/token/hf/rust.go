//go:build tokenizers

package hf

import (
	"github.com/daulet/tokenizers"
)

// Rust encodes with Hugging Face's Rust tokenizers library itself, through the cgo
// binding github.com/daulet/tokenizers. It is built only with the `tokenizers`
// build tag and links against libtokenizers.a, which the user supplies (see the
// binding's README); it exists for users who want the reference implementation in
// process and for cross-checking this package. Safe for concurrent use (the Rust
// encode takes &self); Close releases it.
type Rust struct {
	tk *tokenizers.Tokenizer
}

// LoadRust loads tokenizer.json bytes into the Rust library. With splitSpecial the
// special tokens are not matched in the text (split_special_tokens).
func LoadRust(tokenizerJSON []byte, splitSpecial bool) (*Rust, error) {
	var opts []tokenizers.TokenizerOption
	if splitSpecial {
		opts = append(opts, tokenizers.WithEncodeSpecialTokens())
	}
	tk, err := tokenizers.FromBytes(tokenizerJSON, opts...)
	if err != nil {
		return nil, err
	}
	return &Rust{tk: tk}, nil
}

// Encode appends the ids of text to dst, with the same meaning as
// (*Tokenizer).Encode.
func (r *Rust) Encode(dst []uint32, text string, addSpecial bool) []uint32 {
	ids, _ := r.tk.Encode(text, addSpecial)
	return append(dst, ids...)
}

// Decode turns ids back into text, keeping special tokens.
func (r *Rust) Decode(ids []uint32) string { return r.tk.Decode(ids, false) }

// VocabSize is the Rust library's get_vocab_size(true).
func (r *Rust) VocabSize() int { return int(r.tk.VocabSize()) }

// Close frees the Rust tokenizer.
func (r *Rust) Close() error { return r.tk.Close() }

package hf

import "github.com/inferrail/inferrail/model/token"

// Chat is a Tokenizer used the way vLLM encodes a rendered chat prompt:
// add_special_tokens=false, since the template already holds the special tokens.
// It satisfies token.Encoder.
type Chat struct{ T *Tokenizer }

// Encode appends the ids of text, without post-processor special tokens.
func (c Chat) Encode(dst []uint32, text string) []uint32 { return c.T.Encode(dst, text, false) }

var _ token.Encoder = Chat{}

// Package token turns text into token ids.
//
// It holds the deterministic stand-in tokenizer that the simulator uses and that
// a gateway selects with `tokenizer: builtin:sim`, and the chat template the
// simulator renders messages with. Later tokenizers (Hugging Face tokenizer.json)
// live here too.
//
// token starts no goroutines, does no I/O and keeps no mutable globals. A Sim
// value is immutable and safe for concurrent use.
package token

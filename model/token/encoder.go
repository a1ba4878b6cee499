package token

// Encoder turns text into token ids, appending them to dst. It is the seam
// between a gateway and its tokenizers: Sim, and the Hugging Face tokenizer.json
// encoder in model/token/hf (through hf.Chat), satisfy it. Implementations are
// safe for concurrent use.
type Encoder interface {
	Encode(dst []uint32, text string) []uint32
}

var _ Encoder = Sim{}

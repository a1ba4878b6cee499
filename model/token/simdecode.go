package token

import "strconv"

// Decode is the text of ids in the Sim vocabulary, the simulator's answer
// to vLLM's POST /detokenize; the gateway answers it with this function for
// a model whose tokenizer is builtin:sim, so the two cannot disagree.
//
// Sim ids are hashes, so only pieces it can name decode to their text: the
// chat template's markers and role lines, the words Generate produces, and
// every single ASCII character. When two of those share an id, the first in
// that order wins. Any other id below VocabSize decodes to "<|id:N|>", and
// an id at or past VocabSize to nothing, as a Hugging Face tokenizer skips
// the ids it has no token for.
func (Sim) Decode(ids []uint32) string {
	known := simPieces()
	var b []byte
	for _, id := range ids {
		switch p, ok := known[id]; {
		case ok:
			b = append(b, p...)
		case id < VocabSize:
			b = append(b, "<|id:"...)
			b = strconv.AppendUint(b, uint64(id), 10)
			b = append(b, "|>"...)
		}
	}
	return string(b)
}

// simPieces maps the ids of the pieces Sim can name to their text. It is
// built on every call: a few hundred hashes, and no package state.
func simPieces() map[uint32]string {
	m := make(map[uint32]string, 256)
	add := func(text string) {
		for start := 0; start < len(text); {
			end := pieceEnd(text, start)
			id := pieceID(text[start:end])
			if _, dup := m[id]; !dup {
				m[id] = text[start:end]
			}
			start = end
		}
	}
	var chat []Message
	for _, role := range []string{"system", "user", "assistant", "tool"} {
		chat = append(chat, Message{Role: role})
	}
	add(RenderSimChat(chat, true))
	for _, w := range genWords {
		add(w + " ")
	}
	for c := byte(0x20); c < 0x7f; c++ {
		add(string(rune(c)))
	}
	add("\t")
	add("\n")
	add("\r")
	return m
}

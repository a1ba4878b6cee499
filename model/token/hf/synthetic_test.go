package hf

import (
	"encoding/json"
	"slices"
	"testing"
)

// synthJSON builds a tiny GPT-2-style tokenizer.json: the 256 byte-level symbols
// (id = byte value), fifteen merges, two special tokens, the ByteLevel
// pre-tokenizer with its built-in regex, a TemplateProcessing post-processor and
// the ByteLevel decoder. Nothing in it comes from the Qwen3 or Mistral files.
func synthJSON(t testing.TB) []byte {
	t.Helper()
	vocab := map[string]int{}
	for b := 0; b < 256; b++ {
		vocab[string(byteRune[b])] = b
	}
	merges := [][2]string{{"Ġ", "t"}, {"h", "e"}, {"Ġt", "he"}, {"l", "l"}, {"e", "ll"}, {"h", "ell"},
		{"hell", "o"}, {"Ġ", "w"}, {"o", "r"}, {"Ġw", "or"}, {"l", "d"}, {"Ġwor", "ld"}, {"Ġ", "Ġ"}, {"1", "2"}, {"Ã", "©"}}
	for _, m := range merges {
		if _, ok := vocab[m[0]+m[1]]; !ok {
			vocab[m[0]+m[1]] = len(vocab)
		}
	}
	end, bos := len(vocab), len(vocab)+1
	special := func(id int, content string) map[string]any {
		return map[string]any{"id": id, "content": content, "single_word": false, "lstrip": false,
			"rstrip": false, "normalized": false, "special": true}
	}
	doc := map[string]any{
		"version":      "1.0",
		"added_tokens": []any{special(end, "<|end|>"), special(bos, "<|bos|>")},
		"normalizer":   nil,
		"pre_tokenizer": map[string]any{"type": "ByteLevel", "add_prefix_space": false,
			"trim_offsets": true, "use_regex": true},
		"post_processor": map[string]any{
			"type": "TemplateProcessing",
			"single": []any{
				map[string]any{"SpecialToken": map[string]any{"id": "<|bos|>", "type_id": 0}},
				map[string]any{"Sequence": map[string]any{"id": "A", "type_id": 0}},
				map[string]any{"SpecialToken": map[string]any{"id": "<|end|>", "type_id": 0}},
			},
			"special_tokens": map[string]any{
				"<|bos|>": map[string]any{"id": "<|bos|>", "ids": []int{bos}, "tokens": []string{"<|bos|>"}},
				"<|end|>": map[string]any{"id": "<|end|>", "ids": []int{end}, "tokens": []string{"<|end|>"}},
			},
		},
		"decoder": map[string]any{"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
		"model": map[string]any{"type": "BPE", "dropout": nil, "unk_token": nil, "continuing_subword_prefix": nil,
			"end_of_word_suffix": nil, "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
			"vocab": vocab, "merges": merges},
	}
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func synthTokenizer(t testing.TB) *Tokenizer {
	t.Helper()
	tok, err := Load(synthJSON(t), []byte(`{"bos_token": "<|bos|>", "eos_token": {"content": "<|end|>"}}`))
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestSynthetic checks a byte-level BPE tokenizer built in the test against ids
// that Hugging Face tokenizers 0.22.2 (Rust) produced for the same tokenizer.json.
func TestSynthetic(t *testing.T) {
	tok := synthTokenizer(t)
	f := func(text string, want, wantSpecial []uint32) {
		t.Helper()
		if got := tok.Encode(nil, text, false); !slices.Equal(got, want) {
			t.Errorf("Encode(%q) = %v, want %v", text, got, want)
		}
		if got := tok.Encode(nil, text, true); !slices.Equal(got, wantSpecial) {
			t.Errorf("Encode(%q, addSpecial) = %v, want %v", text, got, wantSpecial)
		}
		if got := tok.Count(text, true); got != len(wantSpecial) {
			t.Errorf("Count(%q) = %d, want %d", text, got, len(wantSpecial))
		}
		if got := tok.Decode(want); got != text {
			t.Errorf("Decode(Encode(%q)) = %q", text, got)
		}
	}
	// "hello": he (rank 1) and ll (rank 3) merge first, so e+ll -> "ell" never can.
	f("hello world", []uint32{257, 259, 111, 267}, []uint32{272, 257, 259, 111, 267, 271})
	f("the hello<|end|>world  12 123",
		[]uint32{116, 257, 32, 257, 259, 111, 271, 119, 264, 266, 32, 32, 269, 32, 269, 51},
		[]uint32{272, 116, 257, 32, 257, 259, 111, 271, 119, 264, 266, 32, 32, 269, 32, 269, 51, 271})
	f("  héllo\n\nworld ", []uint32{32, 32, 104, 270, 259, 111, 10, 10, 119, 264, 266, 32},
		[]uint32{272, 32, 32, 104, 270, 259, 111, 10, 10, 119, 264, 266, 32, 271})
	f("hellohello the", []uint32{257, 259, 111, 257, 259, 111, 258}, []uint32{272, 257, 259, 111, 257, 259, 111, 258, 271})

	if bos, ok := tok.BOS(); !ok || bos.ID != 272 || bos.Content != "<|bos|>" {
		t.Errorf("BOS() = %+v, %v", bos, ok)
	}
	if eos, ok := tok.EOS(); !ok || eos.ID != 271 {
		t.Errorf("EOS() = %+v, %v", eos, ok)
	}
	if id, ok := tok.TokenID("Ġworld"); !ok || id != 267 {
		t.Errorf("TokenID(Ġworld) = %d, %v", id, ok)
	}
	if n := tok.VocabSize(); n != 273 {
		t.Errorf("VocabSize() = %d, want 273", n)
	}
	if got := tok.PreTokenize("hello  world"); !slices.Equal(got, []string{"hello", "Ġ", "Ġworld"}) {
		t.Errorf("PreTokenize = %q", got)
	}
}

func TestLoadErrors(t *testing.T) {
	f := func(name, doc string) {
		t.Helper()
		if _, err := Load([]byte(doc), nil); err == nil {
			t.Errorf("%s: Load succeeded", name)
		}
	}
	f("not json", `{`)
	f("no model", `{"model": null}`)
	f("unigram", `{"model": {"type": "Unigram", "vocab": []}}`)
	f("dropout", `{"model": {"type": "BPE", "dropout": 0.1, "vocab": {}, "merges": []}}`)
	f("bad merge", `{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a b"]}}`)
	f("bad normalizer", `{"normalizer": {"type": "Precompiled"}, "model": {"type": "BPE", "vocab": {}, "merges": []}}`)
	f("bad regex", `{"pre_tokenizer": {"type": "Split", "pattern": {"Regex": "("}, "behavior": "Isolated"}, "model": {"type": "BPE", "vocab": {}, "merges": []}}`)
}

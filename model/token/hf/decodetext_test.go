package hf

import (
	"os"
	"testing"
)

// TestCleanUpTokenization: transformers' clean_up_tokenization, one rule
// at a time and in its order.
func TestCleanUpTokenization(t *testing.T) {
	f := func(in, want string) {
		t.Helper()
		if got := cleanUpTokenization(in); got != want {
			t.Fatalf("cleanUpTokenization(%q) = %q, want %q", in, got, want)
		}
	}
	f("Hi , there . Is n't it ? I 'm sure ! It 's we 've they 're a ' b", "Hi, there. Isn't it? I'm sure! It's we've they're a'b")
	f("no change", "no change")
	f(" ..", "..")
}

// TestDecodeTextConfig: DecodeText answers only when tokenizer_config.json
// sets clean_up_tokenization_spaces, and cleans up only when it is true.
func TestDecodeTextConfig(t *testing.T) {
	tj, err := os.ReadFile("testdata/qwen3/tokenizer.json")
	if err != nil {
		t.Fatal(err)
	}
	ids := []uint32{9707, 11, 847, 5562, 374, 18838} // "Hello, my dog is cute"
	spaced := []uint32{9707, 1154}                   // "Hello" " ,"
	f := func(cfg string, in []uint32, want string, wantOK bool) {
		t.Helper()
		tok, err := Load(tj, []byte(cfg))
		if err != nil {
			t.Fatal(err)
		}
		got, ok := tok.DecodeText(in)
		if got != want || ok != wantOK {
			t.Fatalf("config %s: DecodeText = %q, %v; want %q, %v", cfg, got, ok, want, wantOK)
		}
	}
	f(`{}`, ids, "", false)
	f(`{"clean_up_tokenization_spaces": null}`, ids, "", false)
	f(`{"clean_up_tokenization_spaces": false}`, ids, "Hello, my dog is cute", true)
	f(`{"clean_up_tokenization_spaces": false}`, spaced, "Hello ,", true)
	f(`{"clean_up_tokenization_spaces": true}`, spaced, "Hello,", true)
}

package token

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestSimPrefixStable(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	alphabet := []string{"a", "b", "c", " ", "\n", ",", "<", "|", ">", "<|im_end|>", "é", "xyz"}
	var tok Sim
	for iter := 0; iter < 2000; iter++ {
		var b strings.Builder
		for n := rng.IntN(40); n > 0; n-- {
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		text := b.String()
		full := tok.Encode(nil, text)
		if got := tok.Count(text); got != len(full) {
			t.Fatalf("Count(%q) = %d, Encode gave %d", text, got, len(full))
		}
		cut := rng.IntN(len(text) + 1)
		part := tok.Encode(nil, text[:cut])
		// Every token of the prefix but its last equals the full text's token.
		for i := 0; i+1 < len(part); i++ {
			if part[i] != full[i] {
				t.Fatalf("%q cut at %d: token %d differs", text, cut, i)
			}
		}
	}
}

func TestSimMarkers(t *testing.T) {
	var tok Sim
	f := func(text string, want int) {
		t.Helper()
		if got := tok.Count(text); got != want {
			t.Fatalf("Count(%q) = %d, want %d", text, got, want)
		}
	}
	f("", 0)
	f("<|im_start|>", 1)
	f("<|im_start|>user\n", 3) // marker, "user", "\n"
	f("hello world", 4)        // "hell" "o " "worl" "d"
	f("a<b", 2)
	f("<||>", 1)
}

func TestGenerateRetokenizes(t *testing.T) {
	var tok Sim
	for seed := uint64(0); seed < 50; seed++ {
		n := int(seed * 7 % 97)
		text := Generate(seed, n)
		ids := tok.Encode(nil, text)
		if len(ids) != n {
			t.Fatalf("seed %d: %d pieces encode to %d ids", seed, n, len(ids))
		}
		var pieces []uint32
		for i := 0; i < n; i++ {
			pieces = tok.Encode(pieces, Piece(seed, i))
		}
		if !slices.Equal(ids, pieces) {
			t.Fatalf("seed %d: concatenated text tokenizes differently from its pieces", seed)
		}
		// Inside a rendered turn the answer keeps its ids.
		conv := RenderSimChat([]Message{{"user", "hi"}, {"assistant", text}}, false)
		prompt := RenderSimChat([]Message{{"user", "hi"}}, true)
		all := tok.Encode(nil, conv)
		head := tok.Encode(nil, prompt)
		if !slices.Equal(all[:len(head)], head) || !slices.Equal(all[len(head):len(head)+n], ids) {
			t.Fatalf("seed %d: answer tokens shift inside the next turn", seed)
		}
	}
}

func FuzzSimEncode(f *testing.F) {
	f.Add("<|im_start|>user\nhello<|im_end|>\n")
	f.Add("\xff\xfe<|")
	f.Fuzz(func(t *testing.T, s string) {
		var tok Sim
		ids := tok.Encode(nil, s)
		if len(ids) != tok.Count(s) {
			t.Fatalf("Encode and Count disagree on %q", s)
		}
		for _, id := range ids {
			if id < FirstID || id >= VocabSize {
				t.Fatalf("id %d out of range", id)
			}
		}
	})
}

var SinkIDs []uint32

func BenchmarkSimEncode(b *testing.B) {
	text := strings.Repeat("You are a helpful assistant, answering briefly. ", 200)
	var tok Sim
	dst := make([]uint32, 0, 4096)
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		dst = tok.Encode(dst[:0], text)
	}
	SinkIDs = dst
}

// TestSimDecode: the pieces Sim can name decode back to their text (a chat
// of generated answers, ASCII punctuation), others to a placeholder, and
// ids past the vocabulary to nothing.
func TestSimDecode(t *testing.T) {
	var tok Sim
	f := func(ids []uint32, want string) {
		t.Helper()
		if got := tok.Decode(ids); got != want {
			t.Fatalf("Decode(%v) = %q, want %q", ids, got, want)
		}
	}
	for seed := uint64(0); seed < 20; seed++ {
		text := RenderSimChat([]Message{{Role: "system", Content: Generate(seed, 5)},
			{Role: "user", Content: Generate(seed+1, 9)}, {Role: "assistant", Content: Generate(seed+2, 3)}}, true)
		f(tok.Encode(nil, text), text)
	}
	f(tok.Encode(nil, " ,;!\n"), " ,;!\n") // one token each
	f(nil, "")
	word := tok.Encode(nil, "zebra")[0] // "zebr", not a piece Sim names
	f([]uint32{word}, "<|id:"+strconv.FormatUint(uint64(word), 10)+"|>")
	f([]uint32{VocabSize, 1 << 31}, "")
}

// FuzzSimDecode: Decode takes any ids, gives valid UTF-8, decodes a
// sequence piece by piece (the text of a+b is a's then b's), and drops the
// ids past the vocabulary.
func FuzzSimDecode(f *testing.F) {
	f.Add([]byte{1, 2, 3, 4, 0xff, 0xff, 0xff, 0xff}, 3)
	f.Add([]byte("<|im_start|>user\nhi<|im_end|>\n"), 0)
	f.Fuzz(func(t *testing.T, raw []byte, cut int) {
		var tok Sim
		ids := tok.Encode(nil, string(raw))
		for i := 0; i+4 <= len(raw); i += 4 {
			ids = append(ids, uint32(raw[i])|uint32(raw[i+1])<<8|uint32(raw[i+2])<<16|uint32(raw[i+3])<<24)
		}
		out := tok.Decode(ids)
		if !utf8.ValidString(out) {
			t.Fatalf("%v: %q is not UTF-8", ids, out)
		}
		k := min(max(cut, 0), len(ids))
		if a, b := tok.Decode(ids[:k]), tok.Decode(ids[k:]); a+b != out {
			t.Fatalf("%v cut at %d: %q + %q != %q", ids, k, a, b, out)
		}
		var past []uint32
		for _, id := range ids {
			if id >= VocabSize {
				past = append(past, id)
			}
		}
		if got := tok.Decode(past); got != "" {
			t.Fatalf("%v: ids past the vocabulary decode to %q", past, got)
		}
	})
}

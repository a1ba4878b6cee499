package openai

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestEscapeRoundTrip is the JSON-escaping property: any Go string, once
// written by appendString (and by the streaming content path, and by the
// ASCII writer of stream errors), decodes with encoding/json to the same
// text, except that each byte of invalid UTF-8 comes back as U+FFFD.
// vLLM's strings are Python str, which cannot hold invalid UTF-8, so the
// replacement is this package's choice; it matches what Python's
// bytes.decode("utf-8", "replace") does for a lone invalid byte
// (multi-byte garbage can differ: Python replaces a maximal invalid
// prefix once, Go each byte).
func TestEscapeRoundTrip(t *testing.T) {
	pieces := []string{
		"a", "Z", " ", `"`, `\`, "/", "<", ">", "&", "\u2028", "\u2029", "\x00", "\x01", "\x1f", "\x7f",
		"\b", "\f", "\n", "\r", "\t", "é", "中", "😀", "\uFFFD", "\xff", "\xc3", "\xe2\x80", "\xed\xa0\x80",
		"</script>", "\\u0041",
	}
	rng := rand.New(rand.NewPCG(1, 2))
	stream := NewChatStream(StreamConfig{ID: "chatcmpl-x", Model: "m"})
	check := func(s string) {
		t.Helper()
		want := string([]rune(s)) // invalid bytes → U+FFFD, one each
		for _, enc := range []struct {
			name string
			b    []byte
		}{
			{"appendString", appendString(nil, s)},
			{"appendStringASCII", appendStringASCII(nil, s)},
		} {
			var got string
			if err := json.Unmarshal(enc.b, &got); err != nil {
				t.Fatalf("%s(%q) = %s: %v", enc.name, s, enc.b, err)
			}
			if got != want {
				t.Fatalf("%s(%q) round-trips to %q, want %q", enc.name, s, got, want)
			}
			if !utf8.Valid(enc.b) {
				t.Fatalf("%s(%q) is not UTF-8", enc.name, s)
			}
		}
		// Python json never escapes <, >, & or U+2028 (ensure_ascii=False).
		if out := string(appendString(nil, s)); strings.Contains(s, "<") && !strings.Contains(out, "<") ||
			strings.Contains(s, "\u2028") && strings.Contains(out, `\u2028`) {
			t.Fatalf("appendString(%q) = %s escapes HTML or U+2028", s, out)
		}
		// The stream chunk carries the same text.
		chunk := stream.AppendContent(nil, s, nil)
		var c struct {
			Choices []struct {
				Delta struct{ Content string }
			}
		}
		body := strings.TrimSuffix(strings.TrimPrefix(string(chunk), "data: "), "\n\n")
		if err := json.Unmarshal([]byte(body), &c); err != nil || len(c.Choices) != 1 || c.Choices[0].Delta.Content != want {
			t.Fatalf("chunk for %q = %s (%v)", s, chunk, err)
		}
	}
	for _, p := range pieces {
		check(p)
	}
	for i := 0; i < 5000; i++ {
		var b strings.Builder
		for n := rng.IntN(12); n > 0; n-- {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		check(b.String())
	}
}

// TestEscapeBytes pins the exact escapes Python's json and pydantic emit.
func TestEscapeBytes(t *testing.T) {
	f := func(in, want, wantASCII string) {
		t.Helper()
		if got := string(appendString(nil, in)); got != want {
			t.Errorf("appendString(%q) = %s, want %s", in, got, want)
		}
		if got := string(appendStringASCII(nil, in)); got != wantASCII {
			t.Errorf("appendStringASCII(%q) = %s, want %s", in, got, wantASCII)
		}
	}
	f("\b\f\n\r\t\"\\/", `"\b\f\n\r\t\"\\/"`, `"\b\f\n\r\t\"\\/"`)
	f("\x00\x1f\x7f", `"\u0000\u001f`+"\x7f"+`"`, `"\u0000\u001f\u007f"`)
	f("<&>\u2028é😀", "\"<&>\u2028é😀\"", `"<&>\u2028\u00e9\ud83d\ude00"`)
	f("a\xffb", "\"a\uFFFDb\"", `"a\ufffdb"`)
}

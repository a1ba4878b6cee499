package openai

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestFindUsage(t *testing.T) {
	f := func(body string, want Usage, wantOK bool) {
		t.Helper()
		got, ok := FindUsage([]byte(body))
		if ok != wantOK || got != want {
			t.Errorf("%s: got %+v %v, want %+v %v", body, got, ok, want, wantOK)
		}
	}
	// The v0.26.0 capture of vLLM notes §5.1, abridged.
	f(`{"id":"chatcmpl-a","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"usage"}}],"system_fingerprint":"vllm-0.26.0-2844599c","usage":{"prompt_tokens":71,"total_tokens":87,"completion_tokens":16,"prompt_tokens_details":null},"prompt_logprobs":null}`,
		Usage{PromptTokens: 71, CompletionTokens: 16}, true)
	// A final stream chunk with --enable-prompt-tokens-details (§5.2).
	f(`{"id":"x","choices":[],"usage":{"prompt_tokens":40,"total_tokens":45,"completion_tokens":5,"prompt_tokens_details":{"cached_tokens":32}}}`,
		Usage{PromptTokens: 40, CompletionTokens: 5, CachedTokens: 32, Details: true}, true)
	// A usage nested elsewhere is not the response's.
	f(`{"choices":[{"usage":{"prompt_tokens":3}}]}`, Usage{}, false)
	f(`{"usage":null}`, Usage{}, false)
	f(`{"usage":{"completion_tokens":2}}`, Usage{CompletionTokens: 2}, false)
	f(`{"usage":{"prompt_tokens":"7"}}`, Usage{}, false)
	f(`{"usage":{"prompt_tokens":7.5}}`, Usage{}, false)
	f(`{"usage":{"prompt_tokens":-1}}`, Usage{}, false)
	f(`{"usage":{"prompt_tokens":7}`, Usage{}, false) // truncated
	f(`[{"usage":{"prompt_tokens":7}}]`, Usage{}, false)
	f(``, Usage{}, false)
	// Python's json keeps the last of repeated keys.
	f(`{"usage":{"prompt_tokens":1},"usage":{"prompt_tokens":2}}`, Usage{PromptTokens: 2}, true)
}

// testStream is a chat stream as the simulator and vLLM send it: a role
// chunk, n content chunks, a finish chunk, the usage chunk when u is set,
// and [DONE].
func testStream(n int, u *Usage) []byte {
	s := NewChatStream(StreamConfig{ID: "chatcmpl-t", Model: "m", Fingerprint: "fp", IncludeUsage: u != nil})
	b := s.AppendRole(nil, "assistant", nil)
	for i := range n {
		b = s.AppendContent(b, strings.Repeat("tok ", i%7), nil)
	}
	b = s.AppendFinish(b, "", Finish{Reason: "length"}, nil)
	if u != nil {
		b = s.AppendUsage(b, u)
	}
	return AppendDone(b)
}

// feed writes b to a fresh tail in pieces of random sizes.
func feed(b []byte, rng *rand.Rand) *StreamTail {
	var t StreamTail
	for len(b) > 0 {
		n := min(len(b), 1+rng.IntN(3*tailBytes))
		if rng.IntN(2) == 0 {
			n = min(len(b), 1+rng.IntN(40))
		}
		t.Write(b[:n])
		b = b[n:]
	}
	return &t
}

// TestStreamTail: however a stream is cut into reads, the tail tells a
// stream that ended with [DONE] from one that did not, and finds the final
// usage chunk, for streams far longer than the tail.
func TestStreamTail(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	u := &Usage{PromptTokens: 1234, CompletionTokens: 99, CachedTokens: 16, Details: true}
	for _, n := range []int{0, 1, 5, 200, 3000} {
		full := testStream(n, u)
		plain := testStream(n, nil)
		for range 20 {
			tl := feed(full, rng)
			if got, ok := tl.Usage(); !tl.Done() || !ok || got != *u {
				t.Fatalf("n=%d: done %v usage %+v %v", n, tl.Done(), got, ok)
			}
			tl = feed(plain, rng)
			if _, ok := tl.Usage(); !tl.Done() || ok {
				t.Fatalf("n=%d without usage: done %v usage %v", n, tl.Done(), ok)
			}
			// Every proper prefix is unfinished.
			cut := rng.IntN(len(full))
			tl = feed(full[:cut], rng)
			if tl.Done() {
				t.Fatalf("n=%d: %d of %d bytes look done: %q", n, cut, len(full), full[max(0, cut-40):cut])
			}
		}
	}
	f := func(stream string, done bool) {
		t.Helper()
		var tl StreamTail
		tl.Write([]byte(stream))
		if tl.Done() != done {
			t.Errorf("%q: done %v", stream, !done)
		}
	}
	f("data: [DONE]\n\n", true)
	f("data:[DONE]\r\n\r\n", true)
	f("data: [DONE]\r\r", true)
	f("data: {}\n\ndata: [DONE]\n\n\n", true)
	f("data: [DONE]\n", false)
	f("data: [DONE]", false)
	f("data: [DONE]\r\n", false)
	f("data: {\"text\":\"data: [DONE]\"}\n\n", false)
	f("xdata: [DONE]\n\n", false)
	f("", false)
	// A tail that lost the start of its last line cannot vouch for it.
	var tl StreamTail
	tl.Write(bytes.Repeat([]byte("x"), 3*tailBytes))
	tl.Write([]byte("data: [DONE]\n\n"))
	if tl.Done() {
		t.Error("a line longer than the tail ending in data: [DONE] looks done")
	}
	tl.Reset()
	tl.Write([]byte("data: [DONE]\n\n"))
	if !tl.Done() {
		t.Error("Reset did not empty the tail")
	}
}

func TestStreamTailAllocs(t *testing.T) {
	var tl StreamTail
	chunk := testStream(1, &Usage{PromptTokens: 3})
	if n := testing.AllocsPerRun(100, func() { tl.Write(chunk) }); n != 0 {
		t.Errorf("Write allocates %v", n)
	}
}

func BenchmarkStreamTailWrite(b *testing.B) {
	s := NewChatStream(StreamConfig{ID: "chatcmpl-t", Model: "m"})
	chunk := s.AppendContent(nil, "token", nil)
	var tl StreamTail
	b.ReportAllocs()
	b.SetBytes(int64(len(chunk)))
	for b.Loop() {
		tl.Write(chunk)
	}
}

// FuzzFindUsage: no panic; what it finds is what encoding/json finds in a
// valid document.
func FuzzFindUsage(f *testing.F) {
	for _, s := range []string{
		`{"usage":{"prompt_tokens":71,"total_tokens":87,"completion_tokens":16,"prompt_tokens_details":null}}`,
		`{"choices":[],"usage":{"prompt_tokens":40,"completion_tokens":5,"prompt_tokens_details":{"cached_tokens":32}}}`,
		`{"usage":{"prompt_tokens":1e3}}`,
		`{"usage":{"prompt_tokens":9999999999999999999999}}`,
		`{"usage":[1]}`,
		`{"usage":{"prompt_tokens":1}`,
		`{"\u0075sage":{"prompt_tokens":4}}`,
		``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		u, ok := FindUsage(b)
		if !ok {
			return
		}
		if u.PromptTokens < 0 || u.CompletionTokens < 0 || u.CachedTokens < 0 {
			t.Fatalf("%q: negative counts %+v", b, u)
		}
		if !json.Valid(b) {
			return // NaN and Infinity elsewhere in the body
		}
		var doc struct {
			Usage struct {
				PromptTokens int `json:"prompt_tokens"`
			} `json:"usage"`
		}
		if err := json.Unmarshal(b, &doc); err == nil && !bytes.Contains(b, []byte(`\u`)) && doc.Usage.PromptTokens != u.PromptTokens {
			t.Fatalf("%q: prompt_tokens %d, encoding/json says %d", b, u.PromptTokens, doc.Usage.PromptTokens)
		}
	})
}

// FuzzStreamTail: no panic, and the tail's answers do not depend on how
// the stream was cut into writes.
func FuzzStreamTail(f *testing.F) {
	f.Add(testStream(3, &Usage{PromptTokens: 5}), uint64(1))
	f.Add([]byte("data: [DONE]\r\n\r\n"), uint64(2))
	f.Add([]byte("data: {\"usage\":{\"prompt_tokens\":2}}\n\ndata: [DONE]\n\n"), uint64(3))
	f.Add(append(bytes.Repeat([]byte("y\n"), tailBytes), "data: [DONE]\n\n"...), uint64(4))
	f.Fuzz(func(t *testing.T, stream []byte, seed uint64) {
		var whole StreamTail
		whole.Write(stream)
		pieces := feed(stream, rand.New(rand.NewPCG(seed, 0)))
		wu, wok := whole.Usage()
		pu, pok := pieces.Usage()
		if whole.Done() != pieces.Done() || wok != pok || wu != pu {
			t.Fatalf("%q: whole done %v usage %+v %v; in pieces done %v usage %+v %v",
				stream, whole.Done(), wu, wok, pieces.Done(), pu, pok)
		}
	})
}

func TestFindMaxTokens(t *testing.T) {
	f := func(body string, want int64, ok bool) {
		t.Helper()
		got, gotOK := FindMaxTokens([]byte(body))
		if got != want || gotOK != ok {
			t.Errorf("FindMaxTokens(%s) = %d, %v; want %d, %v", body, got, gotOK, want, ok)
		}
	}
	f(`{"max_tokens":16}`, 16, true)
	f(`{"max_tokens": 16 , "model":"m"}`, 16, true)
	f(`{"max_completion_tokens":8,"max_tokens":16}`, 8, true)
	f(`{"max_completion_tokens":null,"max_tokens":16}`, 16, true)
	f(`{"max_completion_tokens":"8","max_tokens":16}`, 16, true)
	f(`{"max_tokens":-1}`, 0, false)
	f(`{"max_tokens":1.5}`, 0, false)
	f(`{"max_tokens":1e3}`, 0, false)
	f(`{"max_tokens":99999999999999999999}`, 0, false)
	f(`{"max_tokens":0}`, 0, true)
	f(`{"model":"m"}`, 0, false)
	f(`[1]`, 0, false)
	f(``, 0, false)
	f(`{"messages":[{"max_tokens":5}]}`, 0, false)
}

func FuzzFindMaxTokens(f *testing.F) {
	for _, s := range []string{`{"max_tokens":16}`, `{"max_completion_tokens":8,"max_tokens":16}`,
		`{"max_tokens":null}`, `{"max_tokens":"x"}`, `{`, `{"max_tokens":123456789012345678}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		n, ok := FindMaxTokens(b)
		if n < 0 || !ok && n != 0 {
			t.Fatalf("FindMaxTokens(%q) = %d, %v", b, n, ok)
		}
	})
}

// TestLastDataEnd: a last event whose line the tail holds whole is read
// whole; one longer than the tail is its last bytes; an unfinished event
// is nothing.
func TestLastDataEnd(t *testing.T) {
	var tl StreamTail
	tl.Write([]byte("event: a\ndata: {\"x\":1}\n\nevent: b\ndata: {\"y\":2}\n\n"))
	if v, whole, ok := tl.LastDataEnd(); !ok || !whole || string(v) != `{"y":2}` {
		t.Errorf("short event: %q whole %v ok %v", v, whole, ok)
	}
	tl.Reset()
	long := "data: {\"t\":\"" + strings.Repeat("x", 3*tailBytes) + "\",\"type\":\"end\"}"
	tl.Write([]byte(long + "\n\n"))
	v, whole, ok := tl.LastDataEnd()
	if !ok || whole || !strings.HasSuffix(long, string(v)) || len(v) < tailBytes-4 {
		t.Errorf("long event: %d bytes, whole %v ok %v", len(v), whole, ok)
	}
	tl.Reset()
	tl.Write([]byte(long + "\n"))
	if _, _, ok := tl.LastDataEnd(); ok {
		t.Error("an event without its blank line reads as ended")
	}
}

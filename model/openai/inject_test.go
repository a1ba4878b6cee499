package openai

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestIncludeUsage(t *testing.T) {
	for _, tc := range []struct {
		body, want string // want "" means unchanged
	}{
		{`{"model":"m","stream":true}`, `{"model":"m","stream":true,"stream_options":{"include_usage":true}}`},
		{`{"stream":true,"stream_options":null} `, `{"stream":true,"stream_options":null,"stream_options":{"include_usage":true}} `},
		{`{"stream":true,"stream_options":{}}`, `{"stream":true,"stream_options":{"include_usage":true}}`},
		{`{"stream":true,"stream_options":{ }}`, `{"stream":true,"stream_options":{ "include_usage":true}}`},
		{`{"stream":true,"stream_options":{"include_usage":false}}`, `{"stream":true,"stream_options":{"include_usage":false,"include_usage":true}}`},
		{`{"stream_options":{"x":1},"stream":true}`, `{"stream_options":{"x":1,"include_usage":true},"stream":true}`},
		{`{"stream":true,"stream_options":{"include_usage":true}}`, ""},
		{`{"stream":true,"stream_options":{"continuous_usage_stats":true}}`, ""},
		{`{"stream":false}`, ""},
		{`{"stream":1}`, ""},
		{`{"stream":"true"}`, ""},
		{`{"model":"m"}`, ""},
		{`{"stream":true,"stream_options":"x"}`, ""},
		{`{"stream":true,`, ""},
		{`[1]`, ""},
		{``, ""},
	} {
		got, changed := IncludeUsage(nil, []byte(tc.body))
		want := tc.want
		if want == "" {
			want = tc.body
		}
		if string(got) != want || changed != (tc.want != "") {
			t.Errorf("%s: got %s (changed %v), want %s", tc.body, got, changed, want)
		}
	}
}

// usageStream is a vLLM-like stream of n content chunks, with the usage
// chunk before [DONE] when usage, each event ending in eol twice.
func usageStream(n int, usage bool, eol string) (all, stripped []byte) {
	var a, s bytes.Buffer
	ev := func(data string, keep bool) {
		e := "data: " + data + eol + eol
		a.WriteString(e)
		if keep {
			s.WriteString(e)
		}
	}
	ev(`{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`, true)
	for i := range n {
		ev(`{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"t`+strings.Repeat("x", i%7)+`"}}]}`, true)
	}
	ev(`{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":""},"finish_reason":"length"}]}`, true)
	if usage {
		ev(`{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":40,"total_tokens":48,"completion_tokens":8,"prompt_tokens_details":{"cached_tokens":32}}}`, false)
	}
	ev(`[DONE]`, true)
	return a.Bytes(), s.Bytes()
}

// strip passes b through a fresh UsageStrip in random pieces.
func strip(b []byte, rng *rand.Rand) []byte {
	var s UsageStrip
	var out []byte
	for len(b) > 0 {
		n := 1 + rng.IntN(min(len(b), 64))
		if rng.IntN(4) == 0 {
			n = len(b)
		}
		out = s.Write(out, b[:n])
		b = b[n:]
	}
	return s.Flush(out)
}

// Under any chunking, the client gets every byte of the engine's stream but
// the usage chunk's, in order; a stream without one comes through whole.
func TestUsageStripRandomChunking(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, eol := range []string{"\n", "\r\n", "\r"} {
		for n := range 40 {
			for _, usage := range []bool{true, false} {
				all, want := usageStream(n, usage, eol)
				for range 20 {
					if got := strip(all, rng); !bytes.Equal(got, want) {
						t.Fatalf("eol %q, %d chunks, usage %v:\ngot  %q\nwant %q", eol, n, usage, got, want)
					}
				}
			}
		}
	}
}

// Only a data event whose JSON has "choices": [] and a usage object is the
// usage chunk; continuous usage on content chunks, errors, comments and an
// event longer than maxHeldEvent pass.
func TestUsageStripKeeps(t *testing.T) {
	for _, ev := range []string{
		`data: {"choices":[{"index":0}],"usage":{"prompt_tokens":1}}`,
		`data: {"choices":[],"usage":null}`,
		`data: {"choices":[]}`,
		`data: {"error":{"message":"x"}}`,
		`: {"choices":[],"usage":{}}`,
		"data: {\"choices\":[],\ndata: \"usage\":{}}",
		`data: {"choices":[],"usage":{}} trailing`,
		`data: {"choices":[],"usage":{"x":"` + strings.Repeat("y", maxHeldEvent) + `"}}`,
		`data: [DONE]`,
	} {
		in := []byte(ev + "\n\n")
		if got := strip(in, rand.New(rand.NewPCG(3, 4))); !bytes.Equal(got, in) {
			t.Errorf("%.60q: got %.60q", ev, got)
		}
	}
	var s UsageStrip
	if got := s.Write(nil, []byte("data: {\"choices\":[],\"usage\":{}}\n\n")); len(got) != 0 {
		t.Errorf("the usage chunk came through: %q", got)
	}
	// An unfinished event is held, and comes out at the end.
	if got := s.Write(nil, []byte("data: {\"cho")); len(got) != 0 {
		t.Errorf("an unfinished event was passed on: %q", got)
	}
	if got := s.Flush(nil); string(got) != "data: {\"cho" {
		t.Errorf("flush: %q", got)
	}
}

func FuzzUsageStrip(f *testing.F) {
	all, _ := usageStream(3, true, "\n")
	f.Add(all, uint64(1))
	allCR, _ := usageStream(2, true, "\r\n")
	f.Add(allCR, uint64(7))
	f.Add([]byte("data: {\"choices\":[],\"usage\":{}}\r\r\n\ndata: x\n"), uint64(3))
	f.Add([]byte(""), uint64(0))
	f.Fuzz(func(t *testing.T, b []byte, seed uint64) {
		var whole UsageStrip
		want := whole.Flush(whole.Write(nil, b))
		got := strip(b, rand.New(rand.NewPCG(seed, 0)))
		if !bytes.Equal(got, want) {
			t.Fatalf("chunking changed the output:\n%q\n%q", got, want)
		}
		// What comes out is what went in with whole events removed: a
		// subsequence of it, and all of it when nothing is a usage chunk.
		if !subsequence(got, b) {
			t.Fatalf("output %q is not a subsequence of %q", got, b)
		}
		if !bytes.Contains(b, []byte(`"usage"`)) && !bytes.Equal(got, b) {
			t.Fatalf("a stream without usage changed: %q → %q", b, got)
		}
	})
}

func subsequence(sub, b []byte) bool {
	for _, c := range sub {
		i := bytes.IndexByte(b, c)
		if i < 0 {
			return false
		}
		b = b[i+1:]
	}
	return true
}

func FuzzIncludeUsage(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Add([]byte(`{"stream":true,"stream_options":{"include_usage":false}}`))
	f.Add([]byte(`{"stream":true}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, changed := IncludeUsage(nil, b)
		if !changed {
			if !bytes.Equal(got, b) {
				t.Fatalf("unchanged but different: %q → %q", b, got)
			}
			return
		}
		// Every byte of the body is kept, in order, and the result asks
		// for usage as the engine reads it (the last member of a name wins).
		if !subsequence(b, got) {
			t.Fatalf("%q → %q dropped bytes", b, got)
		}
		if json.Valid(b) {
			var v struct {
				StreamOptions struct {
					IncludeUsage bool `json:"include_usage"`
				} `json:"stream_options"`
			}
			if err := json.Unmarshal(got, &v); err != nil || !v.StreamOptions.IncludeUsage {
				t.Fatalf("%q → %q: %v %+v", b, got, err, v)
			}
		}
		if again, ch := IncludeUsage(nil, got); ch || !bytes.Equal(again, got) {
			t.Fatalf("injected twice: %q", again)
		}
	})
}

package openai

import (
	"encoding/json"
	"strings"
	"testing"
)

// Sink keeps benchmark results alive.
var Sink []byte

var benchChatBody = []byte(`{"model":"Qwen/Qwen3-8B","messages":[` +
	`{"role":"system","content":"` + strings.Repeat("You are a helpful assistant. ", 20) + `"},` +
	`{"role":"user","content":"` + strings.Repeat("Summarize the following text in one line: lorem ipsum dolor sit amet. ", 12) + `"},` +
	`{"role":"assistant","content":"` + strings.Repeat("It is placeholder text. ", 8) + `"},` +
	`{"role":"user","content":[{"type":"text","text":"And now in French, please \u00e9\u00e8."}]}],` +
	`"max_tokens":256,"temperature":0.7,"top_p":0.95,"stream":true,"stream_options":{"include_usage":true},` +
	`"cache_salt":"tenant-42","user":"bench","seed":1234,"stop":["</s>","###"]}`)

// BenchmarkStreamContent is the hot path: one chat content chunk into a
// reused buffer. It must not allocate.
func BenchmarkStreamContent(b *testing.B) {
	s := NewChatStream(StreamConfig{ID: "chatcmpl-a47c93077b0e387a", Created: 1753106400, Model: "Qwen/Qwen3-8B", Fingerprint: "vllm-0.26.0-2844599c"})
	buf := make([]byte, 0, 512)
	b.ReportAllocs()
	for b.Loop() {
		buf = s.AppendContent(buf[:0], " token", nil)
	}
	Sink = buf
}

// BenchmarkStreamContentUsage adds continuous usage and text that needs
// escaping.
func BenchmarkStreamContentUsage(b *testing.B) {
	s := NewCompletionStream(StreamConfig{ID: "cmpl-a47c93077b0e387a", Created: 1753106400, Model: "Qwen/Qwen3-8B"})
	buf := make([]byte, 0, 512)
	u := Usage{PromptTokens: 1024}
	b.ReportAllocs()
	for b.Loop() {
		u.CompletionTokens++
		buf = s.AppendContent(buf[:0], "\"quoted\"\n<é>", &u)
	}
	Sink = buf
}

func BenchmarkStreamContentParallel(b *testing.B) {
	s := NewChatStream(StreamConfig{ID: "chatcmpl-a47c93077b0e387a", Created: 1753106400, Model: "Qwen/Qwen3-8B"})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		buf := make([]byte, 0, 512)
		for pb.Next() {
			buf = s.AppendContent(buf[:0], " token", nil)
		}
	})
}

func BenchmarkAppendChatCompletion(b *testing.B) {
	c := &ChatCompletion{ID: "chatcmpl-a47c93077b0e387a", Created: 1753106400, Model: "Qwen/Qwen3-8B", Role: "assistant",
		Content: strings.Repeat("word ", 200), Finish: Finish{Reason: "stop"}, Fingerprint: "vllm-0.26.0-2844599c",
		Usage: Usage{PromptTokens: 900, CompletionTokens: 200, CachedTokens: 512, Details: true}}
	buf := make([]byte, 0, 4096)
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendChatCompletion(buf[:0], c)
	}
	Sink = buf
}

func BenchmarkParseChat(b *testing.B) {
	b.SetBytes(int64(len(benchChatBody)))
	b.ReportAllocs()
	for b.Loop() {
		r, err := ParseChat(benchChatBody)
		if err != nil || r.Check() != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParseChatEncodingJSON is a reference point, not an alternative:
// encoding/json decoding the same body into a struct of the same fields,
// with content left raw (it neither validates like vLLM nor joins parts).
func BenchmarkParseChatEncodingJSON(b *testing.B) {
	type msg struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	type req struct {
		Model         string          `json:"model"`
		Messages      []msg           `json:"messages"`
		MaxTokens     *int64          `json:"max_tokens"`
		Temperature   *float64        `json:"temperature"`
		TopP          *float64        `json:"top_p"`
		Stream        bool            `json:"stream"`
		StreamOptions json.RawMessage `json:"stream_options"`
		CacheSalt     string          `json:"cache_salt"`
		User          string          `json:"user"`
		Seed          *int64          `json:"seed"`
		Stop          json.RawMessage `json:"stop"`
	}
	b.SetBytes(int64(len(benchChatBody)))
	b.ReportAllocs()
	for b.Loop() {
		var r req
		if err := json.Unmarshal(benchChatBody, &r); err != nil {
			b.Fatal(err)
		}
	}
}

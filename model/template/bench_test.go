package template

import (
	"strings"
	"testing"
	"time"
)

// Sink keeps benchmark results alive.
var Sink string

// longChat builds a Qwen3 chat of about 8,000 tokens (≈32 KB of English
// text at ~4 characters a token): a system prompt, 20 user/assistant turns
// (the earlier answers with <think> blocks, which the template strips), one
// tool call with its response, and two tools.
func longChat(tb testing.TB) (messages, tools Value) {
	tb.Helper()
	para := strings.Repeat("The quick brown fox jumps over the lazy dog while the router counts tokens. ", 10) // ~760 bytes
	var b strings.Builder
	b.WriteString(`{"messages":[{"role":"system","content":"You are a careful assistant. ` + strings.Repeat("Follow the policy. ", 100) + `"}`)
	for i := 0; i < 20; i++ {
		b.WriteString(`,{"role":"user","content":"Question ` + itoa(int64(i)) + `: ` + para + `"}`)
		b.WriteString(`,{"role":"assistant","content":"<think>\nLet me think about it.\n</think>\n\nAnswer: ` + para + `"}`)
	}
	b.WriteString(`,{"role":"user","content":"What is the weather in Paris?"}`)
	b.WriteString(`,{"role":"assistant","content":"","tool_calls":[{"type":"function","function":{"name":"get_weather","arguments":{"city":"Paris","unit":"celsius"}}}]}`)
	b.WriteString(`,{"role":"tool","content":"{\"temp\": 21.5}"}`)
	b.WriteString(`,{"role":"user","content":"Thanks, and tomorrow?"}]`)
	b.WriteString(`,"tools":[{"type":"function","function":{"name":"get_weather","description":"Get the weather.","parameters":{"type":"object","properties":{"city":{"type":"string"},"unit":{"type":"string","enum":["celsius","fahrenheit"]}},"required":["city"]}}},` +
		`{"type":"function","function":{"name":"search","description":"Search the web.","parameters":{"type":"object","properties":{"q":{"type":"string"},"limit":{"type":"integer","default":10}},"required":["q"]}}}]}`)
	v, err := ParseJSON([]byte(b.String()))
	if err != nil {
		tb.Fatal(err)
	}
	d := v.(*Dict)
	messages, _ = d.GetString("messages")
	tools, _ = d.GetString("tools")
	return messages, tools
}

// BenchmarkQwen3Chat8k renders the Qwen3 chat template for an ~8,000-token
// conversation with tools.
func BenchmarkQwen3Chat8k(b *testing.B) {
	chat := loadQwen3(b)
	messages, tools := longChat(b)
	now := time.Date(2025, 7, 1, 0, 0, 0, 0, time.UTC)
	out, err := chat.Apply(messages, tools, true, nil, now)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(out)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s, err := chat.Apply(messages, tools, true, nil, now)
		if err != nil {
			b.Fatal(err)
		}
		Sink = s
	}
}

// BenchmarkQwen3Chat8kParallel is the same render from every core at once
// (a Chat is shared by all requests for a model).
func BenchmarkQwen3Chat8kParallel(b *testing.B) {
	chat := loadQwen3(b)
	messages, tools := longChat(b)
	now := time.Date(2025, 7, 1, 0, 0, 0, 0, time.UTC)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		var s string
		for pb.Next() {
			var err error
			if s, err = chat.Apply(messages, tools, true, nil, now); err != nil {
				b.Error(err)
				return
			}
		}
		_ = s
	})
}

// BenchmarkCompileQwen3 reads tokenizer_config.json and compiles the
// Qwen3 chat template (once per model at load time).
func BenchmarkCompileQwen3(b *testing.B) {
	cfg := mustRead(b, "testdata/qwen3/tokenizer_config.json")
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := NewChat(cfg); err != nil {
			b.Fatal(err)
		}
	}
}

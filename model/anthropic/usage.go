package anthropic

import (
	"bytes"
	"encoding/json"

	"github.com/inferrail/inferrail/model/openai"
)

// Usage is a Messages response's usage. Anthropic counts a prompt as
// input_tokens + cache_read_input_tokens + cache_creation_input_tokens,
// and vLLM reports it so (serving.py _build_anthropic_usage: input_tokens
// is prompt_tokens less the cached and created tokens).
type Usage struct {
	Input, Output, CacheRead, CacheCreation int
	// HasInput and HasCacheRead tell which fields were there: a
	// message_delta may carry output_tokens alone.
	HasInput, HasCacheRead bool
}

// OpenAI is u in the chat path's terms: the prompt in full, the cached
// part of it, the output.
func (u Usage) OpenAI() openai.Usage {
	return openai.Usage{PromptTokens: u.Input + u.CacheRead + u.CacheCreation, CompletionTokens: u.Output,
		CachedTokens: u.CacheRead, Details: u.HasCacheRead}
}

// Merge is the usage of a stream: b's fields (message_delta, the later
// event) over a's (message_start) where b has them.
func Merge(a, b Usage) Usage {
	if b.HasInput {
		a.Input, a.HasInput = b.Input, true
		a.CacheCreation = b.CacheCreation
	}
	if b.HasCacheRead {
		a.CacheRead, a.HasCacheRead = b.CacheRead, true
	}
	a.Output = b.Output
	return a
}

// FindUsage reads the usage of a Messages response body, or of one stream
// event: the top-level "usage" (a response, message_delta), else
// "message"."usage" (message_start). It reports false when b is not a
// JSON object or has no usage object with output_tokens or input_tokens.
func FindUsage(b []byte) (Usage, bool) {
	f, err := openai.FindMember(b, "usage")
	if err != nil {
		return Usage{}, false
	}
	if !f.Found {
		m, err := openai.FindMember(b, "message")
		if err != nil || !m.Found || m.End <= m.Start || b[m.Start] != '{' {
			return Usage{}, false
		}
		return FindUsage(b[m.Start:m.End])
	}
	raw := bytes.TrimSpace(b[f.Start:f.End])
	if len(raw) == 0 || raw[0] != '{' {
		return Usage{}, false
	}
	var w struct {
		Input         *int `json:"input_tokens"`
		Output        *int `json:"output_tokens"`
		CacheRead     *int `json:"cache_read_input_tokens"`
		CacheCreation *int `json:"cache_creation_input_tokens"`
	}
	if json.Unmarshal(raw, &w) != nil || (w.Input == nil && w.Output == nil) {
		return Usage{}, false
	}
	var u Usage
	count := func(p *int) int {
		if p == nil || *p < 0 {
			return 0
		}
		return *p
	}
	u.Input, u.HasInput = count(w.Input), w.Input != nil
	u.Output = count(w.Output)
	u.CacheRead, u.HasCacheRead = count(w.CacheRead), w.CacheRead != nil
	u.CacheCreation = count(w.CacheCreation)
	return u, true
}

// Event is the type of a stream event's data ("message_start",
// "message_stop", ...); "" when data is not an object with a string type.
func Event(data []byte) string {
	f, err := openai.FindMember(data, "type")
	if err != nil || !f.Found {
		return ""
	}
	return f.Name
}

package loadgen

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestAppendBody(t *testing.T) {
	for _, r := range []Spec{
		{Chat: true, Stream: true, Usage: true, MaxTokens: 3, Prompt: `say "hi"` + "\n\u00e9\x01"},
		{MaxTokens: 1, Prompt: "p"},
		{Stream: true, MaxTokens: 2, Prompt: "p"},
	} {
		b := AppendBody(nil, "inferrail/sim-8b", r)
		var got struct {
			Model    string `json:"model"`
			Prompt   string `json:"prompt"`
			Messages []struct {
				Role, Content string
			} `json:"messages"`
			MaxTokens     int  `json:"max_tokens"`
			Stream        bool `json:"stream"`
			StreamOptions *struct {
				IncludeUsage bool `json:"include_usage"`
			} `json:"stream_options"`
		}
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		prompt := got.Prompt
		if r.Chat {
			if len(got.Messages) != 1 || got.Messages[0].Role != "user" {
				t.Fatalf("%s: messages", b)
			}
			prompt = got.Messages[0].Content
		}
		if got.Model != "inferrail/sim-8b" || prompt != r.Prompt || got.MaxTokens != r.MaxTokens ||
			got.Stream != r.Stream || (got.StreamOptions != nil) != r.Usage {
			t.Fatalf("%s does not say %+v", b, r)
		}
	}
}

// TestCheckCatchesShortStreams serves streams and bodies that are one
// token short, or otherwise wrong, and expects Check to report every one.
func TestCheckCatchesShortStreams(t *testing.T) {
	var body string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(body, "status ") {
			var code int
			fmt.Sscan(body[len("status "):], &code)
			w.WriteHeader(code)
			return
		}
		if strings.HasPrefix(body, "data:") {
			w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
		}
		w.Write([]byte(body))
	}))
	defer srv.Close()
	do := func(r Spec) error {
		resp, err := http.Post(srv.URL+r.Path(), "application/json", bytes.NewReader(AppendBody(nil, "m", r)))
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		return Check(resp, r, nil)
	}
	f := func(r Spec, b string) {
		t.Helper()
		body = b
		if err := do(r); err == nil {
			t.Errorf("%q: no error", b)
		}
	}
	stream := Spec{Chat: true, Stream: true, Usage: true, MaxTokens: 4}
	f(stream, chatStream) // 3 tokens
	f(stream, "status 503")
	f(stream, `{"choices":[{"text":"as on ","finish_reason":"length"}],"usage":{"completion_tokens":2}}`) // not SSE
	f(stream, strings.Replace(chatStream, `"completion_tokens":3`, `"completion_tokens":4`, 1))
	unary := Spec{MaxTokens: 2}
	f(unary, `{"choices":[{"text":"as ","finish_reason":"length"}],"usage":{"completion_tokens":2}}`)
	f(unary, `{"choices":[{"text":"as on ","finish_reason":"stop"}],"usage":{"completion_tokens":2}}`)
	f(unary, `{"choices":[{"text":"as on ","finish_reason":"length"}],"usage":{"completion_tokens":3}}`)
	f(unary, `{"choices":[]}`)
	f(unary, `not json`)
	body = `{"choices":[{"text":"as on ","finish_reason":"length"}],"usage":{"completion_tokens":2}}`
	if err := do(unary); err != nil {
		t.Errorf("a correct body: %v", err)
	}
}

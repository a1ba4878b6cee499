package loadgen

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/inferrail/inferrail/model/token"
)

// Spec is one generation request of a workload.
type Spec struct {
	Chat      bool // /v1/chat/completions, else /v1/completions
	Stream    bool
	Usage     bool // stream_options.include_usage (streams only)
	MaxTokens int
	Prompt    string
}

// Path is the OpenAI endpoint r is sent to.
func (r Spec) Path() string {
	if r.Chat {
		return "/v1/chat/completions"
	}
	return "/v1/completions"
}

// AppendBody appends r's JSON request body in vLLM's OpenAI wire format.
func AppendBody(dst []byte, model string, r Spec) []byte {
	dst = append(dst, `{"model":`...)
	dst = appendJSONString(dst, model)
	if r.Chat {
		dst = append(dst, `,"messages":[{"role":"user","content":`...)
		dst = appendJSONString(dst, r.Prompt)
		dst = append(dst, `}]`...)
	} else {
		dst = append(dst, `,"prompt":`...)
		dst = appendJSONString(dst, r.Prompt)
	}
	dst = append(dst, `,"max_tokens":`...)
	dst = strconv.AppendInt(dst, int64(r.MaxTokens), 10)
	if r.Stream {
		dst = append(dst, `,"stream":true`...)
		if r.Usage {
			dst = append(dst, `,"stream_options":{"include_usage":true}`...)
		}
	}
	return append(dst, '}')
}

func appendJSONString(dst []byte, s string) []byte {
	b, _ := json.Marshal(s) // a string always marshals
	return append(dst, b...)
}

// Check reads resp's body to its end and checks the answer to r: status
// 200, an event stream exactly when r.Stream, and exactly r.MaxTokens tokens
// by every count the response offers, with finish_reason "length".
// firstContent, when set, is called at a stream's first content chunk.
// The caller closes resp.Body.
func Check(resp *http.Response, r Spec, firstContent func()) error {
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("status %d: %s", resp.StatusCode, bytes.TrimSpace(b))
	}
	switch ct := resp.Header.Get("Content-Type"); {
	case r.Stream && !strings.HasPrefix(ct, "text/event-stream"):
		return fmt.Errorf("stream with Content-Type %q", ct)
	case r.Stream:
		return CheckStream(resp.Body, r, firstContent)
	default:
		return CheckUnary(resp.Body, r)
	}
}

// CheckStream checks a streamed answer to r, calling firstContent (when
// set) at its first content chunk.
func CheckStream(body io.Reader, r Spec, firstContent func()) error {
	t := NewStreamTally()
	sr := NewSSEReader(body)
	for {
		_, data, err := sr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("stream after %d events: %w", t.Events, err)
		}
		content, err := t.Add(data)
		if err != nil {
			return err
		}
		if content && t.Content == 1 && firstContent != nil {
			firstContent()
		}
	}
	if err := t.Check(r.MaxTokens, r.Usage); err != nil {
		return err
	}
	// The content must also be r.MaxTokens tokens long by the simulator's
	// own tokenizer (token.Generate promises that).
	if n := (token.Sim{}).Count(string(t.Text)); n != r.MaxTokens {
		return fmt.Errorf("streamed text is %d tokens, want %d", n, r.MaxTokens)
	}
	return nil
}

// unary is the part of a chat or text completion that CheckUnary checks.
type unary struct {
	Choices []struct {
		Text    *string `json:"text"`
		Message *struct {
			Content *string `json:"content"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
}

// CheckUnary checks a non-streamed answer to r.
func CheckUnary(body io.Reader, r Spec) error {
	b, err := io.ReadAll(body)
	if err != nil {
		return err
	}
	var u unary
	if err := json.Unmarshal(b, &u); err != nil {
		return fmt.Errorf("response body: %w", err)
	}
	if len(u.Choices) != 1 {
		return fmt.Errorf("%d choices, want 1", len(u.Choices))
	}
	ch := u.Choices[0]
	var text *string
	if r.Chat && ch.Message != nil {
		text = ch.Message.Content
	} else if !r.Chat {
		text = ch.Text
	}
	var errs []error
	if text == nil {
		errs = append(errs, errors.New("no generated text"))
	} else if n := (token.Sim{}).Count(*text); n != r.MaxTokens {
		errs = append(errs, fmt.Errorf("text is %d tokens, want %d", n, r.MaxTokens))
	}
	if u.Usage == nil {
		errs = append(errs, errors.New("no usage"))
	} else if u.Usage.CompletionTokens != r.MaxTokens {
		errs = append(errs, fmt.Errorf("usage.completion_tokens %d, want %d", u.Usage.CompletionTokens, r.MaxTokens))
	}
	if ch.FinishReason != "length" {
		errs = append(errs, fmt.Errorf("finish_reason %q, want \"length\"", ch.FinishReason))
	}
	return errors.Join(errs...)
}

package sim

import (
	"encoding/json"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/inferrail/inferrail/model/token"
)

// TestTokenIDPrompt: a completion whose prompt is token ids is served on
// those ids, as vLLM serves it: usage counts them, a repeat finds its full
// blocks cached, and an id past the vocabulary is vLLM's 400.
func TestTokenIDPrompt(t *testing.T) {
	s := start(t, func(o *Options) { fast(o); o.EnablePromptTokensDetails = true })
	post := func(body string) (int, []byte) {
		t.Helper()
		resp, err := client().Post(s.URL()+"/v1/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	ids := make([]int, 40)
	for i := range ids {
		ids[i] = 100 + i
	}
	prompt, _ := json.Marshal(ids)
	body := `{"prompt":` + string(prompt) + `,"max_tokens":2}`
	var u struct {
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
			Details      struct {
				CachedTokens int `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		} `json:"usage"`
	}
	for i, wantCached := range []int{0, 32} { // 40 ids: two full blocks of 16
		code, b := post(body)
		if code != 200 {
			t.Fatalf("request %d: %d %s", i, code, b)
		}
		if err := json.Unmarshal(b, &u); err != nil {
			t.Fatal(err)
		}
		if u.Usage.PromptTokens != 40 || u.Usage.Details.CachedTokens != wantCached {
			t.Fatalf("request %d: usage %+v, want 40 prompt tokens, %d cached", i, u.Usage, wantCached)
		}
	}
	code, b := post(`{"prompt":[1,2,` + jsonInt(token.VocabSize) + `,3],"max_tokens":2}`)
	if code != 400 || !strings.Contains(string(b), `"message":"Token id 32000 is out of vocabulary"`) {
		t.Fatalf("out of vocabulary: %d %s", code, b)
	}
	if code, b := post(`{"prompt":[1,2,` + jsonInt(token.VocabSize-1) + `],"max_tokens":2}`); code != 200 {
		t.Fatalf("the last id of the vocabulary: %d %s", code, b)
	}
}

func jsonInt(n int) string { b, _ := json.Marshal(n); return string(b) }

// TestCompletionBatch: a completion whose prompt is a batch (strings, or
// token lists) is served as vLLM serves it: a choice per prompt with the
// prompt's index and the answer that prompt alone gets, and one usage
// summing every prompt's tokens and every choice's; streamed, each
// choice's chunks under its index, then that usage once and [DONE].
func TestCompletionBatch(t *testing.T) {
	s := start(t, func(o *Options) { fast(o); o.EnablePromptTokensDetails = true })
	type choice struct {
		Index        int
		Text         string
		FinishReason *string `json:"finish_reason"`
	}
	type answer struct {
		Choices []choice
		Usage   *struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
		}
	}
	complete := func(prompt string, stream bool) (code int, a answer, events []answer) {
		t.Helper()
		body := `{"prompt":` + prompt + `,"max_tokens":3`
		if stream {
			body += `,"stream":true,"stream_options":{"include_usage":true}`
		}
		resp, err := client().Post(s.URL()+"/v1/completions", "application/json", strings.NewReader(body+"}"))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if !stream {
			if err := json.Unmarshal(b, &a); err != nil && resp.StatusCode == 200 {
				t.Fatalf("%s: %v", b, err)
			}
			return resp.StatusCode, a, nil
		}
		if !strings.HasSuffix(string(b), "data: [DONE]\n\n") {
			t.Fatalf("stream %s does not end with [DONE]", b)
		}
		for ev := range strings.SplitSeq(strings.TrimSpace(string(b)), "\n\n") {
			data := strings.TrimPrefix(ev, "data: ")
			if data == "[DONE]" {
				continue
			}
			var e answer
			if err := json.Unmarshal([]byte(data), &e); err != nil {
				t.Fatalf("event %q: %v", data, err)
			}
			events = append(events, e)
		}
		return resp.StatusCode, a, events
	}
	for _, batch := range [][]string{{`"Once upon a time"`, `"The cat sat on"`, `"Once upon a time"`}, {`[5,6,7,8]`, `[9,10]`}} {
		prompt := "[" + strings.Join(batch, ",") + "]"
		code, a, _ := complete(prompt, false)
		if code != 200 || len(a.Choices) != len(batch) || a.Usage == nil {
			t.Fatalf("%s: %d %+v", prompt, code, a)
		}
		prompts, outputs := 0, 0
		for i, p := range batch {
			_, one, _ := complete(p, false)
			if c := a.Choices[i]; c.Index != i || c.Text != one.Choices[0].Text || c.FinishReason == nil || *c.FinishReason != "length" {
				t.Errorf("%s: choice %d %+v, prompt %s alone answers %+v", prompt, i, c, p, one.Choices[0])
			}
			prompts += one.Usage.PromptTokens
			outputs += one.Usage.CompletionTokens
		}
		if a.Usage.PromptTokens != prompts || a.Usage.CompletionTokens != outputs {
			t.Errorf("%s: usage %+v, the prompts alone sum to %d and %d", prompt, *a.Usage, prompts, outputs)
		}
		_, _, events := complete(prompt, true)
		texts := make([]string, len(batch))
		usages := 0
		for _, e := range events {
			for _, c := range e.Choices {
				texts[c.Index] += c.Text
			}
			if e.Usage != nil {
				usages++
				if e.Usage.PromptTokens != prompts || e.Usage.CompletionTokens != outputs || len(e.Choices) != 0 {
					t.Errorf("%s: stream usage %+v, want %d and %d", prompt, *e.Usage, prompts, outputs)
				}
			}
		}
		for i := range batch {
			if texts[i] != a.Choices[i].Text {
				t.Errorf("%s: streamed choice %d %q, want %q", prompt, i, texts[i], a.Choices[i].Text)
			}
		}
		if usages != 1 {
			t.Errorf("%s: %d usage chunks, want 1", prompt, usages)
		}
	}
	// Every prompt of a batch is checked: an empty one is refused.
	if code, _, _ := complete(`[[1,2],[]]`, false); code != 400 {
		t.Errorf("a batch with an empty prompt: %d, want 400", code)
	}
}

// TestRenderBatch: /v1/completions/render of a batch answers one
// GenerateRequest per prompt, in order, each with its prompt's ids and a
// request id of its own.
func TestRenderBatch(t *testing.T) {
	s := start(t, fast)
	resp, err := client().Post(s.URL()+"/v1/completions/render", "application/json",
		strings.NewReader(`{"prompt":["x y z","a b"],"max_tokens":2}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var got []struct {
		RequestID string   `json:"request_id"`
		TokenIDs  []uint32 `json:"token_ids"`
	}
	if err := json.Unmarshal(b, &got); err != nil || resp.StatusCode != 200 {
		t.Fatalf("%d %s: %v", resp.StatusCode, b, err)
	}
	want := [][]uint32{token.Sim{}.Encode(nil, "x y z"), token.Sim{}.Encode(nil, "a b")}
	if len(got) != 2 || got[0].RequestID == got[1].RequestID {
		t.Fatalf("%s: want two GenerateRequests with their own ids", b)
	}
	for i := range want {
		if !slices.Equal(got[i].TokenIDs, want[i]) {
			t.Errorf("prompt %d rendered %v, want %v", i, got[i].TokenIDs, want[i])
		}
	}
}

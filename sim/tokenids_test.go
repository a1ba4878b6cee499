package sim

import (
	"encoding/json"
	"io"
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

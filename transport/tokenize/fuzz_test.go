package tokenize

import (
	"context"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/inferrail/inferrail/config"
)

// FuzzPrepare: no body panics the tokenizers or templates (they are called
// directly here, without the pool's recover), and the pool's answer agrees
// with the synchronous one: the same result, and for OK the same prompt.
func FuzzPrepare(f *testing.F) {
	f.Add([]byte(`{"messages":[{"role":"user","content":"hi"}]}`), true)
	f.Add([]byte(`{"messages":[{"role":"assistant","content":null,"tool_calls":[{"function":{"name":"f","arguments":"{\"a\":1}"}}]}],"tools":[{"type":"function","function":{"name":"f"}}]}`), true)
	f.Add([]byte(`{"messages":[{"role":"user","content":[{"type":"text","text":"a"},"b",{"type":"image_url"}]}],"continue_final_message":true}`), true)
	f.Add([]byte(`{"messages":[{"role":"user","content":"x"}],"chat_template_kwargs":{"enable_thinking":false},"cache_salt":"s"}`), true)
	f.Add([]byte(`{"prompt":"Once upon a time","add_special_tokens":false}`), false)
	f.Add([]byte(`{"prompt":[1,2,3]}`), false)
	f.Add([]byte(`{"prompt":[[1],[2]]}`), false)
	f.Add([]byte("\xff\xfe{"), false)
	models := testModels(f)
	p := NewPool(models, nil, config.Tokenizer{Workers: 1, MaxWait: time.Minute}, metrics.NewSet())
	f.Cleanup(p.Close)
	now := time.Unix(0, 0)
	f.Fuzz(func(t *testing.T, body []byte, chat bool) {
		kind := Completion
		if chat {
			kind = Chat
		}
		for name, m := range models {
			want, err := m.Prepare(kind, body, now)
			got, r := p.Prepare(context.Background(), name, kind, body)
			wantR := classify(err)
			if r != wantR {
				t.Fatalf("%s: pool %v, direct %v (%v)", name, r, wantR, err)
			}
			// Chat templates may print the clock; only compare ids of
			// bodies that do not depend on it.
			if r == OK && (!chat || got.Text == want.Text) && !samePrompt(got, want) {
				t.Fatalf("%s: prepared differently", name)
			}
		}
	})
}

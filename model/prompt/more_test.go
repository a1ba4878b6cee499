package prompt

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/inferrail/inferrail/model/openai"
	"github.com/inferrail/inferrail/model/prefix"
	"github.com/inferrail/inferrail/model/template"
	"github.com/inferrail/inferrail/model/token"
)

// TestCachedPreparer: with a piece cache small enough to evict all the
// time, and with one that keeps everything, every chat golden prepares
// exactly as without a cache, also when sent twice.
func TestCachedPreparer(t *testing.T) {
	base := qwen3(t)
	bodies := chatBodies(t)
	now := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	for _, size := range []int{50, 1 << 20} {
		cached := *base
		cached.Cache = base.Tokenizer.NewCache(size)
		for round := range 2 {
			for i, body := range bodies {
				want, err := base.Chat([]byte(body), now)
				if err != nil {
					t.Fatal(err)
				}
				got, err := cached.Chat([]byte(body), now)
				if err != nil {
					t.Fatal(err)
				}
				if got.Text != want.Text || !slices.Equal(got.IDs, want.IDs) || !slices.Equal(got.Blocks, want.Blocks) {
					t.Fatalf("cache of %d, round %d, body %d: prepared differently", size, round, i)
				}
			}
		}
		t.Logf("cache of %d tokens: %+v", size, cached.Cache.Stats())
	}
}

// chatBodies are the Qwen3 chat goldens as request bodies.
func chatBodies(t testing.TB) []string {
	var out []string
	for _, g := range readGoldens(t) {
		if strings.HasSuffix(g.ID, "tool-call-string-args") {
			continue
		}
		out = append(out, g.body())
	}
	return out
}

func TestCompletion(t *testing.T) {
	p := qwen3(t)
	f := func(body string, wantIDs []uint32, wantErr error) {
		t.Helper()
		got, err := p.Completion([]byte(body))
		if wantErr != nil || err != nil {
			if !errors.Is(err, wantErr) {
				t.Fatalf("%s: error %v, want %v", body, err, wantErr)
			}
			return
		}
		if !slices.Equal(got.IDs, wantIDs) {
			t.Fatalf("%s: ids %v, want %v", body, got.IDs, wantIDs)
		}
		var h prefix.Hasher
		if want := h.Chain(nil, prefix.Root(p.Model, "", ""), wantIDs, 16); !slices.Equal(got.Blocks, want) {
			t.Fatalf("%s: blocks differ", body)
		}
	}
	hello := p.Tokenizer.Encode(nil, "Hello world", true)
	f(`{"prompt":"Hello world"}`, hello, nil)
	f(`{"prompt":["Hello world"]}`, hello, nil)
	f(`{"prompt":"Hello world","add_special_tokens":false}`, p.Tokenizer.Encode(nil, "Hello world", false), nil)
	ids := make([]uint32, 40)
	for i := range ids {
		ids[i] = uint32(i * 3)
	}
	f(`{"prompt":[0,3,6,9,12,15,18,21,24,27,30,33,36,39,42,45,48,51,54,57,60,63,66,69,72,75,78,81,84,87,90,93,96,99,102,105,108,111,114,117]}`, ids, nil)
	// A batch is prepared on its first prompt, and marked.
	f(`{"prompt":["Hello world","b"]}`, hello, nil)
	f(`{"prompt":[[0,3,6,9,12,15,18,21,24,27,30,33,36,39,42,45,48,51,54,57,60,63,66,69,72,75,78,81,84,87,90,93,96,99,102,105,108,111,114,117],[3]]}`, ids, nil)
	for body, batch := range map[string]bool{`{"prompt":["a","b"]}`: true, `{"prompt":[[1,2],[3]]}`: true, `{"prompt":["a"]}`: false, `{"prompt":[[1]]}`: false} {
		if got, err := p.Completion([]byte(body)); err != nil || got.Batch != batch {
			t.Fatalf("%s: batch %v (%v), want %v", body, got.Batch, err, batch)
		}
	}
	f(`{"prompt":"x","prompt_embeds":"AAAA"}`, nil, ErrUnsupported)
	if _, err := p.Completion([]byte(`{"prompt":`)); err == nil || errors.Is(err, ErrUnsupported) {
		t.Fatalf("bad JSON: %v", err)
	}
	if _, err := p.Completion([]byte(`{"max_tokens":3}`)); err == nil || errors.Is(err, ErrUnsupported) {
		t.Fatalf("no prompt: %v", err)
	}
	salted, err := p.Completion([]byte(`{"prompt":"` + strings.Repeat("tenant words ", 20) + `","cache_salt":"a"}`))
	if err != nil {
		t.Fatal(err)
	}
	if want := p.Text(strings.Repeat("tenant words ", 20), "a"); !slices.Equal(salted.Blocks, want.Blocks) || len(want.Blocks) == 0 {
		t.Fatal("cache_salt is not applied")
	}
}

// TestCompletionWithoutTokenizer: a Preparer with no tokenizer prepares
// prompts given as token ids, hashed with its block size and the body's
// cache_salt, and answers ErrNoTokenizer for text.
func TestCompletionWithoutTokenizer(t *testing.T) {
	p := &Preparer{Model: "m", BlockSize: 4}
	ids := []uint32{5, 6, 7, 8, 9, 10, 11, 12, 13}
	var h prefix.Hasher
	want := h.Chain(nil, prefix.Root("m", "", "s"), ids, 4)
	got, err := p.Completion([]byte(`{"prompt":[5,6,7,8,9,10,11,12,13],"cache_salt":"s"}`))
	if err != nil || !slices.Equal(got.IDs, ids) || !slices.Equal(got.Blocks, want) || len(want) != 2 || got.Batch {
		t.Fatalf("ids: %+v, %v", got, err)
	}
	got, err = p.Completion([]byte(`{"prompt":[[5,6,7,8,9,10,11,12,13],[1]],"cache_salt":"s"}`))
	if err != nil || !slices.Equal(got.Blocks, want) || !got.Batch {
		t.Fatalf("batch: %+v, %v", got, err)
	}
	for _, body := range []string{`{"prompt":"text"}`, `{"prompt":["a","b"]}`} {
		if _, err := p.Completion([]byte(body)); !errors.Is(err, ErrNoTokenizer) {
			t.Fatalf("%s: %v, want ErrNoTokenizer", body, err)
		}
	}
	if _, err := p.Chat([]byte(`{"messages":[{"role":"user","content":"hi"}]}`), time.Now()); !errors.Is(err, ErrNoTemplate) {
		t.Fatalf("chat: %v", err)
	}
}

func TestChatUnsupported(t *testing.T) {
	p := qwen3(t)
	now := time.Now()
	for _, body := range []string{
		`{"messages":[{"role":"user","content":"hi"}],"chat_template":"{{ 1 }}"}`,
		`{"messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"x","format":"wav"}}]}]}`,
		`{"messages":[{"role":"user","content":[{"image_url":"http://x"}]}]}`,
	} {
		if _, err := p.Chat([]byte(body), now); !errors.Is(err, ErrUnsupported) {
			t.Errorf("%s: %v, want ErrUnsupported", body, err)
		}
	}
	for _, body := range []string{`[1]`, `{"messages":3}`, `{"messages":[1]}`, `{`} {
		if _, err := p.Chat([]byte(body), now); err == nil || errors.Is(err, ErrUnsupported) {
			t.Errorf("%s: %v, want an error", body, err)
		}
	}
	// A null chat_template is no template.
	if _, err := p.Chat([]byte(`{"messages":[{"role":"user","content":"hi"}],"chat_template":null}`), now); err != nil {
		t.Error(err)
	}
}

// TestChatNormalize: what vLLM's parse_chat_messages does to messages.
func TestChatNormalize(t *testing.T) {
	p := qwen3(t)
	now := time.Now()
	same := func(a, b string) {
		t.Helper()
		pa, err := p.Chat([]byte(a), now)
		if err != nil {
			t.Fatal(err)
		}
		pb, err := p.Chat([]byte(b), now)
		if err != nil {
			t.Fatal(err)
		}
		if pa.Text != pb.Text {
			t.Fatalf("differ:\n%q\n%q", pa.Text, pb.Text)
		}
	}
	same(`{"messages":[{"role":"user","content":["a",{"type":"input_text","text":"b"},{"type":"refusal","refusal":"c"}]}]}`,
		`{"messages":[{"role":"user","content":"a\nb\nc"}]}`)
	same(`{"messages":[{"role":"user","content":"q"},{"role":"assistant","content":null,"tool_calls":[{"type":"function","function":{"name":"f","arguments":"not json"}}]}]}`,
		`{"messages":[{"role":"user","content":"q"},{"role":"assistant","content":"","tool_calls":[{"type":"function","function":{"name":"f","arguments":{}}}]}]}`)
	same(`{"messages":[{"role":"user","content":"q"},{"role":"assistant","content":"a","tool_calls":[]}]}`,
		`{"messages":[{"role":"user","content":"q"},{"role":"assistant","content":"a"}]}`)
}

// TestContinueFinal: the final message is left open, as transformers'
// continue_final_message leaves it.
func TestContinueFinal(t *testing.T) {
	p := qwen3(t)
	got, err := p.Chat([]byte(`{"messages":[{"role":"user","content":"Count to 3"},{"role":"assistant","content":"1, 2,"}],"continue_final_message":true,"add_generation_prompt":false}`), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(got.Text, "1, 2,") {
		t.Fatalf("rendered %q", got.Text)
	}
	// Trailing spacing the template keeps is kept; spacing it strips is
	// not put back.
	f := func(final, suffix string) {
		t.Helper()
		body, _ := json.Marshal(map[string]any{"messages": []map[string]string{{"role": "user", "content": "Count"},
			{"role": "assistant", "content": final}}, "continue_final_message": true, "add_generation_prompt": false})
		got, err := p.Chat(body, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(got.Text, "\n\n"+suffix) {
			t.Fatalf("%q: rendered %q", final, got.Text)
		}
	}
	f("1, 2, ", "1, 2, ")
	f("1, 2,\n", "1, 2,\n")
	f("\n1, 2,", "1, 2,")
}

// TestOpenAIContentFormat: a template that loops over content parts gets
// them as {"type": "text"} dicts under "openai" and "auto".
func TestOpenAIContentFormat(t *testing.T) {
	cfg := []byte(`{"chat_template": "{% for m in messages %}[{{ m.role }}]{% if m.content is string %}S:{{ m.content }}{% else %}{% for p in m.content %}<{{ p.type }}:{{ p.text }}>{% endfor %}{% endif %}{% endfor %}"}`)
	chat, err := template.NewChat(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tok := qwen3(t).Tokenizer
	body := `{"messages":[{"role":"system","content":"sys"},{"role":"user","content":[{"type":"text","text":"a"},"b"]},{"role":"assistant","content":null},{"role":"tool","content":[{"type":"text","text":"t1"},{"type":"text","text":"t2"}]}]}`
	f := func(format, want string) {
		t.Helper()
		p := &Preparer{Model: "m", Tokenizer: tok, Template: chat, BlockSize: 16, ContentFormat: format}
		got, err := p.Chat([]byte(body), time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if got.Text != want {
			t.Fatalf("%s: %q, want %q", format, got.Text, want)
		}
	}
	f("string", "[system]S:sys[user]S:a\nb[assistant]S:[tool]S:t1\nt2")
	f("openai", "[system]<text:sys>[user]<text:a><text:b>[assistant][tool]S:t1\nt2")
	f("auto", "[system]<text:sys>[user]<text:a><text:b>[assistant][tool]S:t1\nt2")
	if chat.ContentFormat(false) != "openai" {
		t.Fatal("not detected")
	}
}

// TestSim: a builtin:sim Preparer computes what the simulator's handler
// does: openai.ParseChat, SimChat, token.Sim, and the chain rooted at the
// model and cache_salt.
func TestSim(t *testing.T) {
	p := &Preparer{Model: "inferrail/sim-8b", BlockSize: 4, Sim: true}
	body := `{"model":"sim","messages":[{"role":"system","content":"You are terse."},{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]},{"role":"assistant","content":null}],"cache_salt":"s1"}`
	got, err := p.Chat([]byte(body), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	req, err := openai.ParseChat([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	text := "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\na\nb<|im_end|>\n<|im_start|>assistant\n"
	if SimChat(req) != text || got.Text != text {
		t.Fatalf("rendered %q", got.Text)
	}
	ids := token.Sim{}.Encode(nil, text)
	var h prefix.Hasher
	if !slices.Equal(got.IDs, ids) || !slices.Equal(got.Blocks, h.Chain(nil, prefix.Root("inferrail/sim-8b", "", "s1"), ids, 4)) {
		t.Fatal("ids or blocks differ from the simulator's")
	}
	cont, err := p.Chat([]byte(`{"messages":[{"role":"user","content":"x"},{"role":"assistant","content":"y"}],"continue_final_message":true}`), time.Now())
	if err != nil || !strings.HasSuffix(cont.Text, "assistant\ny") {
		t.Fatalf("continue_final_message: %q %v", cont.Text, err)
	}
	c, err := p.Completion([]byte(`{"prompt":"Once upon a time"}`))
	if err != nil || !slices.Equal(c.IDs, token.Sim{}.Encode(nil, "Once upon a time")) {
		t.Fatalf("completion: %v %v", c.IDs, err)
	}
	if _, err := p.Chat([]byte(`{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}`), time.Now()); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("image: %v", err)
	}
}

// TestTokenize: a /tokenize body as vLLM reads it: chat messages as Chat
// prepares them, a prompt string with add_special_tokens (default true),
// the empty string too; a prompt that is not a string is an error.
func TestTokenize(t *testing.T) {
	p := qwen3(t)
	now := time.Now()
	f := func(body string, want []uint32) {
		t.Helper()
		got, err := p.Tokenize([]byte(body), now)
		if err != nil || !slices.Equal(got.IDs, want) {
			t.Fatalf("%s: %v (%v), want %v", body, got.IDs, err, want)
		}
	}
	f(`{"prompt":"Hello world"}`, p.Tokenizer.Encode(nil, "Hello world", true))
	f(`{"prompt":"Hello world","add_special_tokens":false}`, p.Tokenizer.Encode(nil, "Hello world", false))
	f(`{"prompt":""}`, p.Tokenizer.Encode(nil, "", true))
	chat := `{"messages":[{"role":"user","content":"hi"}],"add_generation_prompt":false}`
	want, err := p.Chat([]byte(chat), now)
	if err != nil {
		t.Fatal(err)
	}
	f(chat, want.IDs)
	for _, body := range []string{`{"prompt":[1,2]}`, `{"prompt":null}`, `{}`, `{"prompt":"x","add_special_tokens":"yes"}`, `[1]`, `{"prompt":`} {
		if _, err := p.Tokenize([]byte(body), now); err == nil {
			t.Fatalf("%s: no error", body)
		}
	}
	if _, err := (&Preparer{Model: "m"}).Tokenize([]byte(`{"prompt":"x"}`), now); !errors.Is(err, ErrNoTokenizer) {
		t.Fatalf("no tokenizer: %v", err)
	}
}

// FuzzTokenize: no /tokenize body panics the Preparer, with a tokenizer,
// with the simulator's and without one; a prompt string it accepts
// tokenizes as Text does.
func FuzzTokenize(f *testing.F) {
	for _, s := range []string{`{"prompt":"Hello"}`, `{"prompt":""}`, `{"prompt":[1]}`, `{"prompt":"a","add_special_tokens":false}`,
		`{"messages":[{"role":"user","content":"hi"}]}`, `{"messages":1}`, `{"prompt":"\u00e9\ud800"}`, `[]`, ``} {
		f.Add([]byte(s))
	}
	preps := []*Preparer{qwen3(f), {Model: "s", Sim: true}, {Model: "n"}}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, p := range preps {
			got, err := p.Tokenize(body, time.Time{})
			if err != nil || p.Tokenizer == nil {
				continue
			}
			var req struct {
				Prompt *string `json:"prompt"`
				Add    *bool   `json:"add_special_tokens"`
			}
			if json.Unmarshal(body, &req) != nil || req.Prompt == nil || bytes.Contains(body, []byte(`"messages"`)) {
				continue
			}
			if want := p.Tokenizer.Encode(nil, *req.Prompt, req.Add == nil || *req.Add); !slices.Equal(got.IDs, want) {
				t.Fatalf("%q: %v, want %v", body, got.IDs, want)
			}
		}
	})
}

package prompt

import (
	"bufio"
	"encoding/json"
	"errors"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/inferrail/inferrail/model/prefix"
	"github.com/inferrail/inferrail/model/template"
	"github.com/inferrail/inferrail/model/token/hf"
)

var qwen3Once struct {
	sync.Once
	tok  *hf.Tokenizer
	chat *template.Chat
	err  error
}

// qwen3 returns a Preparer for the Qwen3 test files; the tokenizer and
// template are loaded once and shared (both are immutable).
func qwen3(t testing.TB) *Preparer {
	t.Helper()
	o := &qwen3Once
	o.Do(func() {
		var tj, cfg []byte
		if tj, o.err = os.ReadFile("../token/hf/testdata/qwen3/tokenizer.json"); o.err != nil {
			return
		}
		if cfg, o.err = os.ReadFile("../token/hf/testdata/qwen3/tokenizer_config.json"); o.err != nil {
			return
		}
		if o.tok, o.err = hf.Load(tj, cfg); o.err != nil {
			return
		}
		o.chat, o.err = template.NewChat(cfg)
	})
	if o.err != nil {
		t.Fatal(o.err)
	}
	return &Preparer{Model: "Qwen/Qwen3", Tokenizer: o.tok, Template: o.chat, BlockSize: 16}
}

type golden struct {
	ID       string          `json:"id"`
	Messages json.RawMessage `json:"messages"`
	Tools    json.RawMessage `json:"tools"`
	AddGen   bool            `json:"add_generation_prompt"`
	Kwargs   json.RawMessage `json:"chat_template_kwargs"`
	Rendered string          `json:"rendered_prompt"`
	IDs      []uint32        `json:"token_ids"`
}

// body is the golden as a /v1/chat/completions body.
func (g *golden) body() string {
	body := `{"messages":` + string(g.Messages) + `,"add_generation_prompt":` + map[bool]string{true: "true", false: "false"}[g.AddGen]
	if len(g.Tools) > 0 && string(g.Tools) != "null" {
		body += `,"tools":` + string(g.Tools)
	}
	if len(g.Kwargs) > 0 {
		body += `,"chat_template_kwargs":` + string(g.Kwargs)
	}
	return body + "}"
}

func readGoldens(t testing.TB) []golden {
	t.Helper()
	f, err := os.Open("../template/testdata/qwen3/goldens.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	var out []golden
	for sc.Scan() {
		var g golden
		if err := json.Unmarshal(sc.Bytes(), &g); err != nil {
			t.Fatal(err)
		}
		out = append(out, g)
	}
	return out
}

// TestChatGoldens: every Qwen3 chat golden, sent as a request body, renders
// and tokenizes as vLLM does, and its blocks hash as a chain.
func TestChatGoldens(t *testing.T) {
	p := qwen3(t)
	n := 0
	for _, g := range readGoldens(t) {
		body := g.body()
		now := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
		got, err := p.Chat([]byte(body), now)
		if strings.HasSuffix(g.ID, "tool-call-string-args") {
			// This golden keeps a tool call's arguments as a string on
			// purpose, which vLLM's own parsing would have turned into an
			// object: render it as given.
			v, _ := template.ParseJSON([]byte(body))
			got, err = p.Render(v.(*template.Dict), now)
		}
		if err != nil {
			t.Fatalf("%s: %v", g.ID, err)
		}
		if got.Text != g.Rendered {
			t.Fatalf("%s: rendered prompt differs", g.ID)
		}
		if !slices.Equal(got.IDs, g.IDs) {
			t.Fatalf("%s: token ids differ", g.ID)
		}
		var h prefix.Hasher
		want := h.Chain(nil, prefix.Root("Qwen/Qwen3", "", ""), g.IDs, 16)
		if !slices.Equal(got.Blocks, want) || len(got.Blocks) != len(g.IDs)/16 {
			t.Fatalf("%s: blocks differ", g.ID)
		}
		n++
	}
	if n != 152 {
		t.Fatalf("%d goldens, want 152", n)
	}
}

func TestNormalize(t *testing.T) {
	p := qwen3(t)
	now := time.Now()
	a, err := p.Chat([]byte(`{"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}]}`), now)
	if err != nil {
		t.Fatal(err)
	}
	b, err := p.Chat([]byte(`{"messages":[{"role":"user","content":"a\nb"}]}`), now)
	if err != nil {
		t.Fatal(err)
	}
	if a.Text != b.Text {
		t.Fatalf("content parts not joined with a newline:\n%q\n%q", a.Text, b.Text)
	}
	if _, err := p.Chat([]byte(`{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}`), now); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("an image part: %v", err)
	}
	long := "hello world, this sentence is long enough to fill a block or two of tokens, and then some more words"
	salted, plain := p.Text(long, "tenant-a"), p.Text(long, "")
	if len(plain.Blocks) == 0 || salted.Blocks[0] == plain.Blocks[0] {
		t.Fatal("cache_salt does not change the chain")
	}
}

func FuzzChat(f *testing.F) {
	f.Add(`{"messages":[{"role":"user","content":"hi"}]}`)
	f.Add(`{"messages":[{"role":"assistant","content":"","tool_calls":[{"function":{"name":"f","arguments":"{\"a\":1}"}}]}],"tools":[]}`)
	f.Add(`{"messages":"x"}`)
	p := qwen3(f)
	f.Fuzz(func(t *testing.T, body string) {
		p.Chat([]byte(body), time.Unix(0, 0)) // must not panic
	})
}

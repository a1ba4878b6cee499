package template

import (
	"bufio"
	"fmt"
	"os"
	"testing"
	"time"
)

// golden is one line of testdata/qwen3/goldens.jsonl, rendered by Python
// Jinja2 3.1.6 configured as transformers configures it.
type golden struct {
	id       string
	messages Value
	tools    Value
	addGen   bool
	kwargs   *Dict
	want     string
}

func loadGoldens(t testing.TB, path string) []golden {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	var out []golden
	for sc.Scan() {
		v, err := ParseJSON(sc.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		d := v.(*Dict)
		g := golden{}
		id, _ := d.GetString("id")
		g.id = id.(string)
		g.messages, _ = d.GetString("messages")
		g.tools, _ = d.GetString("tools")
		ag, _ := d.GetString("add_generation_prompt")
		g.addGen = ag == true
		if kw, ok := d.GetString("chat_template_kwargs"); ok {
			g.kwargs = kw.(*Dict)
		}
		w, _ := d.GetString("rendered_prompt")
		g.want = w.(string)
		out = append(out, g)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func loadQwen3(t testing.TB) *Chat {
	t.Helper()
	cfg, err := os.ReadFile("testdata/qwen3/tokenizer_config.json")
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewChat(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// firstDiff describes where got and want part ways.
func firstDiff(got, want string) string {
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	lo := max(0, i-60)
	return fmt.Sprintf("first difference at byte %d:\n got: %q\nwant: %q", i,
		got[lo:min(len(got), i+60)], want[lo:min(len(want), i+60)])
}

func TestQwen3Goldens(t *testing.T) {
	chat := loadQwen3(t)
	gs := loadGoldens(t, "testdata/qwen3/goldens.jsonl")
	if len(gs) != 152 {
		t.Fatalf("got %d goldens, want 152", len(gs))
	}
	now := time.Date(2025, 7, 1, 12, 0, 0, 0, time.UTC)
	pass := 0
	var first string
	for _, g := range gs {
		got, err := chat.Apply(g.messages, g.tools, g.addGen, g.kwargs, now)
		switch {
		case err != nil:
			if first == "" {
				first = fmt.Sprintf("%s: %v", g.id, err)
			}
		case got != g.want:
			if first == "" {
				first = fmt.Sprintf("%s: %s", g.id, firstDiff(got, g.want))
			}
		default:
			pass++
		}
	}
	t.Logf("qwen3 chat goldens: %d/%d byte-identical", pass, len(gs))
	if pass != len(gs) {
		t.Errorf("%d/%d goldens differ; first mismatch:\n%s", len(gs)-pass, len(gs), first)
	}
}

func mustRead(tb testing.TB, path string) []byte {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

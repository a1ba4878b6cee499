package hf

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// Golden data: see testdata/README.md.

type textGolden struct {
	ID       string   `json:"id"`
	Text     string   `json:"text"`
	TokenIDs []uint32 `json:"token_ids"`
}

type pretokGolden struct {
	ID     string   `json:"id"`
	Text   string   `json:"text"`
	Pieces []string `json:"pieces"`
}

type chatGolden struct {
	ID             string   `json:"id"`
	RenderedPrompt string   `json:"rendered_prompt"`
	TokenIDs       []uint32 `json:"token_ids"`
}

func readJSONL[T any](t testing.TB, name string) []T {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []T
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		if len(sc.Bytes()) == 0 {
			continue
		}
		var v T
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out = append(out, v)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

var (
	loadOnce sync.Map // model name -> *loaded
)

type loaded struct {
	once sync.Once
	tok  *Tokenizer
	err  error
}

// load returns the shared Tokenizer of a testdata model.
func load(t testing.TB, model string) *Tokenizer {
	t.Helper()
	v, _ := loadOnce.LoadOrStore(model, &loaded{})
	l := v.(*loaded)
	l.once.Do(func() {
		l.tok, l.err = LoadDir(os.DirFS("testdata"), model)
	})
	if l.err != nil {
		t.Fatalf("load %s: %v", model, l.err)
	}
	return l.tok
}

// diffIDs describes the first difference between two id lists with context.
func diffIDs(tok *Tokenizer, got, want []uint32) string {
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	lo := max(0, i-3)
	show := func(ids []uint32) string {
		hi := min(len(ids), i+5)
		if lo >= hi {
			return "[]"
		}
		var parts []string
		for _, id := range ids[lo:hi] {
			s, _ := tok.Token(id)
			parts = append(parts, fmt.Sprintf("%d:%q", id, s))
		}
		return "[" + strings.Join(parts, " ") + "]"
	}
	return fmt.Sprintf("first difference at %d (len got %d, want %d)\n\tgot  %s\n\twant %s", i, len(got), len(want), show(got), show(want))
}

func TestGoldenText(t *testing.T) {
	for _, model := range []string{"qwen3", "mistral7b"} {
		t.Run(model, func(t *testing.T) {
			tok := load(t, model)
			cases := readJSONL[textGolden](t, model+"/text_goldens.jsonl")
			pass := 0
			for _, c := range cases {
				got := tok.Encode(nil, c.Text, false)
				if slices.Equal(got, c.TokenIDs) {
					pass++
					continue
				}
				t.Errorf("%s: text %q\n%s", c.ID, c.Text, diffIDs(tok, got, c.TokenIDs))
			}
			t.Logf("%s text goldens: %d/%d", model, pass, len(cases))
		})
	}
}

func TestGoldenPreTokenize(t *testing.T) {
	tok := load(t, "qwen3")
	cases := readJSONL[pretokGolden](t, "qwen3/pretok_goldens.jsonl")
	pass := 0
	for _, c := range cases {
		got := tok.PreTokenize(c.Text)
		if slices.Equal(got, c.Pieces) {
			pass++
			continue
		}
		i := 0
		for i < len(got) && i < len(c.Pieces) && got[i] == c.Pieces[i] {
			i++
		}
		t.Errorf("%s: text %q: first difference at piece %d\n\tgot  %q\n\twant %q", c.ID, c.Text, i,
			got[max(0, i-2):min(len(got), i+3)], c.Pieces[max(0, i-2):min(len(c.Pieces), i+3)])
	}
	t.Logf("qwen3 pre-tokenizer goldens: %d/%d", pass, len(cases))
}

func TestGoldenChat(t *testing.T) {
	tok := load(t, "qwen3")
	cases := readJSONL[chatGolden](t, "qwen3/goldens.jsonl")
	pass := 0
	for _, c := range cases {
		got := tok.Encode(nil, c.RenderedPrompt, false)
		if slices.Equal(got, c.TokenIDs) {
			pass++
			continue
		}
		t.Errorf("%s:\n%s", c.ID, diffIDs(tok, got, c.TokenIDs))
	}
	t.Logf("qwen3 chat goldens (rendered_prompt -> token_ids): %d/%d", pass, len(cases))
}

func readFile(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

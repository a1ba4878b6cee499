package prompt

import (
	"bufio"
	"encoding/json"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/inferrail/inferrail/model/anthropic"
)

// messagesGolden is one line of testdata/messages_goldens.jsonl, made by
// scripts/gen-messages-goldens.py from vLLM's source (see
// testdata/README.md).
type messagesGolden struct {
	ID           string   `json:"id"`
	InlineSystem string   `json:"inline_system"`
	CountTokens  bool     `json:"count_tokens"`
	Body         string   `json:"body"`
	Rendered     string   `json:"rendered_prompt"`
	IDs          []uint32 `json:"token_ids"`
}

// goldenNow is the clock the generator names a tool_use without an id by.
var goldenNow = time.Unix(1700000000, 0)

func readMessagesGoldens(t *testing.T) []messagesGolden {
	t.Helper()
	f, err := os.Open("testdata/messages_goldens.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []messagesGolden
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var g messagesGolden
		if err := json.Unmarshal(sc.Bytes(), &g); err != nil {
			t.Fatalf("golden %d: %v", len(out)+1, err)
		}
		out = append(out, g)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// Every golden body, prepared as the gateway prepares /v1/messages (or
// /v1/messages/count_tokens) for Qwen3 with the default content format
// "auto", renders and tokenizes exactly as vLLM's Anthropic entrypoint
// does (the goldens' independent Python model of it), with the gateway's
// piece cache (shared by every case, as one model's requests share it)
// and without.
func TestMessagesGoldens(t *testing.T) {
	goldens := readMessagesGoldens(t)
	if len(goldens) < 100 {
		t.Fatalf("%d goldens, want the generated set", len(goldens))
	}
	base := qwen3(t)
	t.Run("nocache", func(t *testing.T) { checkMessagesGoldens(t, goldens, base) })
	cached := *base
	cached.Cache = base.Tokenizer.NewCache(1 << 16)
	t.Run("cache", func(t *testing.T) { checkMessagesGoldens(t, goldens, &cached) })
}

func checkMessagesGoldens(t *testing.T, goldens []messagesGolden, base *Preparer) {
	modes := map[string]anthropic.InlineMode{"preserve": anthropic.Preserve, "fold": anthropic.Fold}
	matched := 0
	for _, g := range goldens {
		mode, ok := modes[g.InlineSystem]
		if !ok {
			t.Fatalf("%s: inline_system %q", g.ID, g.InlineSystem)
		}
		p := *base
		p.ContentFormat, p.InlineSystem = "auto", mode
		got, err := p.Messages([]byte(g.Body), g.CountTokens, goldenNow)
		switch {
		case err != nil:
			t.Errorf("%s: %v", g.ID, err)
		case got.Text != g.Rendered:
			at := 0
			for at < len(got.Text) && at < len(g.Rendered) && got.Text[at] == g.Rendered[at] {
				at++
			}
			t.Errorf("%s: rendered text differs at byte %d:\n got %q\nwant %q", g.ID, at,
				tail(got.Text, at), tail(g.Rendered, at))
		case !slices.Equal(got.IDs, g.IDs):
			t.Errorf("%s: the same text, but %d token ids, want %d", g.ID, len(got.IDs), len(g.IDs))
		default:
			matched++
		}
	}
	t.Logf("%d of %d goldens match", matched, len(goldens))
}

// tail is s from a little before byte at, for a readable difference.
func tail(s string, at int) string {
	from := max(at-40, 0)
	return s[from:min(len(s), at+80)]
}

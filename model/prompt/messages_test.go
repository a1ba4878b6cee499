package prompt

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/inferrail/inferrail/model/template"
)

// claudeTurn is a Claude-Code-shaped Messages body: a billing header that
// changes every turn, a system prompt in blocks, tools, a tool round trip
// and an inline system reminder per turn.
func claudeTurn(turn int) string {
	var b strings.Builder
	b.WriteString(`{"model":"Qwen/Qwen3","max_tokens":256,"stream":true,`)
	b.WriteString(`"system":[{"type":"text","text":"x-anthropic-billing-header: cc_version=2.1.3; cch=` + strings.Repeat(string(rune('a'+turn)), 5) + `;"},`)
	b.WriteString(`{"type":"text","text":"You are Claude Code, a coding agent.","cache_control":{"type":"ephemeral"}}],`)
	b.WriteString(`"tools":[{"name":"Read","description":"Read a file","input_schema":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}},{"name":"Bash","input_schema":{"properties":{"cmd":{"type":"string"}}}}],`)
	b.WriteString(`"messages":[{"role":"user","content":[{"type":"text","text":"Fix the failing test."}]}`)
	for i := 0; i < turn; i++ {
		id := "toolu_0" + string(rune('1'+i))
		b.WriteString(`,{"role":"assistant","content":[{"type":"text","text":"Reading file ` + string(rune('1'+i)) + `."},{"type":"tool_use","id":"` + id + `","name":"Read","input":{"path":"f` + string(rune('1'+i)) + `.go"}}]}`)
		b.WriteString(`,{"role":"user","content":[{"type":"tool_result","tool_use_id":"` + id + `","content":[{"type":"text","text":"package f // file ` + string(rune('1'+i)) + `"}]}]}`)
		b.WriteString(`,{"role":"system","content":"<system-reminder>turn ` + string(rune('1'+i)) + `</system-reminder>"}`)
	}
	b.WriteString(`]}`)
	return b.String()
}

// The OpenAI chat body vLLM builds for claudeTurn(1), written out by hand
// from serving.py: the billing header gone, the tool call's arguments a
// JSON string, the tool result a tool message, the inline reminder kept
// in place, tools as model_dump() gives them.
const claudeTurn1Chat = `{"model":"Qwen/Qwen3","messages":[` +
	`{"role":"system","content":"You are Claude Code, a coding agent."},` +
	`{"role":"user","content":"Fix the failing test."},` +
	`{"role":"assistant","tool_calls":[{"id":"toolu_01","type":"function","function":{"name":"Read","arguments":"{\"path\": \"f1.go\"}"}}],"content":"Reading file 1."},` +
	`{"role":"tool","tool_call_id":"toolu_01","content":"package f // file 1"},` +
	`{"role":"system","content":"<system-reminder>turn 1</system-reminder>"}],` +
	`"max_tokens":256,"stream":true,` +
	`"tools":[{"type":"function","function":{"name":"Read","description":"Read a file","parameters":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]},"strict":null,"defer_loading":null}},` +
	`{"type":"function","function":{"name":"Bash","description":null,"parameters":{"properties":{"cmd":{"type":"string"}},"type":"object"},"strict":null,"defer_loading":null}}]}`

func TestMessagesRenderAsVLLM(t *testing.T) {
	now := time.Unix(1700000000, 0)
	for name, p := range map[string]*Preparer{"qwen3": qwen3(t), "sim": {Model: "Qwen/Qwen3", BlockSize: 16, Sim: true}} {
		got, err := p.Messages([]byte(claudeTurn(1)), false, now)
		if err != nil {
			t.Fatalf("%s: Messages: %v", name, err)
		}
		want, err := p.Chat([]byte(claudeTurn1Chat), now)
		if err != nil {
			t.Fatalf("%s: Chat: %v", name, err)
		}
		if got.Text != want.Text || !slices.Equal(got.IDs, want.IDs) || !slices.Equal(got.Blocks, want.Blocks) {
			t.Errorf("%s: Messages rendered\n%q\nwant (vLLM's chat request)\n%q", name, got.Text, want.Text)
		}
		if strings.Contains(got.Text, "billing") {
			t.Errorf("%s: the billing header reached the prompt: %q", name, got.Text)
		}
	}
}

// Every turn renders as an extension of the one before, although the
// billing header changes: the earlier turn's full blocks are a prefix of
// the later's, so the engine's prefix cache (and the gateway's index)
// hits them.
func TestMessagesTurnsExtend(t *testing.T) {
	now := time.Unix(1700000000, 0)
	p := qwen3(t)
	var prev Prompt
	for turn := 0; turn < 4; turn++ {
		cur, err := p.Messages([]byte(claudeTurn(turn)), false, now)
		if err != nil {
			t.Fatal(err)
		}
		if turn > 0 {
			if len(prev.Blocks) == 0 || len(cur.Blocks) <= len(prev.Blocks) {
				t.Fatalf("turn %d: %d blocks after %d", turn, len(cur.Blocks), len(prev.Blocks))
			}
			// The generation prompt ends the earlier render; the blocks
			// before it are shared.
			shared := (len(prev.IDs) - 3) / p.BlockSize
			if !slices.Equal(cur.Blocks[:shared], prev.Blocks[:shared]) {
				t.Errorf("turn %d: the first %d blocks differ from turn %d's", turn, shared, turn-1)
			}
		}
		prev = cur
	}
}

func TestMessagesErrors(t *testing.T) {
	p := qwen3(t)
	now := time.Now()
	if _, err := p.Messages([]byte(`{"model":"m","messages":[]}`), false, now); err == nil || errors.Is(err, ErrUnsupported) {
		t.Errorf("no max_tokens: err = %v, want invalid", err)
	}
	if _, err := p.Messages([]byte(`{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"url","url":"http://x"}}]}]}`), false, now); !errors.Is(err, ErrUnsupported) {
		t.Errorf("image: err = %v, want ErrUnsupported", err)
	}
	// An assistant tool_result list nested deeper than Python's json.loads
	// reads.
	deep := strings.Repeat(`[`, 1001) + strings.Repeat(`]`, 1001)
	if _, err := p.Messages([]byte(`{"model":"m","max_tokens":1,"messages":[{"role":"assistant","content":[{"type":"tool_result","content":[{"x":`+deep+`}]}]}]}`), false, now); !errors.Is(err, ErrUnsupported) {
		t.Errorf("assistant tool_result list too deep: err = %v, want ErrUnsupported", err)
	}
	// count_tokens bodies need no max_tokens, and count as the request would.
	c, err := p.Messages([]byte(claudeTurn(2)), true, now)
	m, err2 := p.Messages([]byte(claudeTurn(2)), false, now)
	if err != nil || err2 != nil || len(c.IDs) != len(m.IDs) {
		t.Errorf("count_tokens: %d tokens (%v), request %d (%v)", len(c.IDs), err, len(m.IDs), err2)
	}
}

// FuzzMessages: any body prepares or fails with an error, through the
// Qwen3 template and the simulator's, never a panic.
func FuzzMessages(f *testing.F) {
	f.Add([]byte(claudeTurn(2)), false)
	f.Add([]byte(claudeTurn1Chat), true)
	f.Add([]byte(`{"model":"m","messages":[{"role":"msg","content":[{"type":"thinking","thinking":"t"}]}],"chat_template_kwargs":{"enable_thinking":false}}`), true)
	f.Add([]byte(`{"model":"m","max_tokens":2048,"thinking":{"type":"disabled"},"output_config":{"effort":"high"},"messages":[{"role":"user","content":"q"}]}`), false)
	sim := &Preparer{Model: "m", BlockSize: 16, Sim: true}
	f.Fuzz(func(t *testing.T, body []byte, count bool) {
		now := time.Unix(1700000000, 0)
		for _, p := range []*Preparer{qwen3(t), sim} {
			if pr, err := p.Messages(body, count, now); err == nil && len(pr.Blocks)*p.BlockSize > len(pr.IDs) {
				t.Fatalf("%d blocks for %d tokens", len(pr.Blocks), len(pr.IDs))
			}
		}
	})
}

// A chat request's reasoning_effort reaches the template and, unless the
// request's chat_template_kwargs set enable_thinking, turns Qwen3's
// thinking off for "none" and on otherwise, over the server's default
// (ChatCompletionRequest.build_chat_params).
func TestChatReasoningEffort(t *testing.T) {
	const off = "<|im_start|>assistant\n<think>\n\n</think>\n\n"
	now := time.Unix(1700000000, 0)
	f := func(p *Preparer, extra string, wantOff bool) {
		t.Helper()
		got, err := p.Chat([]byte(`{"messages":[{"role":"user","content":"hi"}]`+extra+`}`), now)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(got.Text, off) != wantOff {
			t.Errorf("%s: rendered %q, thinking off = %v", extra, got.Text, wantOff)
		}
	}
	p := qwen3(t)
	f(p, ``, false)
	f(p, `,"reasoning_effort":"none"`, true)
	f(p, `,"reasoning_effort":"low"`, false)
	f(p, `,"reasoning_effort":null`, false)
	f(p, `,"reasoning_effort":"none","chat_template_kwargs":{"enable_thinking":true}`, false)
	f(p, `,"reasoning_effort":"high","chat_template_kwargs":{"enable_thinking":false}`, true)
	d := *p
	d.Kwargs = template.NewDict(1)
	d.Kwargs.SetString("enable_thinking", false)
	f(&d, ``, true)
	f(&d, `,"reasoning_effort":"medium"`, false)
}

// thinking.type "disabled" renders as vLLM resolves
// --anthropic-disabled-thinking-effort=auto for the template: "none" for
// Qwen3, whose template honours it (thinking off); "low" for a template
// that renders "none" as one of the efforts.
func TestMessagesThinkingDisabled(t *testing.T) {
	now := time.Unix(1700000000, 0)
	const body = `{"model":"m","max_tokens":64,"thinking":{"type":"disabled"},"messages":[{"role":"user","content":"hi"}]}`
	p := qwen3(t)
	got, err := p.Messages([]byte(body), false, now)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(got.Text, "<think>\n\n</think>\n\n") {
		t.Errorf("qwen3: thinking disabled rendered %q", got.Text)
	}
	// count_tokens bodies carry no thinking: the prompt keeps thinking on.
	if c, err := p.Messages([]byte(body), true, now); err != nil || strings.Contains(c.Text, "<think>") {
		t.Errorf("count_tokens: %q, %v", c.Text, err)
	}
	chat, err := template.NewChat([]byte(`{"chat_template":"effort={{ reasoning_effort if reasoning_effort in ['low', 'medium', 'high'] else 'max' }}"}`))
	if err != nil {
		t.Fatal(err)
	}
	g := *p
	g.Template = chat
	if got, err := g.Messages([]byte(body), false, now); err != nil || got.Text != "effort=low" {
		t.Errorf("a template that ignores none: %q, %v; want effort=low", got.Text, err)
	}
	// Resolved once and set, it is used as it is.
	if e := p.ResolveDisabledThinkingEffort(now); e != "none" {
		t.Errorf("qwen3 resolves %q, want none", e)
	}
	g.DisabledThinkingEffort = "high"
	if got, err := g.Messages([]byte(body), false, now); err != nil || got.Text != "effort=high" {
		t.Errorf("set to high: %q, %v", got.Text, err)
	}
}

// With KeepBillingHeader (the benchmark's raw-text router) the header
// reaches the prompt, near its head, so consecutive turns part within the
// system prompt; without it they share every block of the earlier turn.
func TestMessagesKeepBillingHeader(t *testing.T) {
	now := time.Unix(1700000000, 0)
	common := func(keep bool) (int, int, string) {
		t.Helper()
		p := &Preparer{Model: "Qwen/Qwen3", BlockSize: 16, Sim: true, KeepBillingHeader: keep}
		a, err := p.Messages([]byte(claudeTurn(1)), false, now)
		if err != nil {
			t.Fatal(err)
		}
		b, err := p.Messages([]byte(claudeTurn(2)), false, now)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for n < len(a.Blocks) && n < len(b.Blocks) && a.Blocks[n] == b.Blocks[n] {
			n++
		}
		return n, len(a.Blocks), a.Text
	}
	kept, _, text := common(true)
	if !strings.Contains(text, "x-anthropic-billing-header: cc_version=2.1.3; cch=bbbbb;") {
		t.Errorf("the billing header is not in the prompt: %q", text)
	}
	stripped, all, _ := common(false)
	if stripped != all || kept >= stripped || kept > 2 {
		t.Errorf("turns 1 and 2 share %d of %d blocks stripped, %d with the header kept", stripped, all, kept)
	}
}

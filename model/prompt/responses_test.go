package prompt

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

// agentTurn is a Responses body of a tool-using agent: instructions,
// function tools, and the conversation sent in full (no
// previous_response_id), growing by a function call round trip per turn.
func agentTurn(turn int) string {
	var b strings.Builder
	b.WriteString(`{"model":"Qwen/Qwen3","instructions":"You are a careful coding agent.","stream":true,`)
	b.WriteString(`"tools":[{"type":"function","name":"read","description":"Read a file","parameters":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]},"strict":true}],`)
	b.WriteString(`"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"Fix the failing test."}]}`)
	for i := 0; i < turn; i++ {
		n := string(rune('1' + i))
		b.WriteString(`,{"type":"function_call","call_id":"call_` + n + `","name":"read","arguments":"{\"path\":\"f` + n + `.go\"}","status":"completed"}`)
		b.WriteString(`,{"type":"function_call_output","call_id":"call_` + n + `","output":"package f // file ` + n + `"}`)
	}
	b.WriteString(`]}`)
	return b.String()
}

// The chat body vLLM builds for agentTurn(1), written out by hand from
// utils.py: instructions as the system message, the function call as an
// assistant tool call (arguments a JSON string, which the chat path
// parses), its output a tool message, the tool as model_dump() gives it.
const agentTurn1Chat = `{"model":"Qwen/Qwen3","messages":[` +
	`{"role":"system","content":"You are a careful coding agent."},` +
	`{"role":"user","content":[{"type":"text","text":"Fix the failing test."}]},` +
	`{"role":"assistant","tool_calls":[{"id":"call_1","type":"function","function":{"name":"read","arguments":"{\"path\":\"f1.go\"}"}}]},` +
	`{"role":"tool","tool_call_id":"call_1","content":"package f // file 1"}],"stream":true,` +
	`"tools":[{"type":"function","function":{"name":"read","description":"Read a file","parameters":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]},"strict":true}}]}`

func TestResponsesRenderAsVLLM(t *testing.T) {
	now := time.Unix(1700000000, 0)
	for name, p := range map[string]*Preparer{"qwen3": qwen3(t), "sim": {Model: "Qwen/Qwen3", BlockSize: 16, Sim: true}} {
		got, err := p.Responses([]byte(agentTurn(1)), now)
		if err != nil {
			t.Fatalf("%s: Responses: %v", name, err)
		}
		want, err := p.Chat([]byte(agentTurn1Chat), now)
		if err != nil {
			t.Fatalf("%s: Chat: %v", name, err)
		}
		if got.Text != want.Text || !slices.Equal(got.IDs, want.IDs) || !slices.Equal(got.Blocks, want.Blocks) {
			t.Errorf("%s: Responses rendered\n%q\nwant (vLLM's chat request)\n%q", name, got.Text, want.Text)
		}
	}
}

// TestResponsesReasoningEffort: reasoning.effort renders as vLLM renders
// it, through the chat template's kwargs: with Qwen3's template, effort
// "none" closes the thinking block (enable_thinking false) as the chat
// request with those kwargs does, and any other effort leaves it open.
func TestResponsesReasoningEffort(t *testing.T) {
	now := time.Unix(1700000000, 0)
	p := qwen3(t)
	render := func(body string, chat bool) Prompt {
		t.Helper()
		var pr Prompt
		var err error
		if chat {
			pr, err = p.Chat([]byte(body), now)
		} else {
			pr, err = p.Responses([]byte(body), now)
		}
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		return pr
	}
	plain := render(`{"model":"Qwen/Qwen3","input":"Add two numbers."}`, false)
	off := render(`{"model":"Qwen/Qwen3","input":"Add two numbers.","reasoning":{"effort":"none"}}`, false)
	want := render(`{"model":"Qwen/Qwen3","messages":[{"role":"user","content":"Add two numbers."}],"chat_template_kwargs":{"enable_thinking":false,"reasoning_effort":"none"}}`, true)
	if off.Text != want.Text || !slices.Equal(off.IDs, want.IDs) {
		t.Errorf("effort none rendered\n%q\nwant (vLLM's chat request)\n%q", off.Text, want.Text)
	}
	if off.Text == plain.Text || !strings.HasSuffix(off.Text, "<think>\n\n</think>\n\n") {
		t.Errorf("effort none did not close the thinking block: %q", off.Text)
	}
	if high := render(`{"model":"Qwen/Qwen3","input":"Add two numbers.","reasoning":{"effort":"high"}}`, false); high.Text != plain.Text {
		t.Errorf("effort high rendered %q, want the default %q", high.Text, plain.Text)
	}
	// The request's own enable_thinking wins over the effort's.
	if kept := render(`{"model":"Qwen/Qwen3","input":"Add two numbers.","reasoning":{"effort":"none"},"chat_template_kwargs":{"enable_thinking":true}}`, false); kept.Text != plain.Text {
		t.Errorf("chat_template_kwargs.enable_thinking true did not win: %q", kept.Text)
	}
}

// Each turn of the agent renders as an extension of the one before, so
// the engine's prefix cache (and the gateway's index) hits the earlier
// turns' blocks.
func TestResponsesTurnsExtend(t *testing.T) {
	now := time.Unix(1700000000, 0)
	p := qwen3(t)
	var prev Prompt
	for turn := 0; turn < 4; turn++ {
		cur, err := p.Responses([]byte(agentTurn(turn)), now)
		if err != nil {
			t.Fatal(err)
		}
		if turn > 0 {
			shared := (len(prev.IDs) - 3) / p.BlockSize
			if shared == 0 || !slices.Equal(cur.Blocks[:shared], prev.Blocks[:shared]) {
				t.Errorf("turn %d: the first %d blocks differ from turn %d's", turn, shared, turn-1)
			}
		}
		prev = cur
	}
}

func TestResponsesErrors(t *testing.T) {
	p := qwen3(t)
	now := time.Now()
	if _, err := p.Responses([]byte(`{"model":"m"}`), now); err == nil || errors.Is(err, ErrUnsupported) {
		t.Errorf("no input: err = %v, want invalid", err)
	}
	// The conversation of a continued response is in the engine's store.
	if _, err := p.Responses([]byte(`{"model":"m","input":"more","previous_response_id":"resp_1"}`), now); !errors.Is(err, ErrUnsupported) {
		t.Errorf("previous_response_id: err = %v, want ErrUnsupported", err)
	}
	if _, err := p.Responses([]byte(`{"model":"m","input":[{"role":"user","content":[{"type":"input_image","image_url":"http://x"}]}]}`), now); !errors.Is(err, ErrUnsupported) {
		t.Errorf("image: err = %v, want ErrUnsupported", err)
	}
}

package tokenize

import (
	"strings"
	"testing"
	"time"

	"github.com/inferrail/inferrail/config"
)

// A model's anthropic_inline_system places Messages' inline system
// messages: kept as a system turn, or folded into the user turn before.
func TestInlineSystemMode(t *testing.T) {
	body := []byte(`{"model":"m","max_tokens":4,"system":"S","messages":[{"role":"user","content":"q"},{"role":"system","content":"note"}]}`)
	render := func(mode string) string {
		t.Helper()
		mc := config.NewModel("m")
		mc.Tokenizer, mc.AnthropicInlineSystem = Sim, mode
		m, err := Load(mc, "", 0)
		if err != nil {
			t.Fatal(err)
		}
		p, err := m.Prepare(Messages, body, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return p.Text
	}
	if got := render("preserve"); !strings.Contains(got, "<|im_start|>system\nnote<|im_end|>") {
		t.Errorf("preserve: %q", got)
	}
	if got := render("fold"); !strings.Contains(got, "<|im_start|>user\nq\n\nnote<|im_end|>") {
		t.Errorf("fold: %q", got)
	}
}

// A model loaded with a chat template resolves vLLM's disabled-thinking
// effort once, at load ("none" for Qwen3's template), so a request with
// thinking disabled does not probe the template again.
func TestLoadResolvesDisabledThinkingEffort(t *testing.T) {
	if got := qwen3(t).Preparer().DisabledThinkingEffort; got != "none" {
		t.Fatalf("Qwen3 loaded with disabled-thinking effort %q, want none", got)
	}
}

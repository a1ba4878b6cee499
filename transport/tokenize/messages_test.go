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

package prompt

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/inferrail/inferrail/model/anthropic"
)

// Messages prepares an Anthropic Messages body (a /v1/messages body, or a
// /v1/messages/count_tokens body when count is true) as vLLM's Anthropic
// entrypoint does: converted into the OpenAI chat request vLLM builds for
// it (anthropic.ToChatEffort, inline system messages placed by
// p.InlineSystem), then prepared as Chat prepares that request, so tokens
// and block hashes are the chat path's. thinking.type "disabled" becomes
// the reasoning_effort vLLM's --anthropic-disabled-thinking-effort=auto
// resolves for the template (p.DisabledThinkingEffort, or
// ResolveDisabledThinkingEffort when that is ""). A body vLLM would
// refuse is an error wrapping anthropic.ErrInvalid; one the gateway cannot
// convert exactly is ErrUnsupported.
func (p *Preparer) Messages(body []byte, count bool, now time.Time) (Prompt, error) {
	req, err := anthropic.Parse(body, count)
	if err != nil {
		return Prompt{}, fmt.Errorf("prompt: %w", err)
	}
	req.KeepBillingHeader = p.KeepBillingHeader
	disabled := p.DisabledThinkingEffort
	if req.Thinking == "disabled" && disabled == "" {
		disabled = p.ResolveDisabledThinkingEffort(now)
	}
	chat, err := anthropic.ToChatEffort(req, p.InlineSystem, disabled, now)
	if errors.Is(err, anthropic.ErrUnsupported) {
		return Prompt{}, fmt.Errorf("%w: %w", ErrUnsupported, err)
	}
	if err != nil {
		return Prompt{}, fmt.Errorf("prompt: %w", err)
	}
	return p.Chat(chat, now)
}

// probeChat is the conversation vLLM renders to see whether the template
// honours reasoning_effort "none" (_render_probe_prompt).
const probeChat = `{"messages":[{"role":"user","content":"Hi"}],"reasoning_effort":`

// ResolveDisabledThinkingEffort is what vLLM's
// _probe_disabled_thinking_effort finds for p's template: "none", unless
// the template rejects it or renders it as it renders one of the thinking
// efforts, then "low". It renders six small prompts, 0.2 to 0.3 ms for
// Qwen3 on the shared 2-core machine (BenchmarkMessagesThinking); vLLM
// does it once per server. The simulator's chat format reads no effort:
// "none".
func (p *Preparer) ResolveDisabledThinkingEffort(now time.Time) string {
	if p.Sim {
		return "none"
	}
	render := func(effort string) (Prompt, error) {
		return p.Chat([]byte(probeChat+`"`+effort+`"}`), now)
	}
	none, err := render("none")
	if err != nil {
		return "low"
	}
	for _, e := range anthropic.Efforts {
		if pr, err := render(e); err == nil && pr.Text == none.Text && slices.Equal(pr.IDs, none.IDs) {
			return "low"
		}
	}
	return "none"
}

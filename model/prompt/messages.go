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
// resolves for the template (disabledThinkingEffort). A body vLLM would
// refuse is an error wrapping anthropic.ErrInvalid; one the gateway cannot
// convert exactly is ErrUnsupported.
func (p *Preparer) Messages(body []byte, count bool, now time.Time) (Prompt, error) {
	req, err := anthropic.Parse(body, count)
	if err != nil {
		return Prompt{}, fmt.Errorf("prompt: %w", err)
	}
	disabled := "none"
	if req.Thinking == "disabled" && !p.Sim {
		disabled = p.disabledThinkingEffort(now)
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

// disabledThinkingEffort is what vLLM's _probe_disabled_thinking_effort
// finds for p's template: "none", unless the template rejects it or
// renders it as it renders one of the thinking efforts, then "low". vLLM
// probes once per server; the gateway renders the probe for each request
// that disables thinking, which is rare and cheap next to the request's
// own render.
func (p *Preparer) disabledThinkingEffort(now time.Time) string {
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

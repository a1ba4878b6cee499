package prompt

import (
	"errors"
	"fmt"
	"time"

	"github.com/inferrail/inferrail/model/anthropic"
)

// Messages prepares an Anthropic Messages body (a /v1/messages body, or a
// /v1/messages/count_tokens body when count is true) as vLLM's Anthropic
// entrypoint does: converted into the OpenAI chat request vLLM builds for
// it (anthropic.ToChat, inline system messages placed by p.InlineSystem),
// then prepared as Chat prepares that request, so tokens and block hashes
// are the chat path's. A body vLLM would refuse is an error wrapping
// anthropic.ErrInvalid; one the gateway cannot convert exactly is
// ErrUnsupported.
func (p *Preparer) Messages(body []byte, count bool, now time.Time) (Prompt, error) {
	req, err := anthropic.Parse(body, count)
	if err != nil {
		return Prompt{}, fmt.Errorf("prompt: %w", err)
	}
	req.KeepBillingHeader = p.KeepBillingHeader
	chat, err := anthropic.ToChat(req, p.InlineSystem, now)
	if errors.Is(err, anthropic.ErrUnsupported) {
		return Prompt{}, fmt.Errorf("%w: %w", ErrUnsupported, err)
	}
	if err != nil {
		return Prompt{}, fmt.Errorf("prompt: %w", err)
	}
	return p.Chat(chat, now)
}

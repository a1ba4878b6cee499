package prompt

import (
	"errors"
	"fmt"
	"time"

	"github.com/inferrail/inferrail/model/responses"
)

// Responses prepares an OpenAI Responses body (/v1/responses) as vLLM's
// Responses entrypoint does: converted into the chat request vLLM builds
// for it (responses.ToChat), then prepared as Chat prepares that request,
// so tokens and block hashes are the chat path's. A body vLLM would refuse
// is an error wrapping responses.ErrInvalid; one the gateway cannot
// render, among them every request that continues a stored response
// (previous_response_id: the conversation is in the engine), is
// ErrUnsupported.
func (p *Preparer) Responses(body []byte, now time.Time) (Prompt, error) {
	req, err := responses.Parse(body)
	if err != nil {
		return Prompt{}, fmt.Errorf("prompt: %w", err)
	}
	chat, err := responses.ToChat(req, nil)
	if errors.Is(err, responses.ErrUnsupported) || errors.Is(err, responses.ErrHistory) {
		return Prompt{}, fmt.Errorf("%w: %w", ErrUnsupported, err)
	}
	if err != nil {
		return Prompt{}, fmt.Errorf("prompt: %w", err)
	}
	return p.Chat(chat, now)
}

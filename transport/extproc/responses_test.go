package extproc

import (
	"testing"
	"time"

	"github.com/inferrail/inferrail/model/prompt"
	"github.com/inferrail/inferrail/transport/frontend"
)

// PrepareResponses makes simTokenizer a frontend.ResponsesTokenizer.
func (simTokenizer) PrepareResponses(model string, body []byte, _ time.Time) (frontend.Prompt, bool) {
	p := prompt.Preparer{Model: model, Sim: true, BlockSize: 16}
	pr, err := p.Responses(body, time.Now())
	if err != nil {
		return frontend.Prompt{}, false
	}
	return frontend.Prompt{Tokens: len(pr.IDs), Blocks: pr.Blocks, BlockSize: 16}, true
}

// TestResponsesUsage: the endpoint picker prepares Responses requests as
// the gateway does, and checks the engine's usage (input_tokens, in the
// body or in response.completed) against its count.
func TestResponsesUsage(t *testing.T) {
	checkUsage(t, "/v1/responses", func(stream string) []byte {
		return []byte(`{"model":"sim","max_output_tokens":6,"stream":` + stream + `,"instructions":"Be brief.",` +
			`"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"Summarise the design of the parser."}]}]}`)
	})
}

package extproc

import (
	"strings"
	"testing"
	"time"

	"github.com/inferrail/inferrail/model/prompt"
	"github.com/inferrail/inferrail/transport/frontend"
)

// PrepareMessages makes simTokenizer a frontend.MessagesTokenizer.
func (simTokenizer) PrepareMessages(model string, count bool, body []byte, _ time.Time) (frontend.Prompt, bool) {
	p := prompt.Preparer{Model: model, Sim: true, BlockSize: 16}
	pr, err := p.Messages(body, count, time.Now())
	if err != nil {
		return frontend.Prompt{}, false
	}
	return frontend.Prompt{Tokens: len(pr.IDs), Blocks: pr.Blocks, BlockSize: 16}, true
}

// TestMessagesUsage: the endpoint picker prepares Anthropic Messages
// requests (Claude Code's ?beta=true path) as the gateway does, and checks
// the engine's Anthropic usage, streamed and not, against its count.
func TestMessagesUsage(t *testing.T) {
	checkUsage(t, "/v1/messages?beta=true", func(stream string) []byte {
		return []byte(`{"model":"sim","max_tokens":6,"stream":` + stream +
			`,"system":[{"type":"text","text":"x-anthropic-billing-header: cch=7;"},{"type":"text","text":"Be brief."}],` +
			`"messages":[{"role":"user","content":[{"type":"text","text":"Summarise the design of the parser in a few words."}]}]}`)
	})
}

// checkUsage sends the body for path, unstreamed then streamed ("false",
// "true"), through the picker to an engine, and checks that the picker
// read the engine's usage and found its prompt count equal to its own.
func checkUsage(t *testing.T, path string, body func(stream string) []byte) {
	t.Helper()
	p := startPicker(t, 2, nil)
	for i, stream := range []string{"false", "true"} {
		r := post(body(stream), 0)
		r.Path = path
		x, routed := p.route(r)
		status, hdr, out := p.forward(x, r, routed, 0)
		if status != 200 || !strings.Contains(out, `"input_tokens"`) {
			t.Fatalf("stream %v: %d %s", stream, status, out)
		}
		if hdr["x-inferrail-prompt-tokens"] == "" {
			t.Fatalf("stream %v: no x-inferrail-prompt-tokens in %v", stream, hdr)
		}
		id := p.replica(routed.Endpoints[0])
		series := p.met.Replica(id, model, hdr["x-inferrail-policy"])
		if got := series.Prompt.Checked.Get(); got < 1 {
			t.Fatalf("request %d (stream %v): prompt checks %d", i, stream, got)
		}
		if got := series.Prompt.Mismatched.Get(); got != 0 {
			t.Fatalf("stream %v: prompt mismatches %d", stream, got)
		}
	}
}

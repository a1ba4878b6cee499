package workload

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/inferrail/inferrail/model/token"
)

// A claude-code session's requests: the billing header changes with every
// request while the prompt the engine renders (header dropped) extends the
// one before by its answer, tool call and result; with the header kept,
// consecutive requests part near the start. Tool calls, tool results and
// inline system reminders all occur, and every body is a valid Messages
// request.
func TestClaudeCodeTurns(t *testing.T) {
	w := NewClaudeCode()
	reqs := take(t, &w, 3, 5, 400)
	bySession := map[string][]Request{}
	for _, r := range reqs {
		if !r.IsMessages() || r.Chat() || r.Session == "" {
			t.Fatalf("request %+v is not a Messages request of a session", r.Class)
		}
		bySession[r.Session] = append(bySession[r.Session], r)
	}
	enc := NewEncoder()
	gen := len(token.Sim{}.Encode(nil, token.RenderSimChat(nil, true)))
	var pairs, reminders, results int
	for sess, rs := range bySession {
		for i := 1; i < len(rs); i++ {
			a, b := parseBody(t, &rs[i-1]), parseBody(t, &rs[i])
			if a.header == b.header || !strings.HasPrefix(b.header, "x-anthropic-billing-header: cc_version=") {
				t.Fatalf("%s: billing header %q, then %q", sess, a.header, b.header)
			}
			if b.user != sess || len(b.Messages) <= len(a.Messages) {
				t.Fatalf("%s: user_id %q, %d messages after %d", sess, b.user, len(b.Messages), len(a.Messages))
			}
			ea, eb := enc.Encode(nil, &rs[i-1]), enc.Encode(nil, &rs[i])
			// The earlier prompt without its generation prompt, then
			// the simulator's answer to it, lead the later prompt.
			want := AppendOutput(slices.Clone(ea[:len(ea)-gen]), ea, rs[i-1].MaxTokens)
			if len(eb) <= len(want) || !slices.Equal(eb[:len(ea)-gen], want[:len(ea)-gen]) {
				t.Fatalf("%s: request %d does not extend request %d's prompt", sess, i, i-1)
			}
			ra, rb := enc.EncodeKeepingHeader(nil, &rs[i-1]), enc.EncodeKeepingHeader(nil, &rs[i])
			common := 0
			for common < len(ra) && common < len(rb) && ra[common] == rb[common] {
				common++
			}
			if common > 40 || len(ra) <= len(ea) {
				t.Fatalf("%s: with the header kept, requests %d and %d share %d tokens (%d and %d without it)", sess, i-1, i, common, len(ea), len(ra))
			}
			pairs++
		}
		last := parseBody(t, &rs[len(rs)-1])
		for _, m := range last.Messages {
			switch {
			case m.Role == "system":
				reminders++
			case strings.Contains(string(m.Content), `"tool_result"`):
				results++
			}
		}
	}
	if pairs < 100 || reminders == 0 || results == 0 {
		t.Fatalf("%d consecutive pairs, %d reminders, %d tool results", pairs, reminders, results)
	}
}

type claudeBody struct {
	header, user string
	Messages     []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
}

func parseBody(t *testing.T, r *Request) claudeBody {
	t.Helper()
	var b struct {
		claudeBody
		System []struct {
			Text string `json:"text"`
		} `json:"system"`
		Tools    []json.RawMessage `json:"tools"`
		Metadata struct {
			UserID string `json:"user_id"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(AppendMessagesBody(nil, "m", r, true), &b); err != nil {
		t.Fatalf("body: %v", err)
	}
	if len(b.System) != 2 || len(b.Tools) == 0 {
		t.Fatalf("system of %d blocks, %d tools", len(b.System), len(b.Tools))
	}
	b.header, b.user = b.System[0].Text, b.Metadata.UserID
	return b.claudeBody
}

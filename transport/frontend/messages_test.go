package frontend

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/inferrail/inferrail/config"
	"github.com/inferrail/inferrail/model/anthropic"
	"github.com/inferrail/inferrail/model/openai"
	"github.com/inferrail/inferrail/model/prompt"
	"github.com/inferrail/inferrail/sim"
)

// simMessagesTokenizer is simTokenizer that prepares Messages bodies too,
// as the gateway's pool does for a builtin:sim model.
type simMessagesTokenizer struct{ simTokenizer }

func (s simMessagesTokenizer) PrepareMessages(model string, count bool, body []byte, deadline time.Time) (Prompt, bool) {
	p := prompt.Preparer{Model: model, Sim: true, BlockSize: 16}
	pr, err := p.Messages(body, count, time.Now())
	if err != nil {
		return Prompt{}, false
	}
	return Prompt{Tokens: len(pr.IDs) + s.skew, Blocks: pr.Blocks, BlockSize: 16}, true
}

var _ MessagesTokenizer = simMessagesTokenizer{}

// claudeCode is a Claude-Code-shaped Messages body for turn n: a billing
// header that changes every turn, tools, a tool round trip per turn and
// an inline system reminder.
func claudeCode(n int, stream bool) string {
	var b strings.Builder
	b.WriteString(`{"model":"sim","max_tokens":4,"stream":` + strconv.FormatBool(stream) + `,"metadata":{"user_id":"user_1_account__session_abc"},`)
	b.WriteString(`"system":[{"type":"text","text":"x-anthropic-billing-header: cc_version=2.1; cch=` + strconv.Itoa(1000+n) + `;"},`)
	b.WriteString(`{"type":"text","text":"You are Claude Code, an interactive agent that helps with software engineering tasks. Read before you edit."}],`)
	b.WriteString(`"tools":[{"name":"Read","description":"Reads a file","input_schema":{"type":"object","properties":{"file_path":{"type":"string"}}}}],`)
	b.WriteString(`"messages":[{"role":"user","content":[{"type":"text","text":"The parser test fails on empty input; find out why and fix it."}]}`)
	for i := range n {
		id := "toolu_" + strconv.Itoa(i)
		b.WriteString(`,{"role":"assistant","content":[{"type":"text","text":"Reading the file now."},{"type":"tool_use","id":"` + id + `","name":"Read","input":{"file_path":"parse` + strconv.Itoa(i) + `.go"}}]}`)
		b.WriteString(`,{"role":"user","content":[{"type":"tool_result","tool_use_id":"` + id + `","content":"package parse // the contents of file ` + strconv.Itoa(i) + ` go here"}]}`)
		b.WriteString(`,{"role":"system","content":"<system-reminder>Turn ` + strconv.Itoa(i) + `: keep going.</system-reminder>"}`)
	}
	b.WriteString(`]}`)
	return b.String()
}

// messagesUsage is the usage of a Messages response: the body's, or a
// stream's message_delta's.
func messagesUsage(t *testing.T, body string) anthropic.Usage {
	t.Helper()
	if u, ok := anthropic.FindUsage([]byte(body)); ok {
		return u
	}
	for ev := range strings.SplitSeq(body, "\n\n") {
		if _, data, ok := strings.Cut(ev, "data: "); ok && anthropic.Event([]byte(data)) == "message_delta" {
			if u, ok := anthropic.FindUsage([]byte(data)); ok {
				return u
			}
		}
	}
	t.Fatalf("no usage in %q", body)
	return anthropic.Usage{}
}

// TestMessagesRouted: Claude Code's requests (?beta=true, sync and
// streamed) are proxied and routed on the prompt vLLM renders: the
// gateway's token count equals the engine's (input + cache reads), the
// engine's cache reads grow turn after turn although the billing header
// changes, the gateway predicts exactly the tokens the engine reads from
// its cache, and every response's usage is checked against the gateway's
// count with no mismatch.
func TestMessagesRouted(t *testing.T) {
	sims, urls := startSims(t, 1, func(o *sim.Options) { o.EnablePromptTokensDetails = true })
	// A generous estimate deadline: on a loaded test machine a replica
	// priced from its snapshot may not have applied the last turn yet.
	g := startOpts(t, urls, func(c *config.Config) { c.Models[0].Policy = "cost_model"; c.Routing.EstimateDeadline = time.Second },
		func(o *Options) { o.Tokenizer = simMessagesTokenizer{} })
	g.sims = sims
	lastRead := -1
	for turn := range 4 {
		resp, body := g.post("/v1/messages?beta=true", claudeCode(turn, turn%2 == 1), "anthropic-version", "2023-06-01")
		if resp.StatusCode != 200 {
			t.Fatalf("turn %d: %d %s", turn, resp.StatusCode, body)
		}
		u := messagesUsage(t, body)
		gwTokens, _ := strconv.Atoi(resp.Header.Get(HeaderPromptTokens))
		if gwTokens == 0 || gwTokens != u.Input+u.CacheRead {
			t.Fatalf("turn %d: gateway counted %d prompt tokens, the engine %d+%d", turn, gwTokens, u.Input, u.CacheRead)
		}
		if u.CacheRead <= lastRead {
			t.Errorf("turn %d: the engine read %d cached tokens after %d", turn, u.CacheRead, lastRead)
		}
		lastRead = u.CacheRead
		// The next turn comes once this one has ended, as an agent's does.
		waitFor(t, "turn ended", 2*time.Second, func() bool { return snapshot(t, g, "r0").Counters.InFlight() == 0 })
		predicted, _ := strconv.Atoi(resp.Header.Get(HeaderCachedTokens))
		if predicted != u.CacheRead {
			t.Errorf("turn %d: predicted %d cached tokens, the engine read %d", turn, predicted, u.CacheRead)

		}
	}
	lm := `{model="` + model + `",replica="r0"}`
	waitFor(t, "every usage checked", 2*time.Second, func() bool {
		return counter(g, "inferrail_prompt_tokens_checked_total"+lm) == 4
	})
	if n := counter(g, "inferrail_prompt_tokens_mismatch_total"+lm); n != 0 {
		t.Fatalf("%v prompt mismatches", n)
	}
}

// TestMessagesErrors: the gateway's own errors on the Messages paths are
// in Anthropic's shape, with the status they would have on chat.
func TestMessagesErrors(t *testing.T) {
	g := start(t, 1, nil, nil)
	f := func(path, body string, status int, typ string) {
		t.Helper()
		resp, got := g.post(path, body)
		var e struct {
			Type  string
			Error struct{ Type, Message string }
		}
		if resp.StatusCode != status || json.Unmarshal([]byte(got), &e) != nil || e.Type != "error" || e.Error.Type != typ || e.Error.Message == "" {
			t.Errorf("POST %s %s: %d %s; want %d %s", path, body, resp.StatusCode, got, status, typ)
		}
	}
	f("/v1/messages", `not json`, 400, "invalid_request_error")
	f("/v1/messages?beta=true", `{"model":"nope","max_tokens":1,"messages":[]}`, 404, "not_found_error")
	f("/v1/messages/count_tokens", `{"model":"nope","messages":[]}`, 404, "not_found_error")
	// The engine's own errors pass as it sent them (vLLM's are in the
	// Anthropic envelope).
	f("/v1/messages", `{"model":"sim","messages":[]}`, 400, "Bad Request")
	resp, err := client().Get(g.url("/v1/messages"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 405 || resp.Header.Get("Allow") != "POST" {
		t.Errorf("GET /v1/messages: %d", resp.StatusCode)
	}
	// Chat keeps OpenAI's shape.
	if resp, body := g.post("/v1/chat/completions", `not json`); resp.StatusCode != 400 || !strings.HasPrefix(body, `{"error":`) {
		t.Errorf("chat error: %d %s", resp.StatusCode, body)
	}
}

// TestCountTokens: count_tokens is answered by the gateway from its
// tokenizer, with the number the engine gives for the same body; without
// a tokenizer that prepares it, an engine answers.
func TestCountTokens(t *testing.T) {
	sims, urls := startSims(t, 1, nil)
	body := strings.Replace(claudeCode(2, false), `"max_tokens":4,"stream":false,`, "", 1)
	// What the engine answers itself.
	engine, err := client().Post(urls[0]+"/v1/messages/count_tokens", "application/json",
		strings.NewReader(strings.Replace(body, `"model":"sim"`, `"model":"`+model+`"`, 1)))
	if err != nil {
		t.Fatal(err)
	}
	var want struct {
		InputTokens int `json:"input_tokens"`
	}
	if err := json.NewDecoder(engine.Body).Decode(&want); err != nil || want.InputTokens == 0 {
		t.Fatalf("engine count_tokens: %v %+v", err, want)
	}
	engine.Body.Close()
	for _, tc := range []struct {
		name  string
		tok   Tokenizer
		local bool
	}{{"tokenizer", simMessagesTokenizer{}, true}, {"chat-only tokenizer", simTokenizer{}, false}, {"none", nil, false}} {
		g := startOpts(t, urls, nil, func(o *Options) { o.Tokenizer = tc.tok })
		g.sims = sims
		resp, got := g.post("/v1/messages/count_tokens", body)
		var ct struct {
			InputTokens int `json:"input_tokens"`
			Context     struct {
				Original int `json:"original_input_tokens"`
			} `json:"context_management"`
		}
		if resp.StatusCode != 200 || json.Unmarshal([]byte(got), &ct) != nil || ct.InputTokens != want.InputTokens || ct.Context.Original != want.InputTokens {
			t.Errorf("%s: %d %s, want %d tokens", tc.name, resp.StatusCode, got, want.InputTokens)
		}
		if served := resp.Header.Get(HeaderReplica) != ""; served == tc.local {
			t.Errorf("%s: answered locally %v, want %v", tc.name, !served, tc.local)
		}
	}
}

// FuzzMessagesStream: any stream bytes, cut anywhere, give a usage or
// none, never a panic; the session key reader takes any body.
func FuzzMessagesStream(f *testing.F) {
	f.Add([]byte("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":5,\"output_tokens\":0}}}\n\n"+
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":3,\"cache_read_input_tokens\":16,\"input_tokens\":1}}\n\n"+
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"), 40)
	f.Add([]byte(`{"metadata":{"user_id":"u"},"usage":{"input_tokens":1}}`), 0)
	f.Fuzz(func(t *testing.T, b []byte, cut int) {
		var head streamHead
		var tail openai.StreamTail
		cut = min(max(cut, 0), len(b))
		for _, part := range [][]byte{b[:cut], b[cut:]} {
			head.Write(part)
			tail.Write(part)
		}
		r := &request{messages: true}
		u, ok := r.streamUsage(&head, &tail)
		if ok && (u.PromptTokens < u.CachedTokens || u.PromptTokens < 0) {
			t.Fatalf("usage %+v", u)
		}
		r.streamDone(&tail)
		ResponseUsage(true, b)
		anthropicUser(b)
	})
}

// TestMessagesStreamNotStripped: with usage_for_accuracy: inject, a
// Messages body goes to the engine as it came (stream_options is an
// OpenAI field) and its stream reaches the client whole.
func TestMessagesStreamNotStripped(t *testing.T) {
	const stream = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":3,\"output_tokens\":0}}}\n\n" +
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":1}}\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	bodies := make(chan string, 4)
	eng := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/health":
			return
		case "/v1/models":
			io.WriteString(w, `{"object":"list","data":[]}`)
			return
		case "/metrics":
			http.NotFound(w, r)
			return
		}
		b, _ := io.ReadAll(r.Body)
		bodies <- string(b)
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, stream)
	}))
	t.Cleanup(eng.Close)
	g := startWith(t, []string{eng.URL}, func(c *config.Config) { c.Observability.UsageForAccuracy = config.UsageInject })
	sent := `{"model":"sim","max_tokens":4,"stream":true,"messages":[{"role":"user","content":"hi"}]}`
	resp, body := g.post("/v1/messages", sent)
	if resp.StatusCode != 200 || body != stream {
		t.Fatalf("%d %q", resp.StatusCode, body)
	}
	select {
	case got := <-bodies:
		if strings.Contains(got, "stream_options") {
			t.Fatalf("the engine got %s", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the engine got nothing")
	}
}

package frontend

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/inferrail/inferrail/config"
	"github.com/inferrail/inferrail/model/openai"
	"github.com/inferrail/inferrail/model/prompt"
	"github.com/inferrail/inferrail/model/responses"
)

// simResponsesTokenizer is simTokenizer that prepares Responses bodies
// too, as the gateway's pool does for a builtin:sim model.
type simResponsesTokenizer struct{ simTokenizer }

func (s simResponsesTokenizer) PrepareResponses(model string, body []byte, deadline time.Time) (Prompt, bool) {
	p := prompt.Preparer{Model: model, Sim: true, BlockSize: 16}
	pr, err := p.Responses(body, time.Now())
	if err != nil {
		return Prompt{}, false
	}
	return Prompt{Tokens: len(pr.IDs) + s.skew, Blocks: pr.Blocks, BlockSize: 16}, true
}

var _ ResponsesTokenizer = simResponsesTokenizer{}

// longInstructions is a system prompt of many blocks, shared by every
// request of the agent below.
var longInstructions = strings.Repeat("You are a careful coding agent: read the file, explain the change, then edit. ", 12)

func responsesBody(input string, stream bool, extra string) string {
	return `{"model":"sim","max_output_tokens":4,"stream":` + strconv.FormatBool(stream) + `,"instructions":` + strconv.Quote(longInstructions) +
		`,"tools":[{"type":"function","name":"read","parameters":{"type":"object","properties":{"path":{"type":"string"}}}}]` +
		`,"input":` + strconv.Quote(input) + extra + `}`
}

// responseUsage is the usage of a Responses answer: the body's, or a
// stream's response.completed event's.
func responseUsage(t *testing.T, body string) openai.Usage {
	t.Helper()
	if u, ok := responses.FindUsage([]byte(body)); ok {
		return u
	}
	for ev := range strings.SplitSeq(body, "\n\n") {
		if _, data, ok := strings.Cut(ev, "data: "); ok {
			if final, u, found := responses.Final([]byte(data), true); final && found {
				return u
			}
		}
	}
	t.Fatalf("no usage in %q", body)
	return openai.Usage{}
}

// TestResponsesRouted: Responses requests (sync and streamed) are
// proxied and routed on the prompt vLLM renders. Across three engines, a
// request sharing the long instructions of an earlier one lands on the
// engine that served it, which reports the shared blocks as cached
// tokens; the gateway counts the engine's prompt tokens exactly and
// predicts exactly the cached tokens, and every usage is checked with no
// mismatch.
func TestResponsesRouted(t *testing.T) {
	sims, urls := startSims(t, 3, nil)
	g := startOpts(t, urls, func(c *config.Config) { c.Models[0].Policy = "cost_model" },
		func(o *Options) { o.Tokenizer = simResponsesTokenizer{} })
	g.sims = sims
	home := ""
	for turn, input := range []string{"Fix the parser test.", "Now the lexer test.", "And the printer.", "Last, the docs."} {
		resp, body := g.post("/v1/responses", responsesBody(input, turn%2 == 1, ""))
		if resp.StatusCode != 200 {
			t.Fatalf("turn %d: %d %s", turn, resp.StatusCode, body)
		}
		u := responseUsage(t, body)
		gwTokens, _ := strconv.Atoi(resp.Header.Get(HeaderPromptTokens))
		if gwTokens == 0 || gwTokens != u.PromptTokens {
			t.Fatalf("turn %d: gateway counted %d prompt tokens, the engine %d", turn, gwTokens, u.PromptTokens)
		}
		predicted, _ := strconv.Atoi(resp.Header.Get(HeaderCachedTokens))
		if predicted != u.CachedTokens {
			t.Errorf("turn %d: predicted %d cached tokens, the engine read %d", turn, predicted, u.CachedTokens)
		}
		replica := resp.Header.Get(HeaderReplica)
		if turn == 0 {
			home = replica
		} else {
			if replica != home {
				t.Errorf("turn %d went to %s, the instructions are cached on %s", turn, replica, home)
			}
			if u.CachedTokens < len(longInstructions)/8 {
				t.Errorf("turn %d: the engine read %d cached tokens of %d", turn, u.CachedTokens, u.PromptTokens)
			}
		}
		waitFor(t, "turn ended", 2*time.Second, func() bool { return snapshot(t, g, home).Counters.InFlight() == 0 })
	}
	lm := `{model="` + model + `",replica="` + home + `"}`
	waitFor(t, "every usage checked", 2*time.Second, func() bool {
		return counter(g, "inferrail_prompt_tokens_checked_total"+lm) == 4
	})
	if n := counter(g, "inferrail_prompt_tokens_mismatch_total"+lm); n != 0 {
		t.Fatalf("%v prompt mismatches", n)
	}
}

// TestResponsesAffinity: with round_robin, which would spread them, every
// request continuing a stored response (previous_response_id, sync and
// streamed) goes to the replica that stored it and is answered; an id the
// gateway never relayed is routed as any request (the engine answers its
// 404); once the home replica has left the fleet, the gateway answers 404
// in OpenAI's shape, saying why, and counts it.
func TestResponsesAffinity(t *testing.T) {
	sims, urls := startSims(t, 3, nil)
	g := startOpts(t, urls, func(c *config.Config) { c.Models[0].Policy = "round_robin" },
		func(o *Options) { o.Tokenizer = simResponsesTokenizer{} })
	g.sims = sims
	resp, body := g.post("/v1/responses", responsesBody("Start.", false, ""))
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	home, prev := resp.Header.Get(HeaderReplica), responses.ID([]byte(body))
	for turn := 1; turn <= 5; turn++ {
		stream := turn%2 == 0
		next := `{"model":"sim","max_output_tokens":4,"stream":` + strconv.FormatBool(stream) + `,"previous_response_id":"` + prev + `","input":"Turn ` + strconv.Itoa(turn) + `."}`
		resp, body := g.post("/v1/responses", next)
		if resp.StatusCode != 200 {
			t.Fatalf("turn %d: %d %s", turn, resp.StatusCode, body)
		}
		if got := resp.Header.Get(HeaderReplica); got != home || resp.Header.Get(HeaderAffinity) != AffinityPinned {
			t.Fatalf("turn %d: served by %s (%s), the response is stored on %s", turn, got, resp.Header.Get(HeaderAffinity), home)
		}
		if prev = responses.ID([]byte(body)); prev == "" {
			t.Fatalf("turn %d: no response id in %q", turn, body)
		}
	}
	// Without the pin the same requests spread: round_robin moves on.
	spread := map[string]bool{}
	for range 3 {
		resp, _ := g.post("/v1/responses", responsesBody("Unrelated.", false, ""))
		spread[resp.Header.Get(HeaderReplica)] = true
	}
	if len(spread) < 2 {
		t.Fatalf("round_robin kept every request on %v: the test shows nothing", spread)
	}
	resp, body = g.post("/v1/responses", `{"model":"sim","previous_response_id":"resp_never","input":"x"}`)
	if resp.StatusCode != 404 || resp.Header.Get(HeaderAffinity) != AffinityUnknown || resp.Header.Get(HeaderReplica) == "" {
		t.Errorf("unknown id: %d %s %q, want the engine's 404", resp.StatusCode, body, resp.Header.Get(HeaderAffinity))
	}
	// The home replica leaves the fleet.
	next := *g.cfg
	next.Replicas = slices.DeleteFunc(slices.Clone(g.cfg.Replicas), func(r config.Replica) bool { return r.ID == home })
	if err := g.fl.Reconfigure(&next); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "replica removed", 2*time.Second, func() bool { _, ok := g.fl.Snapshot(home); return !ok })
	resp, body = g.post("/v1/responses", `{"model":"sim","previous_response_id":"`+prev+`","input":"x"}`)
	var e struct {
		Error struct{ Type, Message, Param string }
	}
	if resp.StatusCode != 404 || json.Unmarshal([]byte(body), &e) != nil || e.Error.Type != "invalid_request_error" ||
		e.Error.Param != "previous_response_id" || !strings.Contains(e.Error.Message, home) || resp.Header.Get(HeaderReplica) != "" {
		t.Errorf("home gone: %d %s", resp.StatusCode, body)
	}
	if n := counter(g, `inferrail_request_errors_total{model="`+model+`",reason="`+reasonResponseGone+`"}`); n != 1 {
		t.Errorf("%v requests counted as %s", n, reasonResponseGone)
	}
	if !strings.Contains(g.logs.String(), "has left the fleet") {
		t.Error("no log line says why")
	}
}

// TestResponsesStoreFalse: a response sent with store false is not
// remembered (vLLM keeps none), so continuing it is not pinned.
func TestResponsesStoreFalse(t *testing.T) {
	g := start(t, 2, nil, nil)
	resp, body := g.post("/v1/responses", responsesBody("x", true, `,"store":false`))
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	id := responses.ID([]byte(body))
	if id == "" {
		t.Fatalf("no id in the stream %q", body)
	}
	resp, _ = g.post("/v1/responses", `{"model":"sim","previous_response_id":"`+id+`","input":"x"}`)
	if resp.Header.Get(HeaderAffinity) != AffinityUnknown {
		t.Errorf("affinity %q for a response not stored", resp.Header.Get(HeaderAffinity))
	}
}

// FuzzResponsesStream: any stream bytes, cut anywhere, give a usage or
// none and an end or not, never a panic.
func FuzzResponsesStream(f *testing.F) {
	f.Add([]byte("event: response.created\ndata: {\"response\":{\"id\":\"resp_1\"},\"sequence_number\":0,\"type\":\"response.created\"}\n\n"+
		"event: response.completed\ndata: {\"response\":{\"id\":\"resp_1\",\"usage\":{\"input_tokens\":5,\"input_tokens_details\":{\"cached_tokens\":0},\"output_tokens\":1}},\"sequence_number\":1,\"type\":\"response.completed\"}\n\n"), 40)
	f.Fuzz(func(t *testing.T, b []byte, cut int) {
		var tail openai.StreamTail
		cut = min(max(cut, 0), len(b))
		tail.Write(b[:cut])
		tail.Write(b[cut:])
		r := &request{responses: true}
		if u, ok := r.streamUsage(nil, &tail); ok && u.PromptTokens < 0 {
			t.Fatalf("usage %+v", u)
		}
		r.streamDone(&tail)
		r.responseUsage(b)
	})
}

// TestResponsesAffinityAcrossGateways: a conversation begun through one
// gateway and continued through another (several instances, or a
// restart) stays on the replica that stores it: the second gateway asks
// the replicas which holds the id.
func TestResponsesAffinityAcrossGateways(t *testing.T) {
	sims, urls := startSims(t, 3, nil)
	rr := func(c *config.Config) { c.Models[0].Policy = "round_robin" }
	a, b := startWith(t, urls, rr), startWith(t, urls, rr)
	a.sims, b.sims = sims, sims
	resp, body := a.post("/v1/responses", responsesBody("Start.", false, ""))
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	home, prev := resp.Header.Get(HeaderReplica), responses.ID([]byte(body))
	for turn := 1; turn <= 4; turn++ {
		next := `{"model":"sim","max_output_tokens":4,"previous_response_id":"` + prev + `","input":"Turn ` + strconv.Itoa(turn) + `."}`
		resp, body := b.post("/v1/responses", next)
		if resp.StatusCode != 200 {
			t.Fatalf("turn %d: %d %s", turn, resp.StatusCode, body)
		}
		if got := resp.Header.Get(HeaderReplica); got != home || resp.Header.Get(HeaderAffinity) != AffinityPinned {
			t.Fatalf("turn %d through the other gateway: served by %s (%s), stored on %s", turn, got, resp.Header.Get(HeaderAffinity), home)
		}
		prev = responses.ID([]byte(body))
	}
}

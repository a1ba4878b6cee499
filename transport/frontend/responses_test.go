package frontend

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/inferrail/inferrail/actors/replica"
	"github.com/inferrail/inferrail/config"
	"github.com/inferrail/inferrail/model/openai"
	"github.com/inferrail/inferrail/model/prompt"
	"github.com/inferrail/inferrail/model/responses"
	"github.com/inferrail/inferrail/sim"
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
	if n := counter(g, `inferrail_request_errors_total{model="`+model+`",reason="`+ReasonResponseGone+`"}`); n != 1 {
		t.Errorf("%v requests counted as %s", n, ReasonResponseGone)
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

// storedResponse is a response stored through a gateway: its body, id and
// the replica that stores it.
type storedResponse struct{ body, id, home string }

// twoGateways starts three simulators and two gateways in front of them,
// and stores a response through the first.
func twoGateways(t *testing.T, cfgEdit func(*config.Config)) (a, b *gw, st storedResponse) {
	sims, urls := startSims(t, 3, nil)
	a, b = startWith(t, urls, cfgEdit), startWith(t, urls, cfgEdit)
	a.sims, b.sims = sims, sims
	resp, body := a.post("/v1/responses", responsesBody("Start.", false, ""))
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	return a, b, storedResponse{body: body, id: responses.ID([]byte(body)), home: resp.Header.Get(HeaderReplica)}
}

// TestResponsesAffinityAcrossGateways: a conversation begun through one
// gateway and continued through another (several instances, or a
// restart) stays on the replica that stores it: the second gateway asks
// the replicas which holds the id.
func TestResponsesAffinityAcrossGateways(t *testing.T) {
	_, b, stored := twoGateways(t, func(c *config.Config) { c.Models[0].Policy = "round_robin" })
	home, prev := stored.home, stored.id
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

// TestResponsesRetrieveAndCancel: GET /v1/responses/{id} and POST
// /v1/responses/{id}/cancel go to the replica that stores the response,
// through the gateway that relayed it and through another that did not
// (it asks the replicas): the stored response comes back, and cancel gets
// that engine's 400 (a finished response cannot be cancelled; the other
// engines would answer 404). An id no replica holds gets vLLM's 404,
// DELETE (which vLLM does not serve) 405, and once the home replica has
// left the fleet the gateway's 404, saying why, counted.
func TestResponsesRetrieveAndCancel(t *testing.T) {
	a, b, stored := twoGateways(t, func(c *config.Config) { c.Models[0].Policy = "round_robin" })
	body, home, id := stored.body, stored.home, stored.id
	for _, g := range []*gw{a, b, a, b} {
		resp, got := g.do("GET", "/v1/responses/"+id, "")
		if resp.StatusCode != 200 || resp.Header.Get(HeaderReplica) != home || got != body {
			t.Fatalf("GET: %d from %q (stored on %s)\n%s\nwant %s", resp.StatusCode, resp.Header.Get(HeaderReplica), home, got, body)
		}
	}
	for _, g := range []*gw{a, b} {
		resp, got := g.do("POST", "/v1/responses/"+id+"/cancel", "")
		if resp.StatusCode != 400 || resp.Header.Get(HeaderReplica) != home || !strings.Contains(got, "Cannot cancel a synchronous response.") {
			t.Errorf("cancel: %d from %q: %s, want the home engine's 400", resp.StatusCode, resp.Header.Get(HeaderReplica), got)
		}
	}
	var e struct {
		Error struct{ Type, Message, Param string }
	}
	resp, got := a.do("GET", "/v1/responses/resp_never", "")
	if resp.StatusCode != 404 || json.Unmarshal([]byte(got), &e) != nil || e.Error.Param != "response_id" ||
		e.Error.Message != "Response with id 'resp_never' not found." {
		t.Errorf("unknown id: %d %s", resp.StatusCode, got)
	}
	if resp, got := a.do("POST", "/v1/responses/resp_never/cancel", ""); resp.StatusCode != 404 {
		t.Errorf("cancel of an unknown id: %d %s", resp.StatusCode, got)
	}
	if resp, got := a.do("DELETE", "/v1/responses/"+id, ""); resp.StatusCode != 405 || resp.Header.Get("Allow") != "GET, HEAD" {
		t.Errorf("DELETE: %d %s (Allow %q)", resp.StatusCode, got, resp.Header.Get("Allow"))
	}
	if resp, got := a.do("GET", "/v1/responses/"+id+"/cancel", ""); resp.StatusCode != 405 || resp.Header.Get("Allow") != "POST" {
		t.Errorf("GET cancel: %d %s", resp.StatusCode, got)
	}
	next := *a.cfg
	next.Replicas = slices.DeleteFunc(slices.Clone(a.cfg.Replicas), func(r config.Replica) bool { return r.ID == home })
	if err := a.fl.Reconfigure(&next); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "replica removed", 2*time.Second, func() bool { _, ok := a.fl.Snapshot(home); return !ok })
	resp, got = a.do("GET", "/v1/responses/"+id, "")
	if resp.StatusCode != 404 || json.Unmarshal([]byte(got), &e) != nil || e.Error.Param != "response_id" || !strings.Contains(e.Error.Message, home) {
		t.Errorf("home gone: %d %s", resp.StatusCode, got)
	}
	if n := counter(a, `inferrail_request_errors_total{model="",reason="`+ReasonResponseGone+`"}`); n != 1 {
		t.Errorf("%v requests counted as %s", n, ReasonResponseGone)
	}
}

// TestResponsesLookupFailures: a replica that fails the gateway's lookup
// of a response id it did not relay (an engine error, or no answer within
// the lookup's wait) is counted in
// inferrail_response_lookup_failures_total{replica}, and the request is
// routed as one no replica holds; the replica gets the
// response_lookup_failed warning (logged), cleared once it answers a
// lookup again. Replicas that answer 404 are no failure, nor are those
// still asking when another has answered 200.
func TestResponsesLookupFailures(t *testing.T) {
	_, b, stored := twoGateways(t, nil)
	sims, home, id := b.sims, stored.home, stored.id
	idx := slices.IndexFunc(b.cfg.Replicas, func(r config.Replica) bool { return r.ID == home })
	failures := func(replica string) float64 {
		return counter(b, `inferrail_response_lookup_failures_total{replica="`+replica+`"}`)
	}
	path := "/v1/responses/" + id
	sims[idx].SetFault(sim.Fault{Kind: sim.FaultFail, Status: 500, Paths: []string{path}})
	next := `{"model":"sim","max_output_tokens":4,"previous_response_id":"` + id + `","input":"More."}`
	if resp, _ := b.post("/v1/responses", next); resp.Header.Get(HeaderAffinity) != AffinityUnknown {
		t.Errorf("affinity %q, want unknown: the home's lookup failed", resp.Header.Get(HeaderAffinity))
	}
	if n := failures(home); n != 1 {
		t.Errorf("%v lookup failures counted on %s, want 1", n, home)
	}
	if !snapshot(t, b, home).Warnings.Active(replica.WarnResponseLookup) || !strings.Contains(b.logs.String(), "fails the lookups") {
		t.Errorf("%s failed a lookup and no %s warning says so", home, replica.WarnResponseLookup)
	}
	sims[idx].SetFault(sim.Fault{Kind: sim.FaultHang, Paths: []string{path}})
	if resp, _ := b.do("GET", path, ""); resp.StatusCode != 404 {
		t.Errorf("GET while the home hangs: %d, want 404", resp.StatusCode)
	}
	if n := failures(home); n != 2 {
		t.Errorf("%v lookup failures counted on %s after a hang, want 2", n, home)
	}
	sims[idx].SetFault(sim.Fault{})
	for _, r := range b.cfg.Replicas {
		if r.ID != home && failures(r.ID) != 0 {
			t.Errorf("%s answered 404 and was counted as a failure", r.ID)
		}
	}
	if resp, _ := b.do("GET", path, ""); resp.StatusCode != 200 || resp.Header.Get(HeaderReplica) != home {
		t.Errorf("after the fault: %d from %q", resp.StatusCode, resp.Header.Get(HeaderReplica))
	}
	if n := failures(home); n != 2 {
		t.Errorf("a found lookup counted a failure: %v", n)
	}
	if snapshot(t, b, home).Warnings.Active(replica.WarnResponseLookup) {
		t.Errorf("%s answers lookups again and its warning is still raised", home)
	}
}

// FuzzResponseRoute: any path is a stored-response route or not, never a
// panic; a route's id is never empty and holds no slash, and the route
// rebuilt from it is the path.
func FuzzResponseRoute(f *testing.F) {
	for _, s := range []string{"/v1/responses/resp_1", "/v1/responses/resp_1/cancel", "/v1/responses/", "/v1/responses//cancel",
		"/v1/responses/a/b", "/v1/responses/cancel", "/v1/responses", "/v1/responses/a/cancel/cancel", "/x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, path string) {
		id, cancel, allow, ok := responseRoute(path)
		if !ok {
			return
		}
		rebuilt := pathResponseByID + id
		if cancel {
			rebuilt += cancelSuffix
		}
		if id == "" || strings.Contains(id, "/") || rebuilt != path || allow == "" {
			t.Fatalf("%q: id %q cancel %v allow %q", path, id, cancel, allow)
		}
	})
}

// TestResponsesBackgroundCancel: a background response (answered at
// once, queued) is remembered like any stored one: cancelling it through
// the gateway reaches the engine running it, which stops it, and polling
// it shows it cancelled there.
func TestResponsesBackgroundCancel(t *testing.T) {
	sims, urls := startSims(t, 3, func(o *sim.Options) { o.Engine.Latency.Zero = false })
	g := startWith(t, urls, func(c *config.Config) { c.Models[0].Policy = "round_robin" })
	g.sims = sims
	resp, body := g.post("/v1/responses", `{"model":"sim","background":true,"max_output_tokens":4000,"input":"Write a long story."}`)
	if resp.StatusCode != 200 || !strings.Contains(body, `"status":"queued"`) {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	home, id := resp.Header.Get(HeaderReplica), responses.ID([]byte(body))
	resp, got := g.post("/v1/responses/"+id+"/cancel", "")
	if resp.StatusCode != 200 || resp.Header.Get(HeaderReplica) != home || !strings.Contains(got, `"status":"cancelled"`) {
		t.Fatalf("cancel: %d from %q (running on %s): %s", resp.StatusCode, resp.Header.Get(HeaderReplica), home, got)
	}
	if resp, got := g.do("GET", "/v1/responses/"+id, ""); resp.StatusCode != 200 || !strings.Contains(got, `"status":"cancelled"`) {
		t.Errorf("poll after cancel: %d %s", resp.StatusCode, got)
	}
}

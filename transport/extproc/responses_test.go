package extproc

import (
	"io"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/inferrail/inferrail/config"
	"github.com/inferrail/inferrail/model/prompt"
	"github.com/inferrail/inferrail/model/responses"
	"github.com/inferrail/inferrail/transport/extproc/envoytest"
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

// TestResponsesAffinity: in the endpoint picker as in the gateway, with
// round_robin (which would spread them), every request continuing a
// stored response goes to the replica that stored it, sync and streamed,
// whether the picker relayed that response or asks the replicas for it (a
// response stored before the picker saw it); x-inferrail-affinity says
// so. Once the home replica has left the fleet, the picker answers the
// gateway's 404, counted.
func TestResponsesAffinity(t *testing.T) {
	p := startPicker(t, 3, func(c *config.Config) { c.Models[0].Policy = "round_robin" })
	responsesReq := func(body string) envoytest.Request {
		r := post([]byte(body), 0)
		r.Path = "/v1/responses"
		return r
	}
	send := func(body string) (ep string, hdr map[string]string, out string) {
		t.Helper()
		r := responsesReq(body)
		x, routed := p.route(r)
		if routed.Immediate != nil {
			t.Fatalf("refused: %s", routed.Immediate.Body)
		}
		status, hdr, out := p.forward(x, r, routed, 0)
		if status != 200 {
			t.Fatalf("%d %s", status, out)
		}
		return routed.Endpoints[0], hdr, out
	}
	first := `{"model":"sim","max_output_tokens":4,"input":"Start."}`
	home, _, out := send(first)
	prev := responses.ID([]byte(out))
	for turn := 1; turn <= 4; turn++ {
		stream := strconv.FormatBool(turn%2 == 0)
		ep, hdr, out := send(`{"model":"sim","max_output_tokens":4,"stream":` + stream + `,"previous_response_id":"` + prev + `","input":"Turn ` + strconv.Itoa(turn) + `."}`)
		if ep != home || hdr[frontend.HeaderAffinity] != frontend.AffinityPinned {
			t.Fatalf("turn %d: routed to %s (%q), the response is stored on %s", turn, ep, hdr[frontend.HeaderAffinity], home)
		}
		if prev = responses.ID([]byte(out)); prev == "" {
			t.Fatalf("turn %d: no response id in %q", turn, out)
		}
	}
	// Without the pin, the same requests spread.
	spread := map[string]bool{}
	for range 3 {
		ep, _, _ := send(first)
		spread[ep] = true
	}
	if len(spread) < 2 {
		t.Fatalf("round_robin kept every request on %v: the test shows nothing", spread)
	}
	// A response the picker never saw: stored on the last simulator directly.
	resp, err := client().Post(p.sims[2].URL()+"/v1/responses", "application/json",
		strings.NewReader(strings.Replace(first, `"sim"`, strconv.Quote(model), 1)))
	if err != nil {
		t.Fatal(err)
	}
	direct, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	id := responses.ID(direct)
	if resp.StatusCode != 200 || id == "" {
		t.Fatalf("stored directly: %d %s", resp.StatusCode, direct)
	}
	for range 3 {
		ep, hdr, _ := send(`{"model":"sim","max_output_tokens":4,"previous_response_id":"` + id + `","input":"More."}`)
		if ep != p.eps[2] || hdr[frontend.HeaderAffinity] != frontend.AffinityPinned {
			t.Fatalf("an id the picker did not relay: routed to %s (%q), stored on %s", ep, hdr[frontend.HeaderAffinity], p.eps[2])
		}
	}
	// The home replica leaves the fleet.
	next := *p.cfg
	next.Replicas = slices.DeleteFunc(slices.Clone(p.cfg.Replicas), func(r config.Replica) bool { return r.ID == "r2" })
	if err := p.fl.Reconfigure(&next); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "replica removed", 2*time.Second, func() bool { _, ok := p.fl.Snapshot("r2"); return !ok })
	_, routed := p.route(responsesReq(`{"model":"sim","previous_response_id":"` + id + `","input":"x"}`))
	if routed.Immediate == nil || routed.Immediate.Status.Code != 404 || !strings.Contains(string(routed.Immediate.Body), "replica r2") {
		t.Fatalf("home gone: %+v", routed.Immediate)
	}
	waitFor(t, "the refusal counted", time.Second, func() bool {
		var b strings.Builder
		p.met.WritePrometheus(&b)
		return strings.Contains(b.String(), `inferrail_request_errors_total{model="`+model+`",reason="`+frontend.ReasonResponseGone+`"} 1`)
	})
}

package extproc

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/inferrail/inferrail/config"
	"github.com/inferrail/inferrail/model/flow"
	"github.com/inferrail/inferrail/transport/extproc/envoytest"
	"github.com/inferrail/inferrail/transport/telemetry"
)

// checkRouted checks a routed request's answer as Envoy would use it.
func checkRouted(t *testing.T, p *picker, routed *envoytest.Routed, body []byte) {
	t.Helper()
	if routed.Immediate != nil {
		t.Fatalf("refused: %d %s", routed.Immediate.Status.GetCode(), routed.Immediate.Body)
	}
	if !routed.ClearRouteCache {
		t.Fatal("the headers answer does not clear the route cache")
	}
	if len(routed.Endpoints) == 0 {
		t.Fatal("no destination")
	}
	for _, ep := range routed.Endpoints {
		p.replica(ep)
	}
	if got := routed.Headers["content-length"]; got != strings.TrimSpace(itoa(len(routed.Body))) {
		t.Fatalf("content-length %q for a body of %d bytes", got, len(routed.Body))
	}
	// The alias is rewritten to the configured model, the rest kept.
	want := strings.Replace(string(body), `"model":"sim"`, `"model":"`+model+`"`, 1)
	if string(routed.Body) != want {
		t.Fatalf("body sent on differs: %d bytes, want %d", len(routed.Body), len(want))
	}
	for i, n := range routed.Chunks {
		if n > BodyChunk {
			t.Fatalf("chunk %d has %d bytes, over %d", i, n, BodyChunk)
		}
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// TestChunkedBody: a body Envoy splits into many small chunks is buffered
// to its end, routed, and sent on whole.
func TestChunkedBody(t *testing.T) {
	p := startPicker(t, 2, nil)
	body := chat(strings.Repeat("a chunked prompt ", 40), 4, false)
	r := post(body, 7)
	x, routed := p.route(r)
	checkRouted(t, p, routed, body)
	status, hdr, out := p.forward(x, r, routed, 0)
	if status != 200 || !strings.Contains(out, `"choices"`) {
		t.Fatalf("%d %s", status, out)
	}
	if hdr["x-inferrail-replica"] != p.replica(routed.Endpoints[0]) {
		t.Fatalf("x-inferrail-replica %q, routed to %s", hdr["x-inferrail-replica"], routed.Endpoints[0])
	}
}

// Test220KB: a 220 KB prompt (GIE #2928's) comes back in chunks of at most
// 62,000 bytes, the last one ending the stream.
func Test220KB(t *testing.T) {
	p := startPicker(t, 2, nil)
	body := chat(strings.Repeat("x", 220<<10), 1, false)
	r := post(body, 16<<10)
	x, routed := p.route(r)
	checkRouted(t, p, routed, body)
	if want := (len(routed.Body) + BodyChunk - 1) / BodyChunk; len(routed.Chunks) != want {
		t.Fatalf("%d chunks, want %d", len(routed.Chunks), want)
	}
	if status, _, out := p.forward(x, r, routed, 0); status != 200 {
		t.Fatalf("%d %s", status, out)
	}
}

// TestHeaderOnly: a GET without a body goes to a ready replica at once.
func TestHeaderOnly(t *testing.T) {
	p := startPicker(t, 3, nil)
	r := envoytest.Request{Method: "GET", Path: "/v1/models"}
	x, routed := p.route(r)
	if routed.Immediate != nil || len(routed.Endpoints) != 1 {
		t.Fatalf("%+v", routed)
	}
	p.replica(routed.Endpoints[0])
	if _, ok := routed.Headers["content-length"]; ok {
		t.Fatal("content-length set for a request without a body")
	}
	if status, _, out := p.forward(x, r, routed, 0); status != 200 || !strings.Contains(out, `"data"`) {
		t.Fatalf("%d %s", status, out)
	}
}

// refused checks an immediate answer: its status, dropped reason and an
// OpenAI error body.
func refused(t *testing.T, routed *envoytest.Routed, status int, dropped string) {
	t.Helper()
	ir := routed.Immediate
	if ir == nil {
		t.Fatalf("routed to %v, want %d", routed.Endpoints, status)
	}
	if int(ir.Status.GetCode()) != status {
		t.Fatalf("status %d, want %d: %s", ir.Status.GetCode(), status, ir.Body)
	}
	var got string
	for _, h := range ir.Headers.GetSetHeaders() {
		if h.Header.Key == flow.HeaderDropped {
			got = string(h.Header.RawValue)
		}
	}
	if got != dropped {
		t.Fatalf("%s %q, want %q", flow.HeaderDropped, got, dropped)
	}
	var e struct {
		Error struct {
			Message string `json:"message"`
			Code    int    `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(ir.Body, &e); err != nil || e.Error.Message == "" {
		t.Fatalf("body %s is not an OpenAI error: %v", ir.Body, err)
	}
}

// TestSubset: only the hint's endpoints are eligible, in either of its
// forms; a hint that matches none is a 503.
func TestSubset(t *testing.T) {
	p := startPicker(t, 3, nil)
	body := chat("subset", 1, false)
	r := post(body, 0)
	r.Subset = []string{"10.255.255.1:1", "10.255.255.2:2"}
	_, routed := p.route(r)
	refused(t, routed, 503, flow.DroppedNoEndpoints)

	r.Subset = " " + p.eps[2] + " , 10.255.255.1:1"
	_, routed = p.route(r)
	if len(routed.Endpoints) != 1 || routed.Endpoints[0] != p.eps[2] {
		t.Fatalf("routed to %v, want only %s", routed.Endpoints, p.eps[2])
	}
	r.Subset = []string{p.eps[0], p.eps[1]}
	_, routed = p.route(r)
	if len(routed.Endpoints) != 2 || routed.Endpoints[0] == p.eps[2] || routed.Endpoints[1] == p.eps[2] {
		t.Fatalf("routed to %v, outside the subset", routed.Endpoints)
	}
}

// TestInvalidJSON: a body that is not JSON is a 400.
func TestInvalidJSON(t *testing.T) {
	p := startPicker(t, 1, nil)
	_, routed := p.route(post([]byte(`{"model": "sim", "messages": [`), 5))
	refused(t, routed, 400, "")
}

// TestBadPrompt: a completion prompt of a shape vLLM refuses is the
// picker's own 400, at a prefixed path too; a good one is routed.
func TestBadPrompt(t *testing.T) {
	p := startPicker(t, 1, nil)
	for _, path := range []string{"/v1/completions", "/prefix/v1/completions?x=1"} {
		req := post([]byte(`{"model":"sim","prompt":[1,-1]}`), 5)
		req.Path = path
		_, routed := p.route(req)
		refused(t, routed, 400, "")
		if !strings.Contains(string(routed.Immediate.Body), "greater than or equal to 0") {
			t.Fatalf("%s: %s", path, routed.Immediate.Body)
		}
	}
	req := post([]byte(`{"model":"sim","prompt":[1,2]}`), 5)
	req.Path = "/v1/completions"
	if _, routed := p.route(req); routed.Immediate != nil {
		t.Fatalf("a good prompt refused: %s", routed.Immediate.Body)
	}
}

// TestBodyTooLarge: a body over server.max_body_bytes is a 413.
func TestBodyTooLarge(t *testing.T) {
	p := startPicker(t, 1, func(c *config.Config) { c.Server.MaxBodyBytes = 1000 })
	_, routed := p.route(post(chat(strings.Repeat("y", 2000), 1, false), 300))
	refused(t, routed, 413, "")
}

// TestStreamUsage: an event stream is relayed chunk by chunk, and its
// final usage chunk is read and checked against the picker's count, on
// the replica that served; the lease ends with the stream.
func TestStreamUsage(t *testing.T) {
	p := startPicker(t, 2, nil)
	body := chat("stream me some tokens", 8, true)
	r := post(body, 0)
	x, routed := p.route(r)
	checkRouted(t, p, routed, body)
	status, hdr, out := p.forward(x, r, routed, 0)
	if status != 200 || !strings.Contains(out, "data: [DONE]") || !strings.Contains(out, `"usage"`) {
		t.Fatalf("%d %s", status, out)
	}
	if hdr["x-inferrail-prompt-tokens"] == "" {
		t.Fatalf("no x-inferrail-prompt-tokens in %v", hdr)
	}
	id := p.replica(routed.Endpoints[0])
	series := p.met.Replica(id, model, hdr["x-inferrail-policy"])
	if got := series.Prompt.Checked.Get(); got != 1 {
		t.Fatalf("prompt checks %d, want 1", got)
	}
	if got := series.Prompt.Mismatched.Get(); got != 0 {
		t.Fatalf("prompt mismatches %d", got)
	}
	if p.inFlight(id) != 0 {
		t.Fatalf("replica %s holds %d in flight after the stream", id, p.inFlight(id))
	}
}

// TestServedFallback: when Envoy reports that a fallback of the list
// served, that replica holds the lease, the first byte and the outcome,
// and the chosen one holds nothing.
func TestServedFallback(t *testing.T) {
	p := startPicker(t, 2, nil)
	body := chat("fallback", 4, false)
	r := post(body, 0)
	x, routed := p.route(r)
	if len(routed.Endpoints) != 2 {
		t.Fatalf("fallback list %v", routed.Endpoints)
	}
	chosen, fallback := p.replica(routed.Endpoints[0]), p.replica(routed.Endpoints[1])
	if p.inFlight(chosen) != 1 || p.inFlight(fallback) != 0 {
		t.Fatalf("before the response: %d %d", p.inFlight(chosen), p.inFlight(fallback))
	}
	hdr, err := x.ResponseHeaders(200, "application/json", routed.Endpoints[1], false)
	if err != nil {
		t.Fatal(err)
	}
	if hdr["x-inferrail-replica"] != fallback {
		t.Fatalf("x-inferrail-replica %q, served by %s", hdr["x-inferrail-replica"], fallback)
	}
	if p.inFlight(chosen) != 0 || p.inFlight(fallback) != 1 || p.pending(fallback) != 0 {
		t.Fatalf("after the head: chosen %d, fallback %d (pending %d)", p.inFlight(chosen), p.inFlight(fallback), p.pending(fallback))
	}
	usage := `{"id":"x","choices":[],"usage":{"prompt_tokens":` + hdr["x-inferrail-prompt-tokens"] + `,"completion_tokens":1,"total_tokens":2}}`
	if _, err := x.ResponseChunk([]byte(usage), true); err != nil {
		t.Fatal(err)
	}
	if p.inFlight(fallback) != 0 {
		t.Fatal("the fallback kept its lease")
	}
	series := p.met.Replica(fallback, model, hdr["x-inferrail-policy"])
	if got := series.Prompt.Checked.Get(); got != 1 {
		t.Fatalf("the serving replica checked %d prompts, want 1", got)
	}
	if got := p.met.Replica(chosen, model, hdr["x-inferrail-policy"]).Prompt.Checked.Get(); got != 0 {
		t.Fatalf("the chosen replica checked %d prompts", got)
	}
}

// TestShed: a request every replica is too full for is shed with 429 and
// llm-d's dropped reason.
func TestShed(t *testing.T) {
	p := startPicker(t, 1, func(c *config.Config) { c.Replicas[0].MaxConcurrency = 1 })
	_, held := p.route(post(chat("first", 1, false), 0))
	if held.Immediate != nil {
		t.Fatal("the first request was refused")
	}
	_, routed := p.route(post(chat("second", 1, false), 0))
	refused(t, routed, 429, flow.DroppedSaturated)
}

// TestFallbackOrder: the fallback list follows the scores; under
// least_request the replica with the fewest requests in flight comes
// first and the busiest last.
func TestFallbackOrder(t *testing.T) {
	p := startPicker(t, 3, func(c *config.Config) { c.Routing.DefaultPolicy = "least_request" })
	// Hold r0 at two requests and r2 at one, through the subset hint.
	for _, i := range []int{0, 0, 2} {
		r := post(chat("hold", 1, false), 0)
		r.Subset = []string{p.eps[i]}
		if _, routed := p.route(r); len(routed.Endpoints) != 1 || routed.Endpoints[0] != p.eps[i] {
			t.Fatalf("hold on %s routed to %v", p.eps[i], routed.Endpoints)
		}
	}
	_, routed := p.route(post(chat("ranked", 1, false), 0))
	want := []string{p.eps[1], p.eps[2], p.eps[0]}
	if strings.Join(routed.Endpoints, ",") != strings.Join(want, ",") {
		t.Fatalf("fallback list %v, want %v", routed.Endpoints, want)
	}
}

// TestAnswerOrder: the request headers' answer comes first, after the
// body's last chunk; every body answer is a StreamedResponse (GIE PRs
// #3033 and #3028). Read here off the raw stream.
func TestAnswerOrder(t *testing.T) {
	p := startPicker(t, 1, nil)
	st, err := extprocv3.NewExternalProcessorClient(p.conn).Process(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer st.CloseSend()
	body := chat(strings.Repeat("z", 130_000), 1, false)
	send := func(m *extprocv3.ProcessingRequest) {
		if err := st.Send(m); err != nil {
			t.Fatal(err)
		}
	}
	send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: &extprocv3.HttpHeaders{}}})
	for off := 0; off < len(body); off += 10_000 {
		end := min(off+10_000, len(body))
		send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestBody{
			RequestBody: &extprocv3.HttpBody{Body: body[off:end], EndOfStream: end == len(body)}}})
	}
	first, err := st.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := first.Response.(*extprocv3.ProcessingResponse_RequestHeaders); !ok {
		t.Fatalf("first answer %T, want the request headers'", first.Response)
	}
	var n int
	for {
		m, err := st.Recv()
		if err != nil {
			t.Fatal(err)
		}
		rb, ok := m.Response.(*extprocv3.ProcessingResponse_RequestBody)
		if !ok {
			t.Fatalf("answer %T after the headers'", m.Response)
		}
		sr := rb.RequestBody.GetResponse().GetBodyMutation().GetStreamedResponse()
		if sr == nil {
			t.Fatal("a body answer without a StreamedResponse")
		}
		n += len(sr.Body)
		if sr.EndOfStream {
			break
		}
	}
	if n < len(body) {
		t.Fatalf("%d body bytes back, sent %d", n, len(body))
	}
}

// TestCancelMidStream: a client that leaves mid-stream (Envoy ends the
// ext_proc stream) gives the lease back exactly once, and counts one
// disconnect.
func TestCancelMidStream(t *testing.T) {
	p := startPicker(t, 1, nil)
	hdr := cancelMidStream(t, p)
	waitFor(t, "the lease released", 5*time.Second, func() bool { return p.inFlight("r0") == 0 })
	waitFor(t, "the disconnect counted", 5*time.Second, func() bool { return p.met.Model(model).Disconnects.Get() == 1 })
	if p.inFlight("r0") != 0 || p.pending("r0") != 0 || p.met.Model(model).Disconnects.Get() != 1 {
		t.Fatalf("in flight %d, pending %d, disconnects %d", p.inFlight("r0"), p.pending("r0"), p.met.Model(model).Disconnects.Get())
	}
	// The picker cannot tell an engine that died from a client that left
	// (issue 32, case 2): either way the stream broke off after its first
	// byte, which is counted and logged with the request id, replica and
	// bytes relayed.
	if n := p.met.Model(model).Cuts(telemetry.CutUnfinished); n != 1 {
		t.Fatalf("%d cut streams counted, want 1", n)
	}
	var line string
	for _, l := range strings.Split(p.logs.String(), "\n") {
		if strings.Contains(l, "ended before its last byte") {
			line = l
		}
	}
	for _, w := range []string{"id=" + hdr["x-request-id"], "replica=r0", "bytes=47", "stream=true"} {
		if hdr["x-request-id"] == "" || !strings.Contains(line, w) {
			t.Errorf("the cut's log line lacks %s: %q", w, line)
		}
	}
}

// cancelMidStream routes a stream on r0 and closes it after its headers
// and one event, as Envoy does when the client leaves, and returns the
// headers the picker added to the response.
func cancelMidStream(t *testing.T, p *picker) map[string]string {
	t.Helper()
	x, routed := p.route(post(chat("cancel me", 64, true), 0))
	if routed.Immediate != nil {
		t.Fatal("refused")
	}
	hdr, err := x.ResponseHeaders(200, "text/event-stream", routed.Endpoints[0], false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := x.ResponseChunk([]byte("data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n"), false); err != nil {
		t.Fatal(err)
	}
	if p.inFlight("r0") != 1 {
		t.Fatalf("in flight %d mid-stream", p.inFlight("r0"))
	}
	x.Close()
	return hdr
}

// TestShedQueued: with flow control, a request that waited its
// flow_control.max_wait for a full replica is shed with 429,
// rejected-ttl-expired; one that finds a slot freed while it waits is
// routed.
func TestShedQueued(t *testing.T) {
	p := startPicker(t, 1, func(c *config.Config) {
		c.Replicas[0].MaxConcurrency = 1
		c.FlowControl.Enabled, c.FlowControl.MaxWait = true, 100*time.Millisecond
	})
	// The utilization-detector counts a replica without a load report as
	// saturated (stale metrics fail closed): wait for the first scrape.
	waitFor(t, "a load report", 5*time.Second, func() bool {
		s, ok := p.fl.Snapshot("r0")
		return ok && !s.LoadAt.IsZero()
	})
	hold, held := p.route(post(chat("first", 1, false), 0))
	if held.Immediate != nil {
		t.Fatal("the first request was refused")
	}
	_, routed := p.route(post(chat("second", 1, false), 0))
	refused(t, routed, 429, flow.DroppedTTLExpired)

	queued := make(chan *envoytest.Routed, 1)
	x := p.exchange()
	go func() {
		r, err := x.Request(post(chat("third", 1, false), 0))
		if err != nil {
			t.Error(err)
		}
		queued <- r
	}()
	waitFor(t, "the third request queued", 5*time.Second, func() bool { return p.met.Flow(model).Queued.Get() == 1 })
	hold.Close() // the first one's client leaves: its slot frees
	if r := <-queued; r == nil || r.Immediate != nil || len(r.Endpoints) == 0 {
		t.Fatalf("the queued request: %+v", r)
	}
}

// TestServedFallbackIndex: when Envoy retries onto the fallback and it
// serves, the fallback's shadow index records the prompt, not the replica
// the picker chose: the same prompt then ranks the fallback first, with
// its blocks predicted cached there.
func TestServedFallbackIndex(t *testing.T) {
	p := startPicker(t, 2, func(c *config.Config) { c.Routing.DefaultPolicy = "cost_model" })
	body := chat(strings.Repeat("a long shared system prompt ", 60), 2, false)
	x, routed := p.route(post(body, 0))
	if len(routed.Endpoints) != 2 {
		t.Fatalf("fallback list %v", routed.Endpoints)
	}
	fallback := p.replica(routed.Endpoints[1])
	hdr, err := x.ResponseHeaders(200, "application/json", routed.Endpoints[1], false)
	if err != nil {
		t.Fatal(err)
	}
	usage := `{"id":"x","choices":[],"usage":{"prompt_tokens":` + hdr["x-inferrail-prompt-tokens"] + `,"completion_tokens":1,"total_tokens":2}}`
	if _, err := x.ResponseChunk([]byte(usage), true); err != nil {
		t.Fatal(err)
	}
	x.CloseSend()
	x2, again := p.route(post(body, 0))
	if again.Immediate != nil || len(again.Endpoints) == 0 {
		t.Fatalf("second request: %+v", again)
	}
	if got := p.replica(again.Endpoints[0]); got != fallback {
		t.Fatalf("the same prompt ranks %s first; the fallback %s served it", got, fallback)
	}
	hdr2, err := x2.ResponseHeaders(200, "application/json", again.Endpoints[0], false)
	if err != nil {
		t.Fatal(err)
	}
	if c, _ := strconv.Atoi(hdr2["x-inferrail-cached-tokens"]); c == 0 {
		t.Fatalf("no cached tokens predicted on the fallback that served the prompt: %v", hdr2)
	}
	x2.ResponseChunk([]byte(usage), true)
}

// TestPredictionAccounted: the picker compares the engine's cached tokens
// with its prediction as the gateway does (frontend.Account): a usage with
// prompt_tokens_details counts exact, over or under on the replica that
// served, one without counts unknown, and delivered tokens are summed.
func TestPredictionAccounted(t *testing.T) {
	p := startPicker(t, 1, func(c *config.Config) { c.Routing.DefaultPolicy = "cost_model" })
	waitFor(t, "engine load read", 2*time.Second, func() bool { s, ok := p.fl.Snapshot("r0"); return ok && !s.LoadAt.IsZero() })
	long := strings.Repeat("a prompt of several blocks ", 12)
	respond := func(details string) {
		r := post(chat(long, 1, false), 0)
		x, routed := p.route(r)
		hdr, err := x.ResponseHeaders(200, "application/json", routed.Endpoints[0], false)
		if err != nil {
			t.Fatal(err)
		}
		if hdr["x-inferrail-cached-tokens"] == "" {
			t.Fatalf("no prediction: %v", hdr)
		}
		usage := `{"id":"x","choices":[],"usage":{"prompt_tokens":` + hdr["x-inferrail-prompt-tokens"] + `,"completion_tokens":1,"total_tokens":2` +
			strings.ReplaceAll(details, "PREDICTED", hdr["x-inferrail-cached-tokens"]) + `}}`
		if _, err := x.ResponseChunk([]byte(usage), true); err != nil {
			t.Fatal(err)
		}
	}
	respond(`,"prompt_tokens_details":{"cached_tokens":PREDICTED}`)
	respond(``)
	respond(`,"prompt_tokens_details":{"cached_tokens":100000}`)
	a := p.met.Accuracy("r0")
	if a.Exact != 1 || a.Unknown != 1 || a.Under != 1 || a.Over != 0 {
		t.Fatalf("accuracy %+v", a)
	}
	if got := p.met.Model(model).DeliveredCached.Get(); got != a.DeliveredCached || got < 100000 {
		t.Fatalf("delivered %d, accuracy %+v", got, a)
	}
}

// TestAbandonedExchangeWithdrawn: an exchange that ends after its request
// phase, with no response phase (Envoy gave up, or a later filter refused
// the request), takes its prompt back from the picked replica's index: the
// same prompt next is not predicted cached on a replica it never reached
// (issue 32, case 3). The withdrawal is counted, and it says nothing of the
// replica's health.
func TestAbandonedExchangeWithdrawn(t *testing.T) {
	p := startPicker(t, 1, func(c *config.Config) { c.Routing.DefaultPolicy = "cost_model" })
	body := chat(strings.Repeat("a prompt that never reaches the engine ", 20), 1, false)
	x, routed := p.route(post(body, 0))
	if routed.Immediate != nil {
		t.Fatal("refused")
	}
	x.Close()
	m := p.met.Model(model)
	waitFor(t, "the withdrawal counted", 5*time.Second, func() bool { return m.Withdrawn.Get() == 1 })
	if p.inFlight("r0") != 0 || p.pending("r0") != 0 || m.Disconnects.Get() != 0 {
		t.Fatalf("in flight %d, pending %d, disconnects %d", p.inFlight("r0"), p.pending("r0"), m.Disconnects.Get())
	}
	x2, again := p.route(post(body, 0))
	hdr, err := x2.ResponseHeaders(200, "application/json", again.Endpoints[0], false)
	if err != nil {
		t.Fatal(err)
	}
	if c := hdr["x-inferrail-cached-tokens"]; c != "0" {
		t.Fatalf("the prompt of an abandoned exchange predicted %s tokens cached, want 0", c)
	}
	if _, err := x2.ResponseChunk([]byte(`{"id":"x","choices":[]}`), true); err != nil {
		t.Fatal(err)
	}
	if s, _ := p.fl.Snapshot("r0"); s.RequestFailures != 0 {
		t.Fatalf("the withdrawal counted as %d failures of the replica", s.RequestFailures)
	}
}

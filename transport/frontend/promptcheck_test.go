package frontend

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/inferrail/inferrail/actors/replica"
	"github.com/inferrail/inferrail/config"
	"github.com/inferrail/inferrail/model/prompt"
)

// simTokenizer prepares prompts as the simulator tokenizes them
// (builtin:sim), then counts skew tokens more: 0 is a tokenizer that
// matches the engine, anything else one that does not.
type simTokenizer struct{ skew int }

func (s simTokenizer) Prepare(model string, chat bool, body []byte, now time.Time) (Prompt, bool) {
	p := prompt.Preparer{Model: model, Sim: true, BlockSize: 16}
	var pr prompt.Prompt
	var err error
	if chat {
		pr, err = p.Chat(body, now)
	} else {
		pr, err = p.Completion(body)
	}
	if err != nil {
		return Prompt{}, false
	}
	return Prompt{Tokens: len(pr.IDs) + s.skew, Blocks: pr.Blocks, BlockSize: 16}, true
}

// counter reads one series' value from the metrics page; 0 when absent.
func counter(g *gw, series string) float64 {
	for l := range strings.Lines(metricsPage(g)) {
		if rest, ok := strings.CutPrefix(l, series+" "); ok {
			v, _ := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			return v
		}
	}
	return 0
}

// sendMixed sends n requests, alternating plain chats, streamed chats with
// a usage chunk, plain completions and streams without usage (which carry
// no count to compare), and returns how many carried a usage.
func sendMixed(t *testing.T, g *gw, n int) (withUsage int) {
	t.Helper()
	for i := range n {
		var resp *http.Response
		var body string
		switch i % 4 {
		case 0:
			resp, body = g.post("/v1/chat/completions", chat(fmt.Sprintf("hello number %d of the check", i), 3, false))
			withUsage++
		case 1:
			resp, body = g.post("/v1/chat/completions", chat(fmt.Sprintf("streamed %d", i), 3, true))
			withUsage++
		case 2:
			resp, body = g.post("/v1/completions", fmt.Sprintf(`{"prompt":"a plain completion %d","max_tokens":2}`, i))
			withUsage++
		case 3:
			resp, body = g.post("/v1/completions", fmt.Sprintf(`{"prompt":"a stream %d","max_tokens":2,"stream":true}`, i))
		}
		if resp.StatusCode != 200 {
			t.Fatalf("request %d: %d %s", i, resp.StatusCode, body)
		}
	}
	return withUsage
}

func snapshot(t testing.TB, g *gw, id string) *replica.Snapshot {
	t.Helper()
	s, ok := g.fl.Snapshot(id)
	if !ok {
		t.Fatalf("no replica %s", id)
	}
	return s
}

// TestPromptTokensAgree: with the engine's own tokenizer every response's
// usage.prompt_tokens (bodies and final usage chunks) is compared and
// agrees; nothing is raised.
func TestPromptTokensAgree(t *testing.T) {
	g := startSimsWith(t, 1, simTokenizer{})
	want := sendMixed(t, g, 16)
	lm := `{model="` + model + `",replica="r0"}`
	waitFor(t, "every comparison counted", 2*time.Second, func() bool {
		return counter(g, "inferrail_prompt_tokens_checked_total"+lm) == float64(want)
	})
	if n := counter(g, "inferrail_prompt_tokens_mismatch_total"+lm); n != 0 {
		t.Fatalf("%v mismatches with the engine's own tokenizer", n)
	}
	if w := snapshot(t, g, "r0").Warnings.List(); len(w) != 0 {
		t.Fatalf("warnings %+v", w)
	}
}

// TestPromptTokensMismatch: a tokenizer that counts differently from the
// engine is counted per (model, replica), and warned about once, with both
// numbers; the engine's capacity sizes the index, so capacity_units is
// raised too. The relayed bytes are the engine's.
func TestPromptTokensMismatch(t *testing.T) {
	g := startSimsWith(t, 1, simTokenizer{skew: 3})
	want := sendMixed(t, g, 16)
	lm := `{model="` + model + `",replica="r0"}`
	waitFor(t, "every comparison counted", 2*time.Second, func() bool {
		return counter(g, "inferrail_prompt_tokens_checked_total"+lm) == float64(want)
	})
	if n := counter(g, "inferrail_prompt_tokens_mismatch_total"+lm); n != float64(want) {
		t.Fatalf("%v mismatches of %d", n, want)
	}
	snap := snapshot(t, g, "r0")
	tok := warning(snap, replica.WarnTokenizerMismatch)
	if tok.Code == "" {
		t.Fatalf("no %s warning: %+v", replica.WarnTokenizerMismatch, snap.Warnings.List())
	}
	// The engine's count and the gateway's, skew apart.
	var engine, gateway int
	if _, err := fmt.Sscanf(tok.Message[strings.Index(tok.Message, "counted"):], "counted %d prompt tokens where the gateway's tokenizer counted %d", &engine, &gateway); err != nil || gateway-engine != 3 {
		t.Fatalf("message %q: %d %d %v", tok.Message, engine, gateway, err)
	}
	if !snap.CapacityFromEngine() || !snap.Warnings.Active(replica.WarnCapacityUnits) {
		t.Fatalf("index capacity from the engine %v, capacity warning %v", snap.CapacityFromEngine(), snap.Warnings.List())
	}
	if n := strings.Count(g.logs.String(), "warning="+string(replica.WarnTokenizerMismatch)); n != 1 {
		t.Fatalf("tokenizer warning logged %d times:\n%s", n, g.logs.String())
	}
	// More mismatches do not log again.
	sendMixed(t, g, 8)
	if n := strings.Count(g.logs.String(), "warning="+string(replica.WarnTokenizerMismatch)); n != 1 {
		t.Fatalf("tokenizer warning logged %d times", n)
	}
	if w := warning(snapshot(t, g, "r0"), replica.WarnTokenizerMismatch); w.Message != tok.Message {
		t.Fatalf("the warning's message changed with the numbers: %q", w.Message)
	}
}

// TestPromptTokensConfiguredCapacity: with kv_capacity_blocks set the index
// is not in the engine's tokens, so only the tokenizer warning is raised.
func TestPromptTokensConfiguredCapacity(t *testing.T) {
	g := startSimsWithConfig(t, 1, simTokenizer{skew: -1}, func(c *gwConfig) { c.Replicas[0].KVCapacityBlocks = 4096 })
	sendMixed(t, g, 12)
	waitFor(t, "tokenizer warning", 2*time.Second, func() bool {
		return snapshot(t, g, "r0").Warnings.Active(replica.WarnTokenizerMismatch)
	})
	if snapshot(t, g, "r0").Warnings.Active(replica.WarnCapacityUnits) {
		t.Fatal("capacity_units raised for a configured capacity")
	}
}

// warning returns snap's active warning code, zero when none.
func warning(snap *replica.Snapshot, code replica.WarningCode) replica.Warning {
	for _, w := range snap.Warnings.List() {
		if w.Code == code {
			return w
		}
	}
	return replica.Warning{}
}

func TestTokenizerDisagrees(t *testing.T) {
	f := func(checked, mismatched uint64, want bool) {
		t.Helper()
		if got := tokenizerDisagrees(checked, mismatched); got != want {
			t.Errorf("%d of %d: %v", mismatched, checked, got)
		}
	}
	f(7, 7, false) // too few to tell
	f(8, 1, true)
	f(10, 1, false) // one in ten: an odd prompt
	f(11, 2, true)
	f(1000, 100, false)
	f(1000, 101, true)
	f(0, 0, false)
}

// startSimsWith runs n zero-latency simulators and a gateway with tok in
// front of them.
func startSimsWith(t *testing.T, n int, tok Tokenizer) *gw {
	return startSimsWithConfig(t, n, tok, nil)
}

func startSimsWithConfig(t *testing.T, n int, tok Tokenizer, cfgEdit func(*config.Config)) *gw {
	t.Helper()
	sims, urls := startSims(t, n, nil)
	g := startOpts(t, urls, cfgEdit, func(o *Options) { o.Tokenizer = tok })
	g.sims = sims
	// The engine's capacity is read from its metrics page.
	waitFor(t, "engine capacity read", 2*time.Second, func() bool { return !snapshot(t, g, "r0").LoadAt.IsZero() })
	return g
}

// TestDoneThenCloseIsSuccess: a client that reads a stream through
// data: [DONE] and closes at once got the whole answer. The engine here
// holds its closing chunk back until the gateway drops the connection to
// it, which the gateway does only when it sees the client gone: so every
// run orders the events the way the race did about once in 300, and the
// request must still count as a success, not a cancellation.
func TestDoneThenCloseIsSuccess(t *testing.T) {
	const stream = "data: {\"id\":\"cmpl-1\",\"choices\":[{\"index\":0,\"text\":\"hi\"}]}\n\n" +
		"data: {\"id\":\"cmpl-1\",\"choices\":[],\"usage\":{\"prompt_tokens\":2,\"total_tokens\":3,\"completion_tokens\":1}}\n\n" +
		"data: [DONE]\n\n"
	dropped := make(chan struct{}, 8)
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
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, stream)
		w.(http.Flusher).Flush()
		// The closing chunk waits until the gateway lets go.
		select {
		case <-r.Context().Done():
			dropped <- struct{}{}
		case <-time.After(5 * time.Second):
		}
	}))
	t.Cleanup(eng.Close)
	g := startWith(t, []string{eng.URL}, nil)
	const runs = 3
	for i := range runs {
		conn, err := net.Dial("tcp", g.addr)
		if err != nil {
			t.Fatal(err)
		}
		body := `{"prompt":"hi","max_tokens":1,"stream":true}`
		fmt.Fprintf(conn, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		br := bufio.NewReader(conn)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				t.Fatalf("run %d: %v", i, err)
			}
			if line == "data: [DONE]\n" {
				br.ReadString('\n')
				break
			}
		}
		conn.Close()
		select {
		case <-dropped:
		case <-time.After(5 * time.Second):
			t.Fatalf("run %d: the gateway kept the engine's connection after the client left", i)
		}
	}
	l := `{model="` + model + `",replica="r0",status=`
	waitFor(t, "every request counted", 2*time.Second, func() bool {
		return counter(g, `inferrail_requests_total`+l+`"2xx"}`)+counter(g, `inferrail_requests_total`+l+`"cancelled"}`) == runs
	})
	if n := counter(g, `inferrail_requests_total`+l+`"cancelled"}`); n != 0 {
		t.Errorf("%v of %d complete streams counted as cancelled", n, runs)
	}
	if n := counter(g, `inferrail_client_disconnects_total{model="`+model+`"}`); n != 0 {
		t.Errorf("%v client disconnects counted for complete streams", n)
	}
}

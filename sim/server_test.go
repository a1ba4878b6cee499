package sim

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/inferrail/inferrail/sim/engine"
)

// TestMain fails the package when a test leaves a goroutine behind. fasthttp
// keeps a few of its own past Shutdown: the server date ticker, the client's
// DNS cache and connection cleaners, and worker
// pool cleaners that exit on their next 10 s tick. zmq4 leaks one goroutine
// per PUB socket (see transport/kvevents).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.updateServerDate.func1"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*workerPool).Start.func2"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*TCPDialer).tcpAddrsClean"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*HostClient).connsCleaner"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*Client).mCleaner"),
		// zmq4 v0.17.0 leaves each PUB socket's writer behind after Close.
		goleak.IgnoreAnyFunction("github.com/go-zeromq/zmq4.(*pubMWriter).run"),
	)
}

// start runs a simulator on a free port for the test's lifetime.
func start(t testing.TB, edit func(*Options)) *Server {
	t.Helper()
	o := DefaultOptions()
	o.Port = 0
	if edit != nil {
		edit(&o)
	}
	s, err := Start(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// fast makes every step free, so tests do not wait on the latency model.
func fast(o *Options) { o.Engine.Latency.Zero = true }

func client() *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
}

func post(t testing.TB, s *Server, path, body string, hdr ...string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest("POST", s.URL()+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, string(b)
}

func get(t testing.TB, s *Server, path string) (int, string) {
	t.Helper()
	resp, err := client().Get(s.URL() + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// apiError is vLLM's error body.
type apiError struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    int     `json:"code"`
	} `json:"error"`
}

func decodeError(t testing.TB, status int, body string) apiError {
	t.Helper()
	var e apiError
	if err := json.Unmarshal([]byte(body), &e); err != nil {
		t.Fatalf("status %d: body is not an error object: %v: %q", status, err, body)
	}
	if e.Error.Code != status || e.Error.Message == "" || e.Error.Type == "" {
		t.Fatalf("status %d: malformed error %q", status, body)
	}
	return e
}

const chatBody = `{"model":"inferrail/sim-8b","messages":[{"role":"user","content":"hello"}],"max_tokens":4}`

func TestEndpoints(t *testing.T) {
	s := start(t, fast)
	if code, body := get(t, s, "/health"); code != 200 || body != "" {
		t.Fatalf("/health: %d %q", code, body)
	}
	if code, body := get(t, s, "/version"); code != 200 || body != `{"version":"0.26.0"}` {
		t.Fatalf("/version: %d %q", code, body)
	}
	code, body := get(t, s, "/v1/models")
	var models struct {
		Object string `json:"object"`
		Data   []struct {
			ID          string `json:"id"`
			Root        string `json:"root"`
			MaxModelLen int    `json:"max_model_len"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(body), &models); err != nil || code != 200 {
		t.Fatalf("/v1/models: %d %v %q", code, err, body)
	}
	if len(models.Data) != 1 || models.Data[0].ID != "inferrail/sim-8b" || models.Data[0].MaxModelLen != 32768 {
		t.Fatalf("/v1/models: %+v", models)
	}
	code, body = get(t, s, "/nope")
	if e := decodeError(t, code, body); code != 404 || e.Error.Type != "Not Found" {
		t.Fatalf("unknown path: %d %q", code, body)
	}
	code, body = get(t, s, "/v1/chat/completions")
	if e := decodeError(t, code, body); code != 405 || e.Error.Type != "Method Not Allowed" {
		t.Fatalf("wrong method: %d %q", code, body)
	}
	code, body = get(t, s, "/metrics")
	if code != 200 || !strings.Contains(body, "# TYPE vllm:num_requests_running gauge") {
		t.Fatalf("/metrics: %d", code)
	}
}

func TestValidation(t *testing.T) {
	s := start(t, func(o *Options) { fast(o); o.Engine.MaxModelLen = 64; o.Engine.NumBlocks = 16 })
	f := func(path, body string, status int, param string) {
		t.Helper()
		code, _, resp := post(t, s, path, body)
		if code != status {
			t.Fatalf("%s %s: status %d, want %d: %s", path, body, code, status, resp)
		}
		e := decodeError(t, code, resp)
		got := ""
		if e.Error.Param != nil {
			got = *e.Error.Param
		}
		if param != "*" && got != param {
			t.Fatalf("%s %s: param %q, want %q: %s", path, body, got, param, resp)
		}
	}
	const chat, cmpl = "/v1/chat/completions", "/v1/completions"
	f(chat, `{`, 400, "*")
	f(chat, `{"model":"other","messages":[{"role":"user","content":"x"}]}`, 404, "model")
	f(chat, `{"messages":[{"role":"user","content":"x"}],"stream_options":{"include_usage":true}}`, 400, "*")
	f(chat, `{"messages":[{"role":"user","content":"x"}],"n":2}`, 400, "n")
	f(chat, `{"messages":[{"role":"user","content":"x"}],"logprobs":true}`, 400, "logprobs")
	f(cmpl, `{"prompt":"x","echo":true}`, 400, "echo")
	f(cmpl, `{"prompt":"x","best_of":3}`, 400, "best_of")
	f(cmpl, `{"prompt":"x","max_tokens":"many"}`, 400, "*")
	// Context length: 64 tokens at most, prompt and output together.
	long := strings.Repeat("word ", 40) // 80 tokens
	f(cmpl, `{"prompt":"`+long+`"}`, 400, "input_tokens")
	f(cmpl, `{"prompt":"abc def","max_tokens":100}`, 400, "input_tokens")
	code, _, resp := post(t, s, cmpl, `{"prompt":"abc def","max_tokens":60}`)
	if code != 200 {
		t.Fatalf("a request that fits: %d %s", code, resp)
	}
}

func TestRequestID(t *testing.T) {
	s := start(t, fast)
	_, _, body := post(t, s, "/v1/chat/completions", chatBody, "X-Request-Id", "abc-123")
	if !strings.Contains(body, `"id":"chatcmpl-abc-123"`) {
		t.Fatalf("x-request-id not used as the response id: %s", body)
	}
	_, _, body = post(t, s, "/v1/completions", `{"prompt":"hi","max_tokens":2}`, "X-Request-Id", "r9")
	if !strings.Contains(body, `"id":"cmpl-r9"`) {
		t.Fatalf("x-request-id not used as the response id: %s", body)
	}
}

// sse reads a stream's events up to and including [DONE].
func sse(t testing.TB, r io.Reader) []string {
	t.Helper()
	var events []string
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if data, ok := strings.CutPrefix(line, "data: "); ok {
			events = append(events, data)
			if data == "[DONE]" {
				break
			}
		} else if line != "" {
			t.Fatalf("unexpected SSE line %q", line)
		}
	}
	return events
}

func TestStreamShape(t *testing.T) {
	s := start(t, func(o *Options) { fast(o); o.EnablePromptTokensDetails = true })
	body := `{"messages":[{"role":"user","content":"hello"}],"max_tokens":5,"stream":true,"stream_options":{"include_usage":true}}`
	resp, err := client().Post(s.URL()+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("content type %q", ct)
	}
	ev := sse(t, resp.Body)
	// role, 4 content chunks, finish with the 5th token, usage, [DONE].
	if len(ev) != 8 {
		t.Fatalf("%d events: %q", len(ev), ev)
	}
	if !strings.Contains(ev[0], `"delta":{"role":"assistant","content":""}`) {
		t.Fatalf("first chunk is not the role chunk: %s", ev[0])
	}
	if !strings.Contains(ev[5], `"finish_reason":"length"`) || strings.Contains(ev[5], `"content":""`) {
		t.Fatalf("finish chunk should carry the last token: %s", ev[5])
	}
	if !strings.Contains(ev[6], `"choices":[],"usage":{"prompt_tokens":`) ||
		!strings.Contains(ev[6], `"completion_tokens":5,"prompt_tokens_details":{"cached_tokens":0}}`) {
		t.Fatalf("usage chunk: %s", ev[6])
	}
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t testing.TB, what string, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func stats(t testing.TB, s *Server) engine.Stats {
	t.Helper()
	var st engine.Stats
	if !s.Inspect(func(e *engine.Engine) { st = e.Stats() }) {
		t.Fatal("simulator not running")
	}
	return st
}

func TestDisconnectWhileWaitingAborts(t *testing.T) {
	// One sequence at a time, slow decoding: the first request holds the
	// engine, the second waits in the queue.
	s := start(t, func(o *Options) { o.Engine.MaxNumSeqs = 1; o.Engine.MaxBatchedTokens = 2048 })
	go func() {
		c := &http.Client{Timeout: 3 * time.Second}
		resp, err := c.Post(s.URL()+"/v1/completions", "application/json",
			strings.NewReader(`{"prompt":"hold","max_tokens":100}`))
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
	waitFor(t, "first request running", 2*time.Second, func() bool { return stats(t, s).Running == 1 })
	conn, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	body := `{"prompt":"wait","max_tokens":5}`
	fmt.Fprintf(conn, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	waitFor(t, "second request waiting", 2*time.Second, func() bool { return stats(t, s).Waiting == 1 })
	conn.Close()
	t0 := time.Now()
	waitFor(t, "waiting request withdrawn", 500*time.Millisecond, func() bool {
		st := stats(t, s)
		return st.Waiting == 0 && st.FinishedByReason["abort"] == 1
	})
	t.Logf("withdrawn %v after the client left", time.Since(t0))
}

func TestDisconnectWhileStreamingAborts(t *testing.T) {
	s := start(t, func(o *Options) { o.Engine.Latency.DecodeToken = 5 * time.Millisecond })
	conn, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	body := `{"prompt":"stream me","max_tokens":2000,"stream":true}`
	fmt.Fprintf(conn, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	br := bufio.NewReader(conn)
	for n := 0; n < 3; {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(line, "data: ") {
			n++
		}
	}
	conn.Close()
	waitFor(t, "stream aborted", time.Second, func() bool {
		st := stats(t, s)
		return st.Running == 0 && st.FinishedByReason["abort"] == 1 && st.UsedBlocks == 0
	})
}

func TestFaults(t *testing.T) {
	s := start(t, fast)
	c := client()
	do := func() (*http.Response, error) {
		return c.Post(s.URL()+"/v1/chat/completions", "application/json", strings.NewReader(chatBody))
	}

	s.SetFault(Fault{Kind: FaultFail, Status: 503})
	resp, err := do()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	decodeError(t, resp.StatusCode, string(b))
	if resp.StatusCode != 503 {
		t.Fatalf("fail fault: status %d", resp.StatusCode)
	}

	s.SetFault(Fault{Kind: FaultClose})
	if resp, err := do(); err == nil {
		resp.Body.Close()
		t.Fatalf("close fault: got status %d, want a connection error", resp.StatusCode)
	}

	s.SetFault(Fault{Kind: FaultDelay, Delay: 150 * time.Millisecond})
	t0 := time.Now()
	if resp, err := do(); err != nil || resp.StatusCode != 200 {
		t.Fatalf("delay fault: %v", err)
	} else {
		resp.Body.Close()
	}
	if d := time.Since(t0); d < 150*time.Millisecond {
		t.Fatalf("delay fault answered after %v", d)
	}

	// A hung request is answered once the fault is lifted. Only the
	// completion path hangs; /health still answers.
	s.SetFault(Fault{Kind: FaultHang, Paths: []string{"/v1/chat/completions"}})
	got := make(chan int, 1)
	go func() {
		resp, err := do()
		if err != nil {
			got <- -1
			return
		}
		resp.Body.Close()
		got <- resp.StatusCode
	}()
	if code, _ := get(t, s, "/health"); code != 200 {
		t.Fatalf("health during a path-limited hang: %d", code)
	}
	select {
	case code := <-got:
		t.Fatalf("hung request answered %d", code)
	case <-time.After(100 * time.Millisecond):
	}
	s.SetFault(Fault{})
	select {
	case code := <-got:
		if code != 200 {
			t.Fatalf("released request: %d", code)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("hung request not released")
	}
}

func TestKillRestart(t *testing.T) {
	s := start(t, fast)
	post(t, s, "/v1/chat/completions", chatBody)
	if stats(t, s).PrefixQueries == 0 {
		t.Fatal("no prefix queries counted")
	}
	s.Kill()
	_, err := client().Post(s.URL()+"/v1/chat/completions", "application/json", strings.NewReader(chatBody))
	var op *net.OpError
	if !errors.As(err, &op) {
		t.Fatalf("killed simulator: got %v, want a refused connection", err)
	}
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	// A restarted engine starts from zero, as a restarted vLLM does.
	if st := stats(t, s); st.PrefixQueries != 0 {
		t.Fatalf("restarted engine kept its counters: %+v", st)
	}
	if code, _, body := post(t, s, "/v1/chat/completions", chatBody); code != 200 {
		t.Fatalf("after restart: %d %s", code, body)
	}
}

func TestIdleTTFTIsPrefill(t *testing.T) {
	s := start(t, nil)
	prompt := strings.Repeat("abc ", 1500) // 1,500 tokens: one chunk at 2,048
	code, _, body := post(t, s, "/v1/completions", `{"prompt":"`+prompt+`","max_tokens":1}`)
	if code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	_, page := get(t, s, "/metrics")
	want := s.Options().Engine.Latency.Prefill(1500, 0).Seconds()
	var sum float64
	for _, line := range strings.Split(page, "\n") {
		if strings.HasPrefix(line, "vllm:time_to_first_token_seconds_sum{") {
			fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &sum)
		}
	}
	if d := sum - want; d < -1e-6 || d > 1e-6 {
		t.Fatalf("idle TTFT %.9f s, want P(1500,0) = %.9f s", sum, want)
	}
}

// TestLastTokenRidesTheFinishChunk: however the stream's reads interleave
// with the engine's steps, the last token is never sent as a content chunk
// of its own followed by an empty finish chunk; many concurrent streams of
// zero-latency steps give the interleavings every chance.
func TestLastTokenRidesTheFinishChunk(t *testing.T) {
	s := start(t, fast)
	body := `{"messages":[{"role":"user","content":"hello"}],"max_tokens":5,"stream":true}`
	const streams = 200
	var wg sync.WaitGroup
	bad := make(chan string, streams)
	for range streams {
		wg.Go(func() {
			resp, err := client().Post(s.URL()+"/v1/chat/completions", "application/json", strings.NewReader(body))
			if err != nil {
				bad <- err.Error()
				return
			}
			defer resp.Body.Close()
			ev := sse(t, resp.Body)
			// role, 4 content chunks, finish with the 5th token, [DONE].
			if len(ev) != 7 || strings.Contains(ev[5], `"content":""`) {
				bad <- fmt.Sprintf("%d events: %q", len(ev), ev)
			}
		})
	}
	wg.Wait()
	close(bad)
	for b := range bad {
		t.Fatal(b)
	}
}

package frontend

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/inferrail/inferrail/config"
	"github.com/inferrail/inferrail/sim"
)

// fakeEngine is a minimal engine that records every request body it gets and
// answers with a body the test chooses, written in pieces of random sizes
// with random pauses, chunked or with a Content-Length.
type fakeEngine struct {
	ln  net.Listener
	srv *fasthttp.Server
	mu  sync.Mutex
	got [][]byte
	// traceparents holds each proxied request's traceparent header.
	traceparents []string
	resp         func(body []byte) (payload []byte, chunked bool, seed uint64)
	done         chan struct{}
}

func newFakeEngine(t testing.TB, resp func([]byte) ([]byte, bool, uint64)) *fakeEngine {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := &fakeEngine{ln: ln, resp: resp, done: make(chan struct{})}
	e.srv = &fasthttp.Server{Handler: e.handle, Logger: discardLogger{}}
	go func() {
		defer close(e.done)
		e.srv.Serve(ln)
	}()
	t.Cleanup(func() {
		e.srv.Shutdown()
		<-e.done
	})
	return e
}

func (e *fakeEngine) url() string { return "http://" + e.ln.Addr().String() }

func (e *fakeEngine) handle(ctx *fasthttp.RequestCtx) {
	switch string(ctx.Path()) {
	case "/health":
		return
	case "/v1/models":
		ctx.SetBodyString(`{"object":"list","data":[]}`)
		return
	case "/metrics":
		ctx.SetStatusCode(fasthttp.StatusNotFound)
		return
	}
	body := append([]byte(nil), ctx.PostBody()...)
	e.mu.Lock()
	e.got = append(e.got, body)
	e.traceparents = append(e.traceparents, string(ctx.Request.Header.Peek("Traceparent")))
	e.mu.Unlock()
	payload, chunked, seed := e.resp(body)
	rng := rand.New(rand.NewPCG(seed, 7))
	write := func(w interface {
		Write([]byte) (int, error)
	}, flush func() error) {
		for rest := payload; len(rest) > 0; {
			n := min(len(rest), 1+rng.IntN(64))
			w.Write(rest[:n])
			flush()
			rest = rest[n:]
			if rng.IntN(4) == 0 {
				time.Sleep(time.Duration(rng.IntN(300)) * time.Microsecond)
			}
		}
	}
	ctx.SetContentType("text/event-stream")
	if !chunked {
		ctx.SetBody(payload)
		return
	}
	ctx.SetBodyStreamWriter(func(w *bufio.Writer) { write(w, w.Flush) })
}

// TestBytesUnchanged: whatever the engine sends, under any chunking, reaches
// the client byte for byte; whatever the client sends reaches the engine
// byte for byte but for the model splice. Each payload ends with the
// stream's last event, as an engine's does: a stream that ends without it
// broke off, and gets the gateway's error event after it (issue 32).
func TestBytesUnchanged(t *testing.T) {
	payloads := map[string][]byte{}
	var pmu sync.Mutex
	eng := newFakeEngine(t, func(body []byte) ([]byte, bool, uint64) {
		pmu.Lock()
		defer pmu.Unlock()
		seed := uint64(len(body))
		return payloads[string(body)], seed%2 == 0, seed
	})
	g := startWith(t, []string{eng.url()}, nil)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 60; i++ {
		// A random body with odd but valid JSON around the model field.
		extra := strings.Repeat(" ", rng.IntN(3))
		prompt := randomText(rng, rng.IntN(200))
		var body string
		switch i % 3 {
		case 0:
			body = `{"model":"sim",` + extra + `"prompt":` + strconv.Quote(prompt) + `,"n":` + strconv.Itoa(i) + `}`
		case 1:
			body = `{` + extra + `"prompt":` + strconv.Quote(prompt) + `,"id":` + strconv.Itoa(i) + `}`
		default:
			body = `{"prompt":` + strconv.Quote(prompt) + `, "model" : "inferrail/sim-8b" ,"k":` + strconv.Itoa(i) + `}`
		}
		want := []byte(strings.Replace(strings.Replace(body, `"model":"sim"`, `"model":"inferrail/sim-8b"`, 1), `{`+extra+`"prompt"`, `{"model":"inferrail/sim-8b",`+extra+`"prompt"`, 1))
		if i%3 == 2 {
			want = []byte(body)
		}
		payload := []byte(randomText(rng, rng.IntN(5000)) + "\n\ndata: [DONE]\n\n")
		pmu.Lock()
		payloads[string(want)] = payload
		pmu.Unlock()
		resp, got := g.post("/v1/completions", body)
		if resp.StatusCode != 200 {
			t.Fatalf("request %d: %d %s", i, resp.StatusCode, got)
		}
		eng.mu.Lock()
		sent := eng.got[len(eng.got)-1]
		eng.mu.Unlock()
		if !bytes.Equal(sent, want) {
			t.Fatalf("request %d: engine got\n%s\nwant\n%s", i, sent, want)
		}
		if got != string(payload) {
			t.Fatalf("request %d: client got %d bytes, engine sent %d", i, len(got), len(payload))
		}
	}
}

func randomText(rng *rand.Rand, n int) string {
	const alphabet = "abc \n\"\\{}:,é€data: [DONE]\r"
	runes := []rune(alphabet)
	var b strings.Builder
	for i := 0; i < n; i++ {
		b.WriteRune(runes[rng.IntN(len(runes))])
	}
	return b.String()
}

// TestSucceedsWithinAttempts: with replicas broken in every way the tests can
// break them, a request succeeds whenever a healthy one is within its
// attempts.
func TestSucceedsWithinAttempts(t *testing.T) {
	g := start(t, 4, nil, func(c *config.Config) {
		c.Retry.MaxAttempts = 4
		c.Health.UnhealthyThreshold = 1000 // keep broken replicas in rotation
		c.Health.EjectionBackoff = time.Millisecond
		c.Health.MaxEjectionBackoff = time.Millisecond
		c.Routing.DefaultPolicy = "random"
	})
	faults := []sim.Fault{
		{Kind: sim.FaultClose},
		{Kind: sim.FaultFail, Status: 503, Paths: []string{"/v1/completions"}},
		{Kind: sim.FaultFail, Status: 502, Paths: []string{"/v1/completions"}},
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for round := 0; round < 12; round++ {
		good := rng.IntN(4)
		for i, s := range g.sims {
			switch {
			case i == good:
				s.SetFault(sim.Fault{})
				if !s.Alive() {
					s.Restart()
				}
			case rng.IntN(4) == 0:
				s.Kill()
			default:
				if !s.Alive() {
					s.Restart()
				}
				s.SetFault(faults[rng.IntN(len(faults))])
			}
		}
		for i := 0; i < 8; i++ {
			resp, body := g.post("/v1/completions", `{"prompt":"hi","max_tokens":1}`)
			if resp.StatusCode != 200 {
				t.Fatalf("round %d: %d %s", round, resp.StatusCode, body)
			}
		}
	}
}

// FuzzGatewayNoFailure: no request, however malformed, gets a 5xx from the
// gateway itself: every answer is the engine's or a well-formed 4xx.
func FuzzGatewayNoFailure(f *testing.F) {
	for _, s := range []string{`{"model":"sim","prompt":"x","max_tokens":1}`, `{`, ``, `[]`, `{"model":1}`,
		`{"model":"nope"}`, `{"model":"sim","messages":"x"}`, "\xff", `{"model":"s\u0069m","prompt":"x","max_tokens":1}`} {
		f.Add(s, "/v1/completions", "application/json")
		f.Add(s, "/v1/chat/completions", "text/plain")
	}
	for _, s := range []string{`{"model":"sim","tokens":[1,2]}`, `{"tokens":[-1]}`, `{"tokens":[4294967296]}`, `{"tokens":"x"}`,
		`{"model":"sim","messages":[{"role":"user","content":"hi"}],"max_tokens":1}`, `{"prompt":[1,2],"stream":true}`,
		`{"prompt":["a","b"]}`, `{"messages":"x","temperature":1}`} {
		for _, path := range []string{pathDetokenize, pathChatRender, pathCompletionRender, pathTokenize} {
			f.Add(s, path, "application/json")
		}
	}
	g := start(f, 1, nil, nil)
	c := &fasthttp.Client{ReadTimeout: 10 * time.Second}
	f.Fuzz(func(t *testing.T, body, path, ctype string) {
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		defer fasthttp.ReleaseRequest(req)
		defer fasthttp.ReleaseResponse(resp)
		req.SetRequestURI("http://" + g.addr + "/" + strings.TrimLeft(path, "/"))
		if req.URI().Host() == nil || string(req.URI().Host()) != g.addr {
			return // the fuzzer wrote a path that changes the address
		}
		req.Header.SetMethod("POST")
		req.Header.SetContentType(ctype)
		req.SetBodyString(body)
		if err := c.DoTimeout(req, resp, 10*time.Second); err != nil {
			t.Fatalf("%q %q: %v", path, body, err)
		}
		code := resp.StatusCode()
		if code >= 500 && len(resp.Header.Peek("X-Inferrail-Replica")) == 0 {
			t.Fatalf("%q %q: gateway answered %d: %s", path, body, code, resp.Body())
		}
	})
}

func TestShutdownLetsStreamsFinish(t *testing.T) {
	g := start(t, 1, func(o *sim.Options) {
		o.Engine.Latency.Zero = false
		o.Engine.Latency.DecodeToken = 10 * time.Millisecond
	}, nil)
	type out struct {
		events int
		err    error
	}
	res := make(chan out, 3)
	for i := 0; i < 3; i++ {
		go func() {
			resp, err := client().Post(g.url("/v1/completions"), "application/json",
				strings.NewReader(`{"prompt":"long","max_tokens":40,"stream":true}`))
			if err != nil {
				res <- out{err: err}
				return
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			res <- out{events: strings.Count(string(body), "data: "), err: err}
		}()
	}
	waitFor(t, "three streams running", 2*time.Second, func() bool { return g.engineStats(0).Running == 3 })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	shut := make(chan error, 1)
	go func() { shut <- g.fe.Shutdown(ctx) }()
	for i := 0; i < 3; i++ {
		o := <-res
		if o.err != nil || o.events != 41 {
			t.Fatalf("stream during shutdown: %d events, %v", o.events, o.err)
		}
	}
	if err := <-shut; err != nil {
		t.Fatal(err)
	}
	// New connections are refused once shut down.
	if _, err := client().Get(g.url("/health")); err == nil {
		t.Fatal("a request after shutdown was served")
	}
}

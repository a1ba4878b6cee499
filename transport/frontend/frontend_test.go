package frontend

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/inferrail/inferrail/config"
	"github.com/inferrail/inferrail/sim"
)

func TestProxy(t *testing.T) {
	g := start(t, 2, nil, nil)
	resp, body := g.post("/v1/chat/completions", chat("hello", 5, false), "X-Request-Id", "req-1")
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	// The alias was spliced: the engine serves only the full name.
	if !strings.Contains(body, `"model":"inferrail/sim-8b"`) || !strings.Contains(body, `"id":"chatcmpl-req-1"`) {
		t.Fatalf("body %s", body)
	}
	for _, h := range []string{"X-Inferrail-Replica", "X-Inferrail-Policy", "X-Request-Id"} {
		if resp.Header.Get(h) == "" {
			t.Fatalf("missing %s", h)
		}
	}
	if resp.Header.Get("X-Request-Id") != "req-1" || resp.Header.Get("X-Inferrail-Policy") != "least_request" {
		t.Fatalf("headers %v", resp.Header)
	}
	// A malformed request id is replaced.
	resp, _ = g.post("/v1/completions", `{"prompt":"x","max_tokens":1}`, "X-Request-Id", "bad id")
	if id := resp.Header.Get("X-Request-Id"); len(id) != 16 {
		t.Fatalf("generated id %q", id)
	}

	// Streams arrive event by event, unchanged.
	resp, body = g.post("/v1/chat/completions", chat("hello", 4, true))
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("%d %v", resp.StatusCode, resp.Header)
	}
	if n := strings.Count(body, "data: "); n != 7 || !strings.HasSuffix(body, "data: [DONE]\n\n") {
		t.Fatalf("%d events: %s", n, body)
	}
}

func TestLocalRoutes(t *testing.T) {
	g := start(t, 1, nil, nil)
	c := client()
	waitFor(t, "model cards fetched", 2*time.Second, func() bool {
		resp, err := c.Get(g.url("/v1/models"))
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return strings.Contains(string(b), `"max_model_len":32768`)
	})
	resp, err := c.Get(g.url("/v1/models"))
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Data []struct {
			ID   string `json:"id"`
			Root string `json:"root"`
		} `json:"data"`
	}
	json.NewDecoder(resp.Body).Decode(&list)
	resp.Body.Close()
	if len(list.Data) != 2 || list.Data[0].ID != model || list.Data[1].ID != "sim" {
		t.Fatalf("models %+v", list)
	}
	for _, m := range []string{"GET", "HEAD"} {
		req, _ := http.NewRequest(m, g.url("/health"), nil)
		if resp, err := c.Do(req); err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s /health: %v", m, err)
		} else {
			resp.Body.Close()
		}
	}
	resp, body := g.post("/v1/models", "{}")
	if resp.StatusCode != 405 || resp.Header.Get("Allow") != "GET, HEAD" || !strings.Contains(body, `"code":405`) {
		t.Fatalf("405: %d %v %s", resp.StatusCode, resp.Header, body)
	}
	resp, body = g.post("/v2/other", "{}")
	if resp.StatusCode != 404 || !strings.Contains(body, `"code":404`) {
		t.Fatalf("404: %d %s", resp.StatusCode, body)
	}
	resp, body = g.post("/v1/chat/completions", chat("x", 1, false)[:10])
	if resp.StatusCode != 400 {
		t.Fatalf("broken JSON: %d %s", resp.StatusCode, body)
	}
	resp, body = g.post("/v1/chat/completions", `{"model":"nope","messages":[]}`)
	if resp.StatusCode != 404 || !strings.Contains(body, "The model `nope` does not exist.") {
		t.Fatalf("unknown model: %d %s", resp.StatusCode, body)
	}
	// With one model served, a request may omit it.
	resp, body = g.post("/v1/completions", `{"prompt":"hi","max_tokens":2}`)
	if resp.StatusCode != 200 {
		t.Fatalf("no model: %d %s", resp.StatusCode, body)
	}
}

// gwConfig keeps test call sites short.
type gwConfig = config.Config

func TestRetryOnDeadReplica(t *testing.T) {
	g := start(t, 3, nil, nil)
	g.sims[0].Kill()
	g.sims[1].SetFault(sim.Fault{Kind: sim.FaultFail, Status: 503})
	for i := 0; i < 30; i++ {
		resp, body := g.post("/v1/completions", `{"model":"sim","prompt":"hi","max_tokens":2}`)
		if resp.StatusCode != 200 {
			t.Fatalf("request %d: %d %s", i, resp.StatusCode, body)
		}
		if r := resp.Header.Get("X-Inferrail-Replica"); r != "r2" {
			t.Fatalf("request %d served by %s", i, r)
		}
	}
}

func TestEjection(t *testing.T) {
	g := start(t, 2, nil, func(c *gwConfig) {
		c.Health.EjectionBackoff = time.Hour
		c.Health.MaxEjectionBackoff = time.Hour
	})
	// A 500 is not retried (the engine answered), but it counts against
	// the replica: three in a row eject it.
	g.sims[0].SetFault(sim.Fault{Kind: sim.FaultFail, Status: 500, Paths: []string{"/v1/completions"}})
	failures := 0
	for i := 0; i < 40; i++ {
		resp, _ := g.post("/v1/completions", `{"prompt":"hi","max_tokens":1}`)
		if resp.StatusCode == 500 {
			failures++
			// The outcome reaches r0's actor after the response: wait for
			// it, so that the next request sees its count (or the
			// ejection) and the test counts failures, not scheduling.
			waitFor(t, "the failure counted", 5*time.Second, func() bool {
				s, _ := g.fl.Snapshot("r0")
				return s.RequestFailures == failures || !s.EjectedUntil.IsZero()
			})
		}
	}
	if failures != g.cfg.Health.UnhealthyThreshold {
		t.Fatalf("%d failures before ejection, want %d", failures, g.cfg.Health.UnhealthyThreshold)
	}
	if snap, _ := g.fl.Snapshot("r0"); snap.EjectedUntil.IsZero() {
		t.Fatal("r0 not ejected")
	}
}

func TestHungReplicaRequestsMove(t *testing.T) {
	g := start(t, 2, nil, func(c *gwConfig) {
		c.Routing.DefaultPolicy = "round_robin"
		c.Retry.MaxAttempts = 2
	})
	g.sims[0].SetFault(sim.Fault{Kind: sim.FaultHang})
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, body := g.post("/v1/completions", `{"prompt":"hi","max_tokens":1}`)
			if resp.StatusCode != 200 || resp.Header.Get("X-Inferrail-Replica") != "r1" {
				t.Errorf("%d from %s: %s", resp.StatusCode, resp.Header.Get("X-Inferrail-Replica"), body)
			}
		}()
	}
	wg.Wait()
	g.sims[0].SetFault(sim.Fault{})
}

func TestBreakers(t *testing.T) {
	g := start(t, 2, func(o *sim.Options) {
		o.Engine.Latency.Zero = false
	}, func(c *gwConfig) {
		for i := range c.Replicas {
			c.Replicas[i].MaxConcurrency = 2
			c.Replicas[i].MaxPending = 2
		}
	})
	// Four slow requests fill both replicas; more get an immediate 503.
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if resp, body := g.post("/v1/completions", `{"prompt":"hi","max_tokens":25}`); resp.StatusCode != 200 {
				t.Errorf("%d %s", resp.StatusCode, body)
			}
		}()
	}
	waitFor(t, "four in flight", 2*time.Second, func() bool {
		n := 0
		for _, s := range g.fl.Replicas() {
			n += s.Counters.InFlight()
		}
		return n == 4
	})
	t0 := time.Now()
	resp, body := g.post("/v1/completions", `{"prompt":"hi","max_tokens":1}`)
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("full fleet: %d %v %s", resp.StatusCode, resp.Header, body)
	}
	if d := time.Since(t0); d > 200*time.Millisecond {
		t.Fatalf("full fleet answered after %v", d)
	}
	wg.Wait()
}

// rawStream sends a streamed request on a raw connection and reads n events.
func rawStream(t *testing.T, addr, body string, n int) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	br := bufio.NewReader(conn)
	for seen := 0; seen < n; {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(line, "data: ") {
			seen++
		}
	}
	return conn
}

func TestDisconnectFreesEngineSlot(t *testing.T) {
	g := start(t, 1, func(o *sim.Options) {
		o.Engine.Latency.Zero = false
		o.Engine.Latency.DecodeToken = 5 * time.Millisecond
		o.Engine.MaxNumSeqs = 1
	}, nil)
	// Streaming: leave after three events.
	conn := rawStream(t, g.addr, `{"prompt":"stream","max_tokens":5000,"stream":true}`, 3)
	conn.Close()
	t0 := time.Now()
	waitFor(t, "engine aborts the stream", time.Second, func() bool {
		st := g.engineStats(0)
		return st.Running == 0 && st.FinishedByReason["abort"] == 1
	})
	t.Logf("stream aborted in the engine %v after the client left", time.Since(t0))

	// Queued: one request holds the only sequence slot, a second waits.
	hold := rawStream(t, g.addr, `{"prompt":"hold","max_tokens":5000,"stream":true}`, 1)
	defer hold.Close()
	conn, err := net.Dial("tcp", g.addr)
	if err != nil {
		t.Fatal(err)
	}
	body := `{"prompt":"queued","max_tokens":3}`
	fmt.Fprintf(conn, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	waitFor(t, "second request queued", time.Second, func() bool { return g.engineStats(0).Waiting == 1 })
	conn.Close()
	t0 = time.Now()
	waitFor(t, "engine withdraws the queued request", time.Second, func() bool {
		st := g.engineStats(0)
		return st.Waiting == 0 && st.FinishedByReason["abort"] == 2
	})
	if d := time.Since(t0); d > 100*time.Millisecond+50*time.Millisecond {
		t.Errorf("queued request withdrawn %v after the client left (target 100 ms)", d)
	}
}

func TestBodyLimitsAndTimeouts(t *testing.T) {
	g := start(t, 1, nil, func(c *gwConfig) {
		c.Server.MaxBodyBytes = 1024
		c.Server.RequestTimeout = 300 * time.Millisecond
		c.Server.HeaderReadTimeout = 200 * time.Millisecond
	})
	resp, body := g.post("/v1/completions", `{"prompt":"`+strings.Repeat("x", 2000)+`"}`)
	if resp.StatusCode != 413 || !strings.Contains(body, `"code":413`) {
		t.Fatalf("big body: %d %s", resp.StatusCode, body)
	}
	// A body that stops arriving gets a 408.
	conn, err := net.Dial("tcp", g.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"prompt\":")
	conn.SetReadDeadline(time.Now().Add(3 * time.Second))
	status, _ := bufio.NewReader(conn).ReadString('\n')
	if !strings.Contains(status, "408") {
		t.Fatalf("stalled body: %q", status)
	}
	// An idle connection is closed after header_read_timeout, whether it
	// never sent a request (it may get a 408 first) or sat idle after one.
	for _, first := range []string{"", "GET /health HTTP/1.1\r\nHost: x\r\n\r\n"} {
		idle, err := net.Dial("tcp", g.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer idle.Close()
		idle.Write([]byte(first))
		idle.SetReadDeadline(time.Now().Add(3 * time.Second))
		t0 := time.Now()
		if _, err := io.Copy(io.Discard, idle); err != nil {
			t.Fatalf("idle connection not closed: %v", err)
		}
		if d := time.Since(t0); d > 2*time.Second {
			t.Fatalf("idle connection kept %v", d)
		}
	}
	// Expect: 100-continue that would be refused anyway is refused at
	// once, before the body is sent, with the JSON error it would get
	// without the header.
	for _, c := range []struct {
		head   string
		status int
		allow  string
	}{
		{"POST /nope HTTP/1.1\r\nHost: x\r\nContent-Length: 10", 404, ""},
		{"GET /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 10", 405, "POST"},
		{"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999", 413, ""},
	} {
		ex, err := net.Dial("tcp", g.addr)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(ex, "%s\r\nExpect: 100-continue\r\n\r\n", c.head)
		ex.SetReadDeadline(time.Now().Add(2 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(ex), nil)
		if err != nil {
			t.Fatalf("%q: %v", c.head, err)
		}
		body, _ := io.ReadAll(resp.Body)
		ex.Close()
		var e struct {
			Error struct {
				Message string `json:"message"`
				Code    int    `json:"code"`
			} `json:"error"`
		}
		if resp.StatusCode != c.status || json.Unmarshal(body, &e) != nil || e.Error.Code != c.status ||
			resp.Header.Get("Allow") != c.allow || !resp.Close {
			t.Fatalf("%q: %d %v %s; want %d with a JSON error, Allow %q, connection closed",
				c.head, resp.StatusCode, resp.Header, body, c.status, c.allow)
		}
	}
}

func TestLogHygiene(t *testing.T) {
	g := start(t, 1, nil, nil)
	secret := "the-secret-prompt-text"
	g.post("/v1/chat/completions", chat(secret, 2, false))
	g.post("/v1/chat/completions", chat(secret, 2, true))
	g.post("/v1/chat/completions", `{"model":"nope","messages":[{"role":"user","content":"`+secret+`"}]}`)
	if strings.Contains(g.logs.String(), secret) {
		t.Fatalf("prompt text in the logs:\n%s", g.logs.String())
	}
}

func TestNoHerding(t *testing.T) {
	g := start(t, 4, func(o *sim.Options) {
		o.Engine.Latency.Zero = false
		o.Engine.Latency.DecodeToken = 2 * time.Millisecond
	}, func(c *config.Config) {
		// 200 requests at once on two cores can delay a 40 ms probe; this
		// test is about routing, not health.
		c.Health.Interval = time.Second
		c.Health.Timeout = time.Second
	})
	release := make(chan struct{})
	counts := make(map[string]int)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := 0; i < 200; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-release
			resp, body := g.post("/v1/completions", `{"prompt":"burst","max_tokens":20}`)
			if resp.StatusCode != 200 {
				t.Errorf("%d %s", resp.StatusCode, body)
				return
			}
			mu.Lock()
			counts[resp.Header.Get("X-Inferrail-Replica")]++
			mu.Unlock()
		}()
	}
	close(release)
	wg.Wait()
	for r, n := range counts {
		if n < 45 || n > 55 {
			t.Fatalf("replica %s got %d of 200 (want 50 ± 10%%): %v", r, n, counts)
		}
	}
}

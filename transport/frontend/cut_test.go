package frontend

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/inferrail/inferrail/transport/telemetry"
)

// dyingEngine answers /health and the like as an engine does, and every
// POST with a 200 event stream that sends first (one chunk) and then dies
// mid-body: its connection reset, as a SIGKILLed engine's is, or, when
// clean, its chunked body ended before the stream's last event, as a
// simulator's Kill ends it. It dies once relayed is closed: the client has
// the stream's first bytes, so the gateway read the chunk.
func dyingEngine(t *testing.T, first string, clean bool, relayed <-chan struct{}) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"object":"list","data":[]}`)
			return
		}
		io.Copy(io.Discard, r.Body)
		conn, buf, err := w.(http.Hijacker).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		fmt.Fprintf(buf, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n", len(first), first)
		buf.Flush()
		select {
		case <-relayed:
		case <-time.After(5 * time.Second):
			t.Error("the client never got the stream's first bytes")
		}
		if clean {
			io.WriteString(conn, "0\r\n\r\n")
		} else {
			conn.(*net.TCPConn).SetLinger(0)
		}
		conn.Close()
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestStreamCutEndsInErrorEvent: an engine that dies after a stream's first
// byte (issue 32, case 2). The client's stream ends in the API's own error
// event, after an event the engine left unfinished is ended, in a properly
// ended chunked body (the client reads it to its end without an error);
// the cut is counted by reason and logged once with the request id, the
// replica and the bytes relayed.
func TestStreamCutEndsInErrorEvent(t *testing.T) {
	for _, c := range []struct {
		path, body, first string
		clean             bool     // the engine ends the body, without the stream's last event
		want              []string // in the body's last bytes, in order
	}{{
		path:  "/v1/chat/completions",
		body:  `{"model":"sim","stream":true,"max_tokens":50,"messages":[{"role":"user","content":"hi"}]}`,
		first: "data: {\"id\":\"c1\",\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata: {\"id\":\"c1\",\"cho",
		want:  []string{"\"cho\n\n", `data: {"error": {"message": "The engine broke off the response`, `"code": 502}}` + "\n\n", "data: [DONE]\n\n"},
	}, {
		path:  "/v1/completions",
		body:  `{"model":"sim","stream":true,"max_tokens":50,"prompt":"hi"}`,
		first: "data: {\"id\":\"c1\",\"choices\":[{\"text\":\"a\"}]}\n\n",
		clean: true,
		want:  []string{"}]}\n\n" + `data: {"error": {"message": "The engine broke off the response`, "data: [DONE]\n\n"},
	}, {
		path:  "/v1/messages",
		body:  `{"model":"sim","stream":true,"max_tokens":50,"messages":[{"role":"user","content":"hi"}]}`,
		first: "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m1\"}}\n\n",
		want:  []string{"}}\n\nevent: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":\"The engine broke off"},
	}, {
		path: "/v1/responses",
		body: `{"model":"sim","stream":true,"input":"hi"}`,
		first: "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"resp_9\",\"status\":\"in_progress\"},\"sequence_number\":0}\n\n" +
			"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"a\",\"sequence_number\":1}\n\n",
		want: []string{"event: response.failed\ndata: {\"type\":\"response.failed\",\"sequence_number\":2,\"response\":{\"id\":\"resp_9\",\"object\":\"response\",\"status\":\"failed\",\"error\":{\"code\":\"server_error\""},
	}} {
		t.Run(strings.TrimPrefix(c.path, "/v1/"), func(t *testing.T) {
			relayed := make(chan struct{})
			g := startWith(t, []string{dyingEngine(t, c.first, c.clean, relayed)}, nil)
			waitFor(t, "the replica healthy", 5*time.Second, func() bool { s, _ := g.fl.Snapshot("r0"); return s.Healthy })
			req, _ := http.NewRequest("POST", g.url(c.path), strings.NewReader(c.body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("X-Request-Id", "cut-"+strings.TrimPrefix(c.path, "/v1/"))
			resp, err := client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			br := bufio.NewReader(resp.Body)
			if _, err := br.Peek(1); err != nil {
				t.Fatalf("no first byte: %v", err)
			}
			close(relayed)
			body, err := io.ReadAll(br)
			if err != nil {
				t.Fatalf("the stream did not end properly: %v after %q", err, body)
			}
			if resp.StatusCode != 200 || !strings.HasPrefix(string(body), c.first) {
				t.Fatalf("status %d, body %q", resp.StatusCode, body)
			}
			rest := string(body[len(c.first)-min(len(c.first), 6):])
			for _, w := range c.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("the body's end lacks %q:\n%s", w, body)
				}
				rest = rest[i+len(w):]
			}
			m := g.fe.met.Model(model)
			waitFor(t, "the cut counted", 5*time.Second, func() bool { return m.Cuts(telemetry.CutEngine) == 1 })
			logs := g.logs.String()
			if n := strings.Count(logs, "response cut after its first byte"); n != 1 {
				t.Fatalf("%d log lines for the cut, want 1:\n%s", n, logs)
			}
			line := ""
			for _, l := range strings.Split(logs, "\n") {
				if strings.Contains(l, "response cut after its first byte") {
					line = l
				}
			}
			for _, w := range []string{"id=" + req.Header.Get("X-Request-Id"), "replica=r0", fmt.Sprintf("bytes=%d", len(c.first)), "reason=engine"} {
				if !strings.Contains(line, w) {
					t.Errorf("the log line lacks %s: %s", w, line)
				}
			}
		})
	}
}

package upstream

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/inferrail/inferrail/sim"
)

const (
	chatPath   = "/v1/chat/completions"
	chatBody   = `{"model":"inferrail/sim-8b","messages":[{"role":"user","content":"hello"}],"max_tokens":4}`
	streamBody = `{"model":"inferrail/sim-8b","messages":[{"role":"user","content":"hello"}],"max_tokens":5,"stream":true}`
)

func TestRoundTripReusesConnection(t *testing.T) {
	s := startSim(t, zero)
	p := newPool(t, s.URL(), Options{})
	for i := range 5 {
		code, body := do(t, p, chatPath, chatBody)
		if code != 200 || !strings.Contains(body, `"object":"chat.completion"`) {
			t.Fatalf("non-stream %d: %d %s", i, code, body)
		}

		req := newReq(chatPath, streamBody)
		resp, err := p.Do(context.Background(), req)
		fasthttp.ReleaseRequest(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode() != 200 || !resp.Chunked() || resp.ContentLength() != -1 ||
			!strings.HasPrefix(string(resp.Header.ContentType()), "text/event-stream") {
			t.Fatalf("stream head: %d chunked=%v cl=%d %q", resp.StatusCode(), resp.Chunked(),
				resp.ContentLength(), resp.Header.ContentType())
		}
		b, err := io.ReadAll(resp)
		resp.Close()
		if err != nil {
			t.Fatal(err)
		}
		// role, 4 content chunks, the finish chunk with the 5th token, [DONE].
		if ev := sseEvents(t, string(b)); len(ev) != 7 || ev[6] != "[DONE]" {
			t.Fatalf("stream %d: %d events: %q", i, len(ev), ev)
		}
	}
	if st := p.Stats(); st.Dials != 1 || st.Idle != 1 || st.StaleRetries != 0 {
		t.Fatalf("10 sequential requests: %+v, want one dial", st)
	}
}

func TestConcurrentRequestsShareThePool(t *testing.T) {
	s := startSim(t, zero)
	p := newPool(t, s.URL(), Options{MaxIdleConns: 4})
	const workers, each = 8, 20
	errs := make(chan error, workers)
	for range workers {
		go func() {
			for range each {
				req := newReq(chatPath, chatBody)
				resp, err := p.Do(context.Background(), req)
				fasthttp.ReleaseRequest(req)
				if err != nil {
					errs <- err
					return
				}
				_, err = io.Copy(io.Discard, resp)
				resp.Close()
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range workers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	st := p.Stats()
	if st.Idle > 4 || st.Dials > workers*each/2 {
		t.Fatalf("%d requests on %d workers: %+v", workers*each, workers, st)
	}
	t.Logf("%d requests, %d workers: %+v", workers*each, workers, st)
}

func TestCloseWithoutReadingClosesConnection(t *testing.T) {
	s := startSim(t, zero)
	p := newPool(t, s.URL(), Options{})
	req := newReq(chatPath, `{"messages":[{"role":"user","content":"x"}],"max_tokens":300,"stream":true}`)
	defer fasthttp.ReleaseRequest(req)
	resp, err := p.Do(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Close()
	resp.Close() // idempotent
	if _, err := resp.Read(make([]byte, 1)); err == nil {
		t.Fatal("read after close succeeded")
	}
	if st := p.Stats(); st.Idle != 0 {
		t.Fatalf("an unread response's conn went back to the pool: %+v", st)
	}
	do(t, p, chatPath, chatBody)
	if st := p.Stats(); st.Dials != 2 {
		t.Fatalf("%+v, want a second dial", st)
	}
}

// The end of a chunked body already in the buffer is consumed at Close, so a
// relay that stops at [DONE] still gives the connection back.
func TestCloseAtDoneReusesWhenTerminatorBuffered(t *testing.T) {
	const stream = "data: {\"a\":1}\n\ndata: [DONE]\n\n"
	f := startFake(t, func(_ int64, c net.Conn, br *bufio.Reader) {
		for readReq(br) {
			fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n", len(stream), stream)
		}
	})
	p := newPool(t, f.URL(), Options{})
	for range 3 {
		req := newReq(chatPath, streamBody)
		resp, err := p.Do(context.Background(), req)
		fasthttp.ReleaseRequest(req)
		if err != nil {
			t.Fatal(err)
		}
		b := make([]byte, len(stream))
		if _, err := io.ReadFull(resp, b); err != nil || string(b) != stream {
			t.Fatalf("%q %v", b, err)
		}
		resp.Close()
	}
	if n := f.accepts.Load(); n != 1 {
		t.Fatalf("%d connections, want 1", n)
	}
}

func TestConnectionCloseAndUnframedBodiesAreNotReused(t *testing.T) {
	f := startFake(t, func(n int64, c net.Conn, br *bufio.Reader) {
		if !readReq(br) {
			return
		}
		if n%2 == 1 {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
			return
		}
		// No Content-Length, not chunked: the body ends with the connection.
		io.WriteString(c, "HTTP/1.1 200 OK\r\n\r\nuntil close")
	})
	p := newPool(t, f.URL(), Options{})
	for i, want := range []string{"ok", "until close", "ok"} {
		if code, body := do(t, p, chatPath, chatBody); code != 200 || body != want {
			t.Fatalf("%d: %d %q, want %q", i, code, body, want)
		}
	}
	if n := f.accepts.Load(); n != 3 {
		t.Fatalf("%d connections, want 3", n)
	}
}

func TestNoBody(t *testing.T) {
	f := startFake(t, func(_ int64, c net.Conn, br *bufio.Reader) {
		for readReq(br) {
			io.WriteString(c, "HTTP/1.1 204 No Content\r\n\r\n")
		}
	})
	p := newPool(t, f.URL(), Options{})
	for range 2 {
		if code, body := do(t, p, "/reset_prefix_cache", ""); code != 204 || body != "" {
			t.Fatalf("%d %q", code, body)
		}
	}
	if n := f.accepts.Load(); n != 1 {
		t.Fatalf("%d connections, want 1", n)
	}
}

func TestHostHeader(t *testing.T) {
	hosts := make(chan string, 2)
	f := startFake(t, func(_ int64, c net.Conn, br *bufio.Reader) {
		var req fasthttp.Request
		for req.Read(br) == nil {
			hosts <- string(req.Header.Host()) + " " + string(req.Header.RequestURI())
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
		}
	})
	p := newPool(t, f.URL(), Options{})
	do(t, p, "/v1/models", "")
	if got, want := <-hosts, f.ln.Addr().String()+" /v1/models"; got != want {
		t.Fatalf("host and path %q, want %q", got, want)
	}
	req := newReq("/v1/models", "")
	defer fasthttp.ReleaseRequest(req)
	req.Header.SetHost("gateway.example")
	resp, err := p.Do(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Close()
	if got := <-hosts; got != "gateway.example /v1/models" {
		t.Fatalf("a caller's Host was replaced: %q", got)
	}
}

func TestDialError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	p := newPool(t, "http://"+addr, Options{})
	req := newReq(chatPath, chatBody)
	defer fasthttp.ReleaseRequest(req)
	_, err = p.Do(context.Background(), req)
	if !isDialError(err) {
		t.Fatalf("got %v, want a DialError", err)
	}
	t.Log(err)
	if st := p.Stats(); st.DialErrors != 1 {
		t.Fatalf("%+v", st)
	}
}

func TestFaultCloseIsClosedError(t *testing.T) {
	s := startSim(t, zero)
	p := newPool(t, s.URL(), Options{})
	s.SetFault(sim.Fault{Kind: sim.FaultClose})
	req := newReq(chatPath, chatBody)
	defer fasthttp.ReleaseRequest(req)
	_, err := p.Do(context.Background(), req)
	if !isClosedError(err) {
		t.Fatalf("fresh conn: got %v, want a ClosedError", err)
	}
	t.Log(err)

	// On a reused connection the same fault is retried once on a fresh one,
	// then reported.
	s.SetFault(sim.Fault{})
	do(t, p, chatPath, chatBody)
	s.SetFault(sim.Fault{Kind: sim.FaultClose})
	_, err = p.Do(context.Background(), req)
	if !isClosedError(err) {
		t.Fatalf("reused conn: got %v, want a ClosedError", err)
	}
	if st := p.Stats(); st.StaleRetries != 1 || st.Dials != 3 {
		t.Fatalf("%+v, want one stale retry and three dials", st)
	}
}

func TestFaultFailIsAResponse(t *testing.T) {
	s := startSim(t, zero)
	p := newPool(t, s.URL(), Options{})
	s.SetFault(sim.Fault{Kind: sim.FaultFail, Status: 503})
	if code, body := do(t, p, chatPath, chatBody); code != 503 || !strings.Contains(body, `"code":503`) {
		t.Fatalf("%d %s", code, body)
	}
}

func TestKillAndRestart(t *testing.T) {
	s := startSim(t, zero)
	p := newPool(t, s.URL(), Options{})
	do(t, p, chatPath, chatBody)
	s.Kill()
	req := newReq(chatPath, chatBody)
	defer fasthttp.ReleaseRequest(req)
	if _, err := p.Do(context.Background(), req); !isDialError(err) {
		t.Fatalf("killed sim: got %v, want a DialError", err)
	}

	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	do(t, p, chatPath, chatBody) // the pool holds one conn to the engine's old life...
	s.Kill()
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	// ...which is dead now: the request goes out on a fresh one.
	if code, _ := do(t, p, chatPath, chatBody); code != 200 {
		t.Fatalf("after restart: %d", code)
	}
	if st := p.Stats(); st.Dials != 3 {
		t.Fatalf("%+v, want 3 dials", st)
	}
}

// The keep-alive race: the engine closes an idle connection just as a request
// is written into it. The peek on reuse cannot see it (the close comes after
// the request), so Do retries on a fresh connection.
func TestStaleConnectionRetriedOnce(t *testing.T) {
	f := startFake(t, func(n int64, c net.Conn, br *bufio.Reader) {
		for i := 0; readReq(br); i++ {
			if n == 1 && i == 1 {
				return // the second request on the first conn: close, no answer
			}
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}
	})
	p := newPool(t, f.URL(), Options{})
	for range 3 {
		if code, body := do(t, p, chatPath, chatBody); code != 200 || body != "ok" {
			t.Fatalf("%d %q", code, body)
		}
	}
	if st := p.Stats(); st.StaleRetries != 1 || st.Dials != 2 || f.accepts.Load() != 2 {
		t.Fatalf("%+v, %d accepts; want one retry, two dials", st, f.accepts.Load())
	}
}

// A reused connection that delivered part of a response is not retried: the
// request has been answered, however badly.
func TestNoRetryAfterResponseBytes(t *testing.T) {
	f := startFake(t, func(n int64, c net.Conn, br *bufio.Reader) {
		for i := 0; readReq(br); i++ {
			if i == 1 {
				io.WriteString(c, "HTTP/1.1 200 O")
				return
			}
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}
	})
	p := newPool(t, f.URL(), Options{})
	do(t, p, chatPath, chatBody)
	req := newReq(chatPath, chatBody)
	defer fasthttp.ReleaseRequest(req)
	_, err := p.Do(context.Background(), req)
	if err == nil || isClosedError(err) || isDialError(err) {
		t.Fatalf("got %v, want a plain error", err)
	}
	t.Log(err)
	if st := p.Stats(); st.StaleRetries != 0 || f.accepts.Load() != 1 {
		t.Fatalf("%+v: retried after a response byte", st)
	}
}

func TestTruncatedBody(t *testing.T) {
	f := startFake(t, func(n int64, c net.Conn, br *bufio.Reader) {
		if !readReq(br) {
			return
		}
		if n == 1 {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort")
		} else {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nshort\r\n")
		}
	})
	p := newPool(t, f.URL(), Options{})
	for range 2 {
		req := newReq(chatPath, chatBody)
		resp, err := p.Do(context.Background(), req)
		fasthttp.ReleaseRequest(req)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp)
		resp.Close()
		if string(b) != "short" || !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("%q %v, want the bytes and io.ErrUnexpectedEOF", b, err)
		}
	}
}

func TestHeadTimeout(t *testing.T) {
	s := startSim(t, zero)
	p := newPool(t, s.URL(), Options{HeadTimeout: 50 * time.Millisecond})
	s.SetFault(sim.Fault{Kind: sim.FaultHang})
	req := newReq(chatPath, chatBody)
	defer fasthttp.ReleaseRequest(req)
	t0 := time.Now()
	_, err := p.Do(context.Background(), req)
	d := time.Since(t0)
	if !errors.Is(err, ErrHeadTimeout) || isClosedError(err) {
		t.Fatalf("got %v, want ErrHeadTimeout", err)
	}
	if d < 50*time.Millisecond || d > 550*time.Millisecond {
		t.Fatalf("head timeout after %v", d)
	}
	// The deadline is cleared once the head arrives: a slow body is fine.
	s.SetFault(sim.Fault{})
	resp, err := p.Do(context.Background(), newStreamReq(t, 20))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Close()
	if b, err := io.ReadAll(resp); err != nil || !strings.HasSuffix(string(b), "data: [DONE]\n\n") {
		t.Fatalf("%v %q", err, b)
	}
}

func TestPoolClose(t *testing.T) {
	s := startSim(t, zero)
	p, err := NewPool(s.URL(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	do(t, p, chatPath, chatBody)
	req := newReq(chatPath, chatBody)
	defer fasthttp.ReleaseRequest(req)
	inflight, err := p.Do(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	p.Close()
	p.Close()
	if _, err := p.Do(context.Background(), req); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
	// A request in flight finishes; its conn is closed, not pooled.
	if _, err := io.ReadAll(inflight); err != nil {
		t.Fatal(err)
	}
	inflight.Close()
	if st := p.Stats(); st.Idle != 0 {
		t.Fatalf("%+v", st)
	}
}

func TestIdleTimeout(t *testing.T) {
	s := startSim(t, zero)
	p := newPool(t, s.URL(), Options{IdleTimeout: 40 * time.Millisecond})
	do(t, p, chatPath, chatBody)
	if st := p.Stats(); st.Idle != 1 {
		t.Fatalf("%+v", st)
	}
	waitFor(t, "idle conn reaped", 3*time.Second, func() bool { return p.Stats().Idle == 0 })
	do(t, p, chatPath, chatBody)
	if st := p.Stats(); st.Dials != 2 {
		t.Fatalf("%+v", st)
	}
}

func TestNewPoolRejects(t *testing.T) {
	for _, u := range []string{"ftp://x:1", "x:1", "http://", "https://", "http://x:1/v1", "http://u@x:1", "::"} {
		if p, err := NewPool(u, Options{}); err == nil {
			p.Close()
			t.Errorf("%q accepted", u)
		}
	}
	if p, err := NewPool("http://x:1", Options{DialTimeout: -1, MaxIdleConns: -1}); err == nil {
		p.Close()
		t.Error("negative options accepted")
	} else if !strings.Contains(err.Error(), "dial timeout") || !strings.Contains(err.Error(), "max idle conns") {
		t.Errorf("not every problem reported: %v", err)
	}
	p, err := NewPool("http://example.com", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if p.Addr() != "example.com:80" {
		t.Fatalf("addr %q", p.Addr())
	}
}

// newStreamReq is a streaming completion of n tokens, released at cleanup.
func newStreamReq(t testing.TB, n int) *fasthttp.Request {
	req := newReq("/v1/completions", fmt.Sprintf(`{"prompt":"stream me","max_tokens":%d,"stream":true}`, n))
	t.Cleanup(func() { fasthttp.ReleaseRequest(req) })
	return req
}

func TestResetBeforeResponseIsClosedError(t *testing.T) {
	f := startFake(t, func(_ int64, c net.Conn, br *bufio.Reader) {
		if readReq(br) {
			c.(*net.TCPConn).SetLinger(0) // close with a RST
		}
	})
	p := newPool(t, f.URL(), Options{})
	req := newReq(chatPath, chatBody)
	defer fasthttp.ReleaseRequest(req)
	_, err := p.Do(context.Background(), req)
	if !isClosedError(err) || !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("got %v, want a ClosedError wrapping ECONNRESET", err)
	}
	t.Log(err)
}

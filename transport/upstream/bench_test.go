package upstream

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// Sink keeps benchmark results alive.
var Sink int

const benchBody = `{"prompt":"hi","max_tokens":1}`

// roundTrip benchmarks one client against target; do sends one request and
// drains its body.
func roundTrip(b *testing.B, addr string, do func(req *fasthttp.Request) int) {
	req := newReq("/v1/completions", benchBody)
	defer fasthttp.ReleaseRequest(req)
	req.Header.SetHost(addr)
	do(req) // warm: dial outside the timer
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		Sink += do(req)
	}
}

// benchClients runs the Pool and two fasthttp baselines against url: a
// shared HostClient (keep-alive, not cancellable while waiting for the head)
// and a HostClient per request (go-stack.md §3's cancellable workaround: it
// owns its connection, so it costs a dial per request).
func benchClients(b *testing.B, url, addr string) {
	b.Run("pool", func(b *testing.B) {
		p := newPool(b, url, Options{})
		buf := make([]byte, 4096)
		// A cancellable context, as the gateway's always is: each request
		// registers its AfterFunc.
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		roundTrip(b, addr, func(req *fasthttp.Request) int {
			resp, err := p.Do(ctx, req)
			if err != nil {
				b.Fatal(err)
			}
			n := 0
			for err == nil {
				var m int
				m, err = resp.Read(buf)
				n += m
			}
			resp.Close()
			if err != io.EOF {
				b.Fatal(err)
			}
			return n
		})
		if st := p.Stats(); st.Dials != 1 {
			b.Fatalf("%+v", st)
		}
	})
	b.Run("hostclient", func(b *testing.B) {
		hc := &fasthttp.HostClient{Addr: addr}
		defer hc.CloseIdleConnections()
		resp := fasthttp.AcquireResponse()
		defer fasthttp.ReleaseResponse(resp)
		roundTrip(b, addr, func(req *fasthttp.Request) int {
			if err := hc.Do(req, resp); err != nil {
				b.Fatal(err)
			}
			return len(resp.Body())
		})
	})
	b.Run("hostclient-per-request", func(b *testing.B) {
		resp := fasthttp.AcquireResponse()
		defer fasthttp.ReleaseResponse(resp)
		roundTrip(b, addr, func(req *fasthttp.Request) int {
			hc := &fasthttp.HostClient{Addr: addr}
			err := hc.Do(req, resp)
			hc.CloseIdleConnections()
			if err != nil {
				b.Fatal(err)
			}
			return len(resp.Body())
		})
	})
}

// BenchmarkRoundTrip is one non-streamed completion through each client,
// against a --zero-latency sim and against a static fasthttp server (the
// client's own cost, without the engine's).
func BenchmarkRoundTrip(b *testing.B) {
	b.Run("sim", func(b *testing.B) {
		s := startSim(b, zero)
		benchClients(b, s.URL(), s.Addr())
	})
	b.Run("static", func(b *testing.B) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		body := []byte(`{"id":"cmpl-1","object":"text_completion","choices":[{"text":"x"}]}`)
		srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
			ctx.SetContentType("application/json")
			ctx.SetBody(body)
		}}
		done := make(chan error, 1)
		go func() { done <- srv.Serve(ln) }()
		defer func() {
			srv.Shutdown()
			if err := <-done; err != nil {
				b.Error(err)
			}
		}()
		benchClients(b, "http://"+ln.Addr().String(), ln.Addr().String())
	})
}

// eventServer streams one chunked SSE response per request and writes one
// event each time next receives, in one write as vLLM's server does; a
// closed next ends the body.
func eventServer(b *testing.B, next <-chan struct{}) *fake {
	const ev = `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":" token"},"logprobs":null,"finish_reason":null}]}` + "\n\n"
	chunk := []byte(fmt.Sprintf("%x\r\n%s\r\n", len(ev), ev))
	return startFake(b, func(_ int64, c net.Conn, br *bufio.Reader) {
		if !readReq(br) {
			return
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
		for range next {
			if _, err := c.Write(chunk); err != nil {
				return
			}
		}
		io.WriteString(c, "0\r\n\r\n")
	})
}

// BenchmarkStreamEvent is the cost of one SSE event from the replica's write
// to the caller's Read: the replica writes the next event only after the
// reader has received the previous one, so ns/op is a per-event latency and
// allocs/op the per-event allocations. "raw" reads the same bytes from a bare
// net.Conn, the floor; "hostclient" is fasthttp's StreamResponseBody.
func BenchmarkStreamEvent(b *testing.B) {
	stream := func(b *testing.B, open func(url, addr string) (io.Reader, func())) {
		next := make(chan struct{}, 1)
		f := eventServer(b, next)
		body, done := open(f.URL(), f.ln.Addr().String())
		buf := make([]byte, 4096)
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			next <- struct{}{}
			n, err := body.Read(buf)
			if err != nil {
				b.Fatal(err)
			}
			Sink += n
		}
		b.StopTimer()
		close(next)
		io.Copy(io.Discard, body)
		done()
	}
	b.Run("pool", func(b *testing.B) {
		stream(b, func(url, _ string) (io.Reader, func()) {
			p := newPool(b, url, Options{})
			req := newReq(chatPath, streamBody)
			resp, err := p.Do(context.Background(), req)
			if err != nil {
				b.Fatal(err)
			}
			return resp, func() { resp.Close(); fasthttp.ReleaseRequest(req) }
		})
	})
	b.Run("hostclient", func(b *testing.B) {
		stream(b, func(_, addr string) (io.Reader, func()) {
			hc := &fasthttp.HostClient{Addr: addr, StreamResponseBody: true}
			req := newReq(chatPath, streamBody)
			req.Header.SetHost(addr)
			resp := fasthttp.AcquireResponse()
			if err := hc.Do(req, resp); err != nil {
				b.Fatal(err)
			}
			return resp.BodyStream(), func() {
				resp.CloseBodyStream()
				fasthttp.ReleaseResponse(resp)
				fasthttp.ReleaseRequest(req)
				hc.CloseIdleConnections()
			}
		})
	})
	b.Run("raw", func(b *testing.B) {
		stream(b, func(_, addr string) (io.Reader, func()) {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				b.Fatal(err)
			}
			io.WriteString(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
			br := bufio.NewReader(c)
			for line := ""; line != "\r\n"; { // skip the head
				if line, err = br.ReadString('\n'); err != nil {
					b.Fatal(err)
				}
			}
			return br, func() { c.Close() }
		})
	})
}

// BenchmarkStreamSim streams 256 tokens from a --zero-latency sim per op;
// events/s is what one stream through the pool sustains when the engine is
// free.
func BenchmarkStreamSim(b *testing.B) {
	s := startSim(b, zero)
	p := newPool(b, s.URL(), Options{})
	req := newReq("/v1/completions", `{"prompt":"hi","max_tokens":256,"stream":true}`)
	defer fasthttp.ReleaseRequest(req)
	buf := make([]byte, 4096)
	b.ReportAllocs()
	t0 := time.Now()
	for b.Loop() {
		resp, err := p.Do(context.Background(), req)
		if err != nil {
			b.Fatal(err)
		}
		for err == nil {
			var n int
			n, err = resp.Read(buf)
			Sink += n
		}
		resp.Close()
		if err != io.EOF {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)*257/time.Since(t0).Seconds(), "events/s")
}

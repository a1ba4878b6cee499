package upstream

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
	"go.uber.org/goleak"

	"github.com/inferrail/inferrail/sim"
	"github.com/inferrail/inferrail/sim/engine"
)

// TestMain fails the package when a test leaves a goroutine behind. The
// ignored ones are fasthttp's own, which outlive a sim's Shutdown and the
// baseline HostClient of the benchmarks (see sim/server_test.go).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.updateServerDate.func1"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*workerPool).Start.func2"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*TCPDialer).tcpAddrsClean"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*HostClient).connsCleaner"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*Client).mCleaner"),
	)
}

// startSim runs a simulator on a free port for the test's lifetime.
func startSim(t testing.TB, edit func(*sim.Options)) *sim.Server {
	t.Helper()
	o := sim.DefaultOptions()
	o.Port = 0
	if edit != nil {
		edit(&o)
	}
	s, err := sim.Start(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// zero makes every engine step free.
func zero(o *sim.Options) { o.Engine.Latency.Zero = true }

func newPool(t testing.TB, url string, opts Options) *Pool {
	t.Helper()
	p, err := NewPool(url, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// newReq builds a POST of body to path. The caller releases it.
func newReq(path, body string) *fasthttp.Request {
	req := fasthttp.AcquireRequest()
	req.Header.SetMethod("POST")
	req.SetRequestURI(path)
	req.Header.SetContentType("application/json")
	req.SetBodyString(body)
	return req
}

// do sends one request and reads the whole body.
func do(t testing.TB, p *Pool, path, body string) (int, string) {
	t.Helper()
	return doCtx(t, context.Background(), p, path, body)
}

// doCtx is do under ctx.
func doCtx(t testing.TB, ctx context.Context, p *Pool, path, body string) (int, string) {
	t.Helper()
	req := newReq(path, body)
	defer fasthttp.ReleaseRequest(req)
	resp, err := p.Do(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Close()
	b, err := io.ReadAll(resp)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode(), string(b)
}

// waitFor polls cond until it holds or within passes.
func waitFor(t testing.TB, what string, within time.Duration, cond func() bool) time.Duration {
	t.Helper()
	t0 := time.Now()
	for !cond() {
		if time.Since(t0) > within {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(time.Millisecond)
	}
	return time.Since(t0)
}

func simStats(t testing.TB, s *sim.Server) engine.Stats {
	t.Helper()
	var st engine.Stats
	if !s.Inspect(func(e *engine.Engine) { st = e.Stats() }) {
		t.Fatal("simulator not running")
	}
	return st
}

// fake is a raw loopback HTTP/1.1 server for byte-exact cases. serve runs
// once per accepted connection, in its own goroutine, and owns the conn; the
// fake closes its listener and every open connection at cleanup and joins
// the goroutines.
type fake struct {
	ln      net.Listener
	accepts atomic.Int64
	mu      sync.Mutex
	conns   map[net.Conn]struct{}
	wg      sync.WaitGroup
}

func startFake(t testing.TB, serve func(n int64, c net.Conn, br *bufio.Reader)) *fake {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fake{ln: ln, conns: make(map[net.Conn]struct{})}
	f.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n := f.accepts.Add(1)
			f.mu.Lock()
			f.conns[c] = struct{}{}
			f.mu.Unlock()
			f.wg.Go(func() {
				defer c.Close()
				serve(n, c, bufio.NewReader(c))
			})
		}
	})
	t.Cleanup(func() {
		ln.Close()
		f.mu.Lock()
		for c := range f.conns {
			c.Close()
		}
		f.mu.Unlock()
		f.wg.Wait()
	})
	return f
}

func (f *fake) URL() string { return "http://" + f.ln.Addr().String() }

// readReq reads one request from br, reporting false at EOF or on error.
func readReq(br *bufio.Reader) bool {
	var req fasthttp.Request
	return req.Read(br) == nil
}

// sseEvents splits a stream body into its data payloads up to [DONE].
func sseEvents(t testing.TB, body string) []string {
	t.Helper()
	var out []string
	for _, ev := range strings.Split(body, "\n\n") {
		if ev == "" {
			continue
		}
		data, ok := strings.CutPrefix(ev, "data: ")
		if !ok {
			t.Fatalf("not an SSE data event: %q", ev)
		}
		out = append(out, data)
	}
	return out
}

func isClosedError(err error) bool {
	var ce *ClosedError
	return errors.As(err, &ce)
}

func isDialError(err error) bool {
	var de *DialError
	return errors.As(err, &de)
}

package stress

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/inferrail/inferrail/bench/loadgen"
)

// client returns a keep-alive client to addr for unary requests, with up to
// conns connections; its idle connections close when the scenario ends.
func (t *T) client(addr string, conns int) *fasthttp.HostClient {
	hc := &fasthttp.HostClient{
		Addr:                addr,
		Name:                "inferrail-stress",
		MaxConns:            conns,
		MaxConnWaitTimeout:  10 * time.Second,
		MaxIdleConnDuration: 500 * time.Millisecond, // its cleaner goroutine exits soon after the last close
		ReadTimeout:         30 * time.Second,
		WriteTimeout:        30 * time.Second,
		MaxResponseBodySize: 64 << 20,
	}
	t.Cleanup(hc.CloseIdleConnections)
	return hc
}

// specN is request i of a workload tagged tag: a completion of exactly
// tokens tokens with a prompt no other request shares.
func specN(tag string, i, tokens int, stream bool) loadgen.Spec {
	return loadgen.Spec{Stream: stream, Usage: stream, MaxTokens: tokens,
		Prompt: tag + " " + strconv.Itoa(i) + ": tell me about the weather in the mountains"}
}

func bodyFor(s loadgen.Spec) []byte { return loadgen.AppendBody(nil, modelName, s) }

// answer is what one unary request brought back.
type answer struct {
	status     int
	replica    string // x-inferrail-replica
	body       []byte
	err        error // the request failed before an answer
	sent, done time.Time
}

// post sends body to path on hc and waits for the whole answer.
func post(hc *fasthttp.HostClient, path string, body []byte, timeout time.Duration) answer {
	return send(hc, fasthttp.MethodPost, path, "application/json", body, timeout)
}

// send is post with another method and content type.
func send(hc *fasthttp.HostClient, method, path, contentType string, body []byte, timeout time.Duration) answer {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.Header.SetMethod(method)
	req.SetRequestURI("http://" + hc.Addr + path)
	req.Header.SetContentType(contentType)
	req.SetBodyRaw(body)
	a := answer{sent: time.Now()}
	a.err = hc.DoTimeout(req, resp, timeout)
	a.done = time.Now()
	if a.err == nil {
		a.status = resp.StatusCode()
		a.replica = string(resp.Header.Peek("X-Inferrail-Replica"))
		a.body = append([]byte(nil), resp.Body()...)
	}
	return a
}

// check is nil when a is a 200 whose body answers spec exactly.
func (a *answer) check(spec loadgen.Spec) error {
	if a.err != nil {
		return a.err
	}
	if a.status != 200 {
		return fmt.Errorf("status %d: %s", a.status, trim(a.body, 160))
	}
	if spec.Stream {
		return loadgen.CheckStream(bytes.NewReader(a.body), spec, nil)
	}
	return loadgen.CheckUnary(bytes.NewReader(a.body), spec)
}

// load is one open-loop run of unary requests.
type load struct {
	*loadgen.OpenLoopResult
	specs   []loadgen.Spec
	answers []answer
}

// openLoop sends n requests at rate, request i to clients[i mod len] with
// spec(i), and keeps every answer. The run's Errs hold transport errors
// only; checkAll judges the answers.
func openLoop(ctx context.Context, clients []*fasthttp.HostClient, rate float64, n int, spec func(i int) loadgen.Spec) (*load, error) {
	l := &load{specs: make([]loadgen.Spec, n), answers: make([]answer, n)}
	bodies := make([][]byte, n)
	for i := range n {
		l.specs[i] = spec(i)
		bodies[i] = bodyFor(l.specs[i])
	}
	r, err := loadgen.RunOpenLoop(ctx, loadgen.Schedule{Rate: rate, N: n}, func(ctx context.Context, i int) error {
		timeout := 30 * time.Second
		if dl, ok := ctx.Deadline(); ok {
			timeout = min(timeout, time.Until(dl))
		}
		l.answers[i] = post(clients[i%len(clients)], l.specs[i].Path(), bodies[i], timeout)
		return l.answers[i].err
	})
	l.OpenLoopResult = r
	return l, err
}

// spread counts the answers by the replica that served them.
func (l *load) spread() map[string]int {
	out := map[string]int{}
	for _, a := range l.answers {
		out[a.replica]++
	}
	return out
}

// checkAll checks every answer against its spec and returns the failures'
// count and their first few distinct texts.
func (l *load) checkAll(include func(i int) bool) (failed int, kinds map[string]int) {
	kinds = map[string]int{}
	for i := range l.answers {
		if include != nil && !include(i) {
			continue
		}
		if err := l.answers[i].check(l.specs[i]); err != nil {
			failed++
			addKind(kinds, err.Error())
		}
	}
	return failed, kinds
}

// okLatencies is the latency, from due time to the end of the answer, of
// every request that passed its check.
func (l *load) okLatencies() []time.Duration {
	out := make([]time.Duration, 0, len(l.answers))
	for i := range l.answers {
		if l.answers[i].check(l.specs[i]) == nil {
			out = append(out, l.Latency[i])
		}
	}
	return out
}

// addKind counts msg in kinds, keeping at most 8 distinct texts.
func addKind(kinds map[string]int, msg string) {
	if len(msg) > 160 {
		msg = msg[:160] + "…"
	}
	if _, seen := kinds[msg]; seen || len(kinds) < 8 {
		kinds[msg]++
	}
}

func trim(b []byte, n int) string {
	s := strings.TrimSpace(string(b))
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// rawConn is one client connection driven by hand: the suite writes exact
// bytes and reads responses with net/http's parser, with no transport
// goroutines, pooling or retries in the way.
type rawConn struct {
	net.Conn
	br *bufio.Reader
}

func dialRaw(ctx context.Context, addr string) (*rawConn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return &rawConn{Conn: c, br: bufio.NewReaderSize(c, 16<<10)}, nil
}

// readResponse reads one response head; its Body reads the rest.
func (c *rawConn) readResponse() (*http.Response, error) { return http.ReadResponse(c.br, nil) }

// postRequest is an HTTP/1.1 POST of a JSON body with the given extra
// header lines ("Name: value").
func postRequest(host, path string, body []byte, extra ...string) []byte {
	b := make([]byte, 0, 160+len(body))
	b = append(b, "POST "+path+" HTTP/1.1\r\nHost: "+host+"\r\nContent-Type: application/json\r\nContent-Length: "...)
	b = strconv.AppendInt(b, int64(len(body)), 10)
	b = append(b, "\r\n"...)
	for _, h := range extra {
		b = append(b, h+"\r\n"...)
	}
	b = append(b, "\r\n"...)
	return append(b, body...)
}

// streamResult is one streamed request's outcome: complete, or cut (it
// ended in the gateway's error event and data: [DONE], in a properly ended
// body), or err for anything else (an unterminated body, a hang past the
// deadline, a stream that ends without its last event).
type streamResult struct {
	replica string
	cut     bool
	err     error
	took    time.Duration
}

// stream sends spec (a streamed request) to addr on a connection of its
// own and checks the whole answer; a cut stream is an error.
func stream(ctx context.Context, addr string, spec loadgen.Spec, deadline time.Time) streamResult {
	res := streamOrCut(ctx, addr, spec, deadline)
	if res.cut && res.err == nil {
		res.err = errors.New("the stream ended in an error event")
	}
	return res
}

// streamOrCut sends spec (a streamed request) to addr on a connection of
// its own and reads the whole answer, which may be cut.
func streamOrCut(ctx context.Context, addr string, spec loadgen.Spec, deadline time.Time) (res streamResult) {
	start := time.Now()
	defer func() { res.took = time.Since(start) }()
	c, resp, err := openStream(ctx, addr, spec, deadline)
	if err != nil {
		res.err = err
		return res
	}
	defer c.Close()
	defer resp.Body.Close()
	res.replica = resp.Header.Get("X-Inferrail-Replica")
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		res.err = fmt.Errorf("body after %d bytes: %w", len(body), err)
		return res
	}
	if i := bytes.Index(body, []byte(`data: {"error": `)); i >= 0 {
		res.cut = true
		if !bytes.HasSuffix(body[i:], []byte("}}\n\ndata: [DONE]\n\n")) {
			res.err = fmt.Errorf("an error event not ending the stream: %s", trim(body[i:], 200))
		}
		return res
	}
	rest := bytes.NewReader(body)
	resp.Body = io.NopCloser(rest)
	if res.err = loadgen.Check(resp, spec, nil); res.err == nil && rest.Len() != 0 {
		res.err = fmt.Errorf("%d bytes after the stream's end", rest.Len())
	}
	return res
}

// openStream sends spec to addr on a connection of its own, which ends at
// deadline, and reads the response's head; the caller closes the
// connection.
func openStream(ctx context.Context, addr string, spec loadgen.Spec, deadline time.Time) (*rawConn, *http.Response, error) {
	c, err := dialRaw(ctx, addr)
	if err != nil {
		return nil, nil, err
	}
	c.SetDeadline(deadline)
	if _, err := c.Write(postRequest(addr, spec.Path(), bodyFor(spec))); err != nil {
		c.Close()
		return nil, nil, err
	}
	resp, err := c.readResponse()
	if err != nil {
		c.Close()
		return nil, nil, fmt.Errorf("response head: %w", err)
	}
	return c, resp, nil
}

// every calls fn every interval on a goroutine of wg's until stop is
// closed: the scenarios' pollers and fault togglers that run beside a load.
func every(wg *sync.WaitGroup, stop <-chan struct{}, interval time.Duration, fn func()) {
	wg.Go(func() {
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			fn()
		}
	})
}

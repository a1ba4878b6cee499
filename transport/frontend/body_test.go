package frontend

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// rawExchange writes wire on a connection of its own, then reads up to n
// answers; it returns them and whether the connection was closed after them.
func rawExchange(t *testing.T, addr, wire string, n int) ([]*http.Response, []string, bool) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	go c.Write([]byte(wire))
	br := bufio.NewReader(c)
	var resps []*http.Response
	var bodies []string
	for range n {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("answer %d: %v", len(resps)+1, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resps = append(resps, resp)
		bodies = append(bodies, string(b))
	}
	c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	_, err = br.Peek(1)
	var ne net.Error
	closed := err != nil && !(errors.As(err, &ne) && ne.Timeout())
	return resps, bodies, closed
}

func chunk(s string) string { return fmt.Sprintf("%x\r\n%s\r\n", len(s), s) }

const chunkedHead = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n"

func isAPIError(body string, code int) bool {
	var e struct {
		Error struct {
			Code int `json:"code"`
		} `json:"error"`
	}
	return json.Unmarshal([]byte(body), &e) == nil && e.Error.Code == code
}

// TestChunkedBodies: a chunked body within server.max_body_bytes is served
// as before, on a connection kept alive for the next request; one over it
// is refused with a 413 after at most the limit was read, and the
// connection is closed, so the rest is never parsed as a request.
func TestChunkedBodies(t *testing.T) {
	g := start(t, 1, nil, func(c *gwConfig) {
		c.Server.MaxBodyBytes = 1024
	})
	body := `{"prompt":"hello","max_tokens":2}`
	// Within the limit, in small chunks with a trailer, then a pipelined
	// request on the same connection.
	var w strings.Builder
	w.WriteString(chunkedHead + "\r\n")
	for i := 0; i < len(body); i += 5 {
		w.WriteString(chunk(body[i:min(i+5, len(body))]))
	}
	w.WriteString("0\r\nX-Trailer: t\r\n\r\n")
	w.WriteString("GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
	resps, bodies, _ := rawExchange(t, g.addr, w.String(), 2)
	if resps[0].StatusCode != 200 || !strings.Contains(bodies[0], `"text_completion"`) || resps[0].Close {
		t.Fatalf("chunked body: %d close=%v %s", resps[0].StatusCode, resps[0].Close, bodies[0])
	}
	if resps[1].StatusCode != 200 {
		t.Fatalf("request after a chunked body: %d %s", resps[1].StatusCode, bodies[1])
	}
	// Exactly the limit is within it.
	exact := `{"prompt":"` + strings.Repeat("x", 1024-len(`{"prompt":"","max_tokens":1}`)) + `","max_tokens":1}`
	resps, bodies, _ = rawExchange(t, g.addr, chunkedHead+"\r\n"+chunk(exact)+"0\r\n\r\n", 1)
	if resps[0].StatusCode != 200 {
		t.Fatalf("body of exactly the limit: %d %s", resps[0].StatusCode, bodies[0])
	}
	// A body the local routes do not read is read and limited all the same.
	resps, bodies, _ = rawExchange(t, g.addr, "GET /health HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"+chunk("abc")+"0\r\n\r\n", 1)
	if resps[0].StatusCode != 200 {
		t.Fatalf("GET with a body: %d %s", resps[0].StatusCode, bodies[0])
	}

	// Over the limit: one byte over, far over in one chunk, in many, and
	// declared by a Content-Length (with a multipart type, which fasthttp
	// would otherwise read into a form); a request smuggled after the
	// body gets no answer.
	smuggled := "GET /health HTTP/1.1\r\nHost: x\r\n\r\n"
	over := []string{
		chunkedHead + "\r\n" + chunk(exact+"x") + "0\r\n\r\n" + smuggled,
		chunkedHead + "\r\n" + chunk(strings.Repeat("x", 64<<10)) + "0\r\n\r\n" + smuggled,
		chunkedHead + "\r\n" + strings.Repeat(chunk("x"), 4096) + "0\r\n\r\n" + smuggled,
		"GET /health HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" + chunk(strings.Repeat("x", 2000)) + "0\r\n\r\n" + smuggled,
		"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary=b\r\nContent-Length: 2000\r\n\r\n" +
			"--b\r\nContent-Disposition: form-data; name=\"f\"; filename=\"f\"\r\n\r\n" + strings.Repeat("x", 1900) + "\r\n--b--\r\n" + smuggled,
	}
	for i, wire := range over {
		resps, bodies, closed := rawExchange(t, g.addr, wire, 1)
		if resps[0].StatusCode != 413 || !isAPIError(bodies[0], 413) || !resps[0].Close || !closed {
			t.Fatalf("over the limit %d: %d close=%v closed=%v %s", i, resps[0].StatusCode, resps[0].Close, closed, bodies[0])
		}
	}
	// A chunked body sent after 100 Continue.
	resps, bodies, _ = rawExchange(t, g.addr, chunkedHead+"Expect: 100-continue\r\n\r\n"+chunk(exact+"x")+"0\r\n\r\n", 2)
	if resps[0].StatusCode != 100 || resps[1].StatusCode != 413 || !isAPIError(bodies[1], 413) {
		t.Fatalf("100-continue, over the limit: %d %d %s", resps[0].StatusCode, resps[1].StatusCode, bodies[1])
	}
	resps, bodies, _ = rawExchange(t, g.addr, chunkedHead+"Expect: 100-continue\r\n\r\n"+chunk(body)+"0\r\n\r\n", 2)
	if resps[0].StatusCode != 100 || resps[1].StatusCode != 200 {
		t.Fatalf("100-continue, within the limit: %d %d %s", resps[0].StatusCode, resps[1].StatusCode, bodies[1])
	}
	// Broken chunked framing.
	for _, wire := range []string{
		chunkedHead + "\r\nzz\r\n" + body + "\r\n0\r\n\r\n",
		chunkedHead + "\r\n" + "5\r\nabcdefgh\r\n0\r\n\r\n",
	} {
		resps, bodies, _ := rawExchange(t, g.addr, wire, 1)
		if resps[0].StatusCode != 400 || !isAPIError(bodies[0], 400) || !resps[0].Close {
			t.Fatalf("%q: %d %s", wire, resps[0].StatusCode, bodies[0])
		}
	}
}

// TestSlowBodies: a body that stalls after fasthttp handed it over, chunked
// or past the part fasthttp reads ahead, still ends at
// server.request_timeout with a 408.
func TestSlowBodies(t *testing.T) {
	g := start(t, 1, nil, func(c *gwConfig) {
		c.Server.MaxBodyBytes = 1 << 20
		c.Server.RequestTimeout = 300 * time.Millisecond
	})
	for _, head := range []string{
		chunkedHead + "\r\n" + chunk(`{"prompt":"`),
		chunkedHead + "\r\n" + chunk(`{"prompt":"`) + "1",
		"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n" + strings.Repeat("x", 50000),
	} {
		c, err := net.Dial("tcp", g.addr)
		if err != nil {
			t.Fatal(err)
		}
		t0 := time.Now()
		io.WriteString(c, head)
		c.SetReadDeadline(time.Now().Add(3 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		c.Close()
		if err != nil {
			t.Fatalf("%.40q: %v", head, err)
		}
		if resp.StatusCode != 408 || !resp.Close {
			t.Fatalf("%.40q: %d close=%v", head, resp.StatusCode, resp.Close)
		}
		if d := time.Since(t0); d > 2*time.Second {
			t.Fatalf("%.40q: answered after %v", head, d)
		}
	}
}

// stepReader returns its data in reads of random sizes, some empty.
type stepReader struct {
	data []byte
	rng  *rand.Rand
}

func (r *stepReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	if len(p) == 0 || r.rng.IntN(8) == 0 {
		return 0, nil
	}
	n := min(len(p), len(r.data), 1+r.rng.IntN(200000))
	copy(p, r.data[:n])
	r.data = r.data[n:]
	return n, nil
}

// FuzzReadLimited: readLimited returns the body as it is within the limit,
// refuses it past the limit after reading at most one byte more, and
// reads exactly a known length.
func FuzzReadLimited(f *testing.F) {
	f.Add([]byte("hello"), uint32(5), uint64(1), false)
	f.Add([]byte("hello"), uint32(4), uint64(2), false)
	f.Add([]byte("hello"), uint32(100), uint64(3), true)
	f.Add(bytes.Repeat([]byte("ab"), bodySegment), uint32(bodySegment*2), uint64(4), false)
	f.Add(bytes.Repeat([]byte("ab"), bodySegment), uint32(bodySegment*2-1), uint64(5), false)
	f.Add(bytes.Repeat([]byte("ab"), bodySegment), uint32(bodySegment), uint64(6), false)
	f.Add([]byte{}, uint32(0), uint64(7), false)
	f.Fuzz(func(t *testing.T, data []byte, limit uint32, seed uint64, known bool) {
		// Stretch small inputs over several segments now and then.
		if seed%5 == 0 && len(data) > 0 && len(data) < 1000 {
			data = bytes.Repeat(data, 1+3*bodySegment/len(data))
			limit *= uint32(1 + 3*bodySegment/len(data))
		}
		r := &stepReader{data: data, rng: rand.New(rand.NewPCG(seed, 1))}
		n := -1
		if known {
			n = len(data)
			if int64(n) > int64(limit) {
				return // refused from the header
			}
		}
		cr := &countReader{r: r}
		got, err := readLimited(cr, n, int64(limit))
		switch {
		case len(data) > int(limit):
			if !errors.Is(err, fasthttp.ErrBodyTooLarge) {
				t.Fatalf("%d bytes, limit %d: %v", len(data), limit, err)
			}
			if cr.n > int64(limit)+1 {
				t.Fatalf("%d bytes, limit %d: read %d", len(data), limit, cr.n)
			}
		case err != nil && !errors.Is(err, errNoProgress):
			t.Fatalf("%d bytes, limit %d: %v", len(data), limit, err)
		case err == nil && !bytes.Equal(got, data):
			t.Fatalf("%d bytes, limit %d: got %d bytes, not the body", len(data), limit, len(got))
		}
	})
}

type countReader struct {
	r io.Reader
	n int64
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// A body that breaks off is not one.
func TestReadLimitedTruncated(t *testing.T) {
	r := io.MultiReader(strings.NewReader("abc"), iotestErr{io.ErrUnexpectedEOF})
	if _, err := readLimited(r, -1, 100); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("chunked: %v", err)
	}
	if _, err := readLimited(strings.NewReader("abc"), 5, 100); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("known length: %v", err)
	}
}

type iotestErr struct{ err error }

func (e iotestErr) Read([]byte) (int, error) { return 0, e.err }

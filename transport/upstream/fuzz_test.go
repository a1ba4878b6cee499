package upstream

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// FuzzResponse sends arbitrary bytes as a replica's answer. upstream parses
// nothing itself (fasthttp reads the head and de-chunks the body), so this
// checks the Pool and Response around it: no panic, no hang, a conn that is
// out of step never reused; and where net/http's parser accepts the same
// bytes, the same status and body.
func FuzzResponse(f *testing.F) {
	for _, s := range []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;x=1\r\nhello\r\n0\r\nX-T: 1\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n" +
			"e\r\ndata: {\"a\":1}\n\n\r\ne\r\ndata: [DONE]\n\n\r\n0\r\n\r\n",
		"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nx",
		"HTTP/1.1 204 No Content\r\n\r\n",
		"HTTP/1.0 200 OK\r\n\r\nuntil close",
		"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 5\r\nConnection: close\r\n\r\nbusy!",
		"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
		"HTTP/1.1 200",
		"",
	} {
		f.Add([]byte(s))
	}
	inputs := make(chan []byte)
	fk := startFake(f, func(_ int64, c net.Conn, br *bufio.Reader) {
		if !readReq(br) {
			return
		}
		if in, ok := <-inputs; ok {
			c.Write(in)
		}
	})
	f.Cleanup(func() { close(inputs) })
	p := newPool(f, fk.URL(), Options{})

	f.Fuzz(func(t *testing.T, in []byte) {
		req := newReq(chatPath, chatBody)
		defer fasthttp.ReleaseRequest(req)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		ch := doAsync(ctx, p, req)
		// The fake takes one input per connection it serves; a stale
		// connection's retry takes a second.
		var r result
	feed:
		for {
			select {
			case inputs <- in:
			case r = <-ch:
				break feed
			}
		}
		if ctx.Err() != nil {
			t.Fatal("Do hung")
		}
		if r.err != nil {
			return
		}
		body, err := io.ReadAll(r.resp)
		status := r.resp.StatusCode()
		r.resp.Close()
		if ctx.Err() != nil {
			t.Fatal("body read hung")
		}
		if err != nil {
			return
		}

		hr, herr := http.ReadResponse(bufio.NewReader(bytes.NewReader(in)), &http.Request{Method: "POST"})
		if herr != nil {
			return
		}
		hbody, herr := io.ReadAll(hr.Body)
		hr.Body.Close()
		if herr != nil || hr.StatusCode < 200 {
			return
		}
		if hr.StatusCode != status || !bytes.Equal(hbody, body) {
			t.Fatalf("net/http reads status %d body %q; upstream reads %d %q", hr.StatusCode, hbody, status, body)
		}
	})
}

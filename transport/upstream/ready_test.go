package upstream

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http/httputil"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// Ready is true exactly while what the engine sent together is buffered:
// two chunks in one write read as two, Ready between them; after the second,
// with the engine silent, Ready is false; the last chunk, sent later, ends
// the body.
func TestReady(t *testing.T) {
	more := make(chan struct{})
	f := startFake(t, func(_ int64, c net.Conn, br *bufio.Reader) {
		if !readReq(br) {
			return
		}
		c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n" +
			"7\r\ndata: 1\r\n7\r\ndata: 2\r\n"))
		<-more
		c.Write([]byte("7\r\ndata: 3\r\n0\r\n\r\n"))
		br.ReadByte() // until the client goes
	})
	p := newPool(t, f.URL(), Options{})
	req := newReq(chatPath, chatBody)
	defer fasthttp.ReleaseRequest(req)
	resp, err := p.Do(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Close()
	buf := make([]byte, 64)
	read := func(want string) {
		t.Helper()
		n, err := resp.Read(buf)
		if err != nil || string(buf[:n]) != want {
			t.Fatalf("read %q, %v; want %q", buf[:n], err, want)
		}
	}
	// The head and both chunks may come in one read or two.
	waitFor(t, "both chunks buffered", 2*time.Second, func() bool { return resp.c.br.Buffered() >= 24 })
	read("data: 1")
	if !resp.Ready() {
		t.Fatal("not ready with the second chunk buffered")
	}
	read("data: 2")
	if resp.Ready() {
		t.Fatal("ready with nothing buffered")
	}
	close(more)
	read("data: 3")
	if n, err := resp.Read(buf); n != 0 || err != io.EOF {
		t.Fatalf("end: %d %v", n, err)
	}
}

// FuzzWholeChunk: whatever wholeChunk accepts, a chunked reader reads the
// first chunk of whole, from those bytes alone (or its end, for the last).
func FuzzWholeChunk(f *testing.F) {
	for _, s := range []string{"5\r\nhello\r\n", "0\r\n\r\n", "a\r\n0123456789\r\n", "5\r\nhel", "5;x\r\nhello\r\n",
		"0\r\nX: 1\r\n\r\n", "\r\n", "ffffffff\r\n", "F\r\n0123456789abcde\r\nrest"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !wholeChunk(b) {
			return
		}
		line, _, _ := bytes.Cut(b, []byte("\r\n"))
		size := 0
		for _, c := range line {
			d, _ := hexDigit(c)
			size = size<<4 | d
		}
		cr := httputil.NewChunkedReader(bytes.NewReader(b))
		got := make([]byte, size)
		if _, err := io.ReadFull(cr, got); err != nil {
			t.Fatalf("%q: accepted, but a chunk of %d did not read: %v", b, size, err)
		}
		if size == 0 {
			if n, err := cr.Read(make([]byte, 1)); n != 0 || err != io.EOF {
				t.Fatalf("%q: accepted as the last chunk, read %d, %v", b, n, err)
			}
		}
	})
}

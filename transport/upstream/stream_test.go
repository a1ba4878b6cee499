package upstream

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// plan is one response the fake upstream sends: wire bytes cut into pieces,
// written with a pause before each.
type plan struct {
	pieces [][]byte
	pauses []time.Duration
}

// encode frames payload as a response, chunked with random chunk sizes,
// extensions and trailers, or with a Content-Length, and cuts the wire bytes
// at random places, independent of the chunk boundaries.
func encode(rng *rand.Rand, payload []byte, chunked bool) plan {
	var w bytes.Buffer
	if chunked {
		w.WriteString("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
		for rest := payload; len(rest) > 0; {
			n := 1 + rng.IntN(min(len(rest), 1+rng.IntN(3000)))
			switch rng.IntN(4) {
			case 0:
				fmt.Fprintf(&w, "%X", n)
			case 1:
				fmt.Fprintf(&w, "%x;ext=%d", n, rng.IntN(9))
			default:
				fmt.Fprintf(&w, "%x", n)
			}
			w.WriteString("\r\n")
			w.Write(rest[:n])
			w.WriteString("\r\n")
			rest = rest[n:]
		}
		w.WriteString("0\r\n")
		if rng.IntN(4) == 0 {
			w.WriteString("X-Checksum: abc\r\n")
		}
		w.WriteString("\r\n")
	} else {
		fmt.Fprintf(&w, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", len(payload))
		w.Write(payload)
	}
	wire := w.Bytes()
	var p plan
	for len(wire) > 0 {
		n := 1 + rng.IntN(min(len(wire), 1+rng.IntN(2000)))
		p.pieces = append(p.pieces, wire[:n])
		var pause time.Duration
		if rng.IntN(3) == 0 {
			pause = time.Duration(rng.IntN(1000)) * time.Microsecond
		}
		p.pauses = append(p.pauses, pause)
		wire = wire[n:]
	}
	return p
}

// Property: whatever the framing and however the replica's writes are cut
// and spaced, the reader gets exactly the payload, and the connection stays
// in step for the next response.
func TestBodyBytesUnchangedUnderAnyChunking(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	plans := make(chan plan)
	f := startFake(t, func(_ int64, c net.Conn, br *bufio.Reader) {
		for readReq(br) {
			p, ok := <-plans
			if !ok {
				return
			}
			for i, piece := range p.pieces {
				if p.pauses[i] > 0 {
					time.Sleep(p.pauses[i])
				}
				if _, err := c.Write(piece); err != nil {
					return
				}
			}
		}
	})
	defer close(plans)
	p := newPool(t, f.URL(), Options{})
	iterations := 300
	if testing.Short() {
		iterations = 50
	}
	for i := range iterations {
		payload := make([]byte, rng.IntN(20000))
		// Bytes that look like framing make a mistake show.
		const alphabet = "0123456789abcdef\r\n;: data[DONE]\x00\xff"
		for j := range payload {
			payload[j] = alphabet[rng.IntN(len(alphabet))]
		}
		chunked := rng.IntN(2) == 0
		pl := encode(rng, payload, chunked)

		req := newReq(chatPath, chatBody)
		ch := doAsync(context.Background(), p, req)
		plans <- pl
		r := <-ch
		fasthttp.ReleaseRequest(req)
		if r.err != nil {
			t.Fatalf("iteration %d: %v", i, r.err)
		}
		if r.resp.Chunked() != chunked {
			t.Fatalf("iteration %d: chunked=%v", i, r.resp.Chunked())
		}
		var got []byte
		buf := make([]byte, 1+rng.IntN(5000))
		for {
			n, err := r.resp.Read(buf[:1+rng.IntN(len(buf))])
			got = append(got, buf[:n]...)
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("iteration %d: %v", i, err)
			}
		}
		r.resp.Close()
		if !bytes.Equal(got, payload) {
			t.Fatalf("iteration %d (chunked=%v, %d pieces): got %d bytes, want %d", i, chunked,
				len(pl.pieces), len(got), len(payload))
		}
	}
	if n := f.accepts.Load(); n != 1 {
		t.Fatalf("%d connections for %d responses, want 1", n, iterations)
	}
}

// Each event reaches the reader while the replica still holds the next one:
// nothing waits for more bytes to fill a buffer.
func TestEventsDeliveredAsSent(t *testing.T) {
	const events = 50
	next := make(chan struct{})
	f := startFake(t, func(_ int64, c net.Conn, br *bufio.Reader) {
		if !readReq(br) {
			return
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
		for i := range events {
			ev := fmt.Sprintf("data: {\"i\":%d}\n\n", i)
			// The chunk header, data and CRLF as separate writes, as a
			// server without a write buffer would send them.
			fmt.Fprintf(c, "%x\r\n", len(ev))
			io.WriteString(c, ev)
			io.WriteString(c, "\r\n")
			select {
			case <-next:
			case <-time.After(2 * time.Second):
				return
			}
		}
		io.WriteString(c, "0\r\n\r\n")
	})
	p := newPool(t, f.URL(), Options{})
	req := newReq(chatPath, streamBody)
	defer fasthttp.ReleaseRequest(req)
	resp, err := p.Do(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Close()
	buf := make([]byte, 4096)
	for i := range events {
		want := fmt.Sprintf("data: {\"i\":%d}\n\n", i)
		var got []byte
		for len(got) < len(want) {
			n, err := resp.Read(buf)
			if err != nil {
				t.Fatalf("event %d: %v after %q", i, err, got)
			}
			got = append(got, buf[:n]...)
		}
		if string(got) != want {
			t.Fatalf("event %d: %q, want %q", i, got, want)
		}
		next <- struct{}{}
	}
	if b, err := io.ReadAll(resp); err != nil || len(b) != 0 {
		t.Fatalf("after the last event: %q %v", b, err)
	}
}

package upstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/valyala/fasthttp"
)

var errResponseClosed = errors.New("upstream: read from a closed response")

var _ io.Reader = (*Response)(nil)

// aLongTimeAgo is a read deadline that makes a socket read fail at once, so
// that only bytes already buffered can be consumed.
var aLongTimeAgo = time.Unix(1, 0)

// Response is a response whose head has arrived and whose body streams from
// the connection. It is owned by one goroutine: Read and Close must not run
// concurrently (to interrupt a blocked Read from elsewhere, cancel the
// request's context). Close must be called.
type Response struct {
	// Header is the response head as the replica sent it (status, headers,
	// framing). It is valid until Close.
	Header *fasthttp.ResponseHeader

	p    *Pool
	c    *conn
	fr   *fasthttp.Response
	body io.Reader // fasthttp's de-chunking stream over c.br; nil without a body
	ctx  context.Context
	stop registration // of the function that closes c on ctx cancel

	keepAlive bool
	// short is set when the last Read returned less than asked with no
	// error: fasthttp's de-chunking stops short only at a chunk's end
	// (its CRLF read) or with nothing left buffered.
	short bool
	// err is sticky: io.EOF once the body has been read to its end, the
	// error that stopped it, or errResponseClosed after Close.
	err    error
	closed bool
}

// StatusCode is the response status.
func (r *Response) StatusCode() int { return r.Header.StatusCode() }

// Chunked reports whether the body comes with Transfer-Encoding: chunked.
// Read returns it de-chunked; a relay re-frames it for its own client.
func (r *Response) Chunked() bool { return r.Header.ContentLength() == -1 }

// ContentLength is the body's Content-Length, or -1 when the body is chunked
// or runs until the connection closes.
func (r *Response) ContentLength() int64 {
	if n := r.Header.ContentLength(); n >= 0 {
		return int64(n)
	}
	return -1
}

// Read reads the body: exactly the payload bytes the replica sent,
// de-chunked, returning as soon as any have arrived. At the end of the body
// it returns io.EOF. After a cancelled context its error wraps ctx.Err(); when
// the replica breaks the stream it wraps the cause (io.ErrUnexpectedEOF for a
// truncated body).
func (r *Response) Read(b []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	n, err := r.body.Read(b)
	r.short = err == nil && n < len(b)
	if err != nil {
		switch {
		case err == io.EOF:
			r.err = io.EOF
		case r.ctx.Err() != nil:
			r.err = ctxError(r.p.addr, r.ctx)
		default:
			r.err = fmt.Errorf("upstream %s: read body: %w", r.p.addr, err)
		}
		return n, r.err
	}
	return n, nil
}

// Ready reports whether the next Read returns at once, from bytes already
// buffered: the rest of a Content-Length body, or (after a Read that
// returned less than it was asked for, which ends at a chunk's end) a whole
// next chunk or the body's end. A relay that reads on while Ready passes
// on what the engine sent together in one write, and never waits for more.
// False means the next Read may wait on the socket.
func (r *Response) Ready() bool {
	if r.err != nil || r.c == nil {
		return false
	}
	buffered := r.c.br.Buffered()
	if buffered == 0 {
		return false
	}
	if !r.Chunked() {
		return r.Header.ContentLength() >= 0
	}
	if !r.short {
		return false // perhaps inside a chunk
	}
	b, _ := r.c.br.Peek(buffered)
	return wholeChunk(b)
}

// wholeChunk reports whether b starts with a whole chunk: a hex size of at
// most eight digits with no extension, CRLF, that many bytes and CRLF; or
// the last chunk, 0 and CRLF, with no trailer.
func wholeChunk(b []byte) bool {
	size, i := 0, 0
	for i < len(b) && i < 8 {
		d, ok := hexDigit(b[i])
		if !ok {
			break
		}
		size = size<<4 | d
		i++
	}
	if i == 0 || len(b) < i+2 || b[i] != '\r' || b[i+1] != '\n' {
		return false
	}
	rest := b[i+2:]
	if size == 0 {
		return len(rest) >= 2 && rest[0] == '\r' && rest[1] == '\n'
	}
	return len(rest) >= size+2 && rest[size] == '\r' && rest[size+1] == '\n'
}

func hexDigit(c byte) (int, bool) {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0'), true
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10, true
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10, true
	}
	return 0, false
}

// Close releases the response. The connection goes back to the pool when the
// body was read to its end (or its end is already buffered) and both sides
// allow keep-alive; otherwise it is closed, which tells the engine to abort
// the request. Close is idempotent.
func (r *Response) Close() {
	if r.closed {
		return
	}
	r.closed = true
	reuse := r.keepAlive
	if !r.stop.clear() {
		reuse = false // the context fired: the conn is closed or closing
	}
	if reuse && r.err != io.EOF {
		reuse = r.err == nil && r.finishBuffered()
	}
	r.fr.CloseBodyStream()
	fasthttp.ReleaseResponse(r.fr)
	r.fr, r.body, r.Header = nil, nil, nil
	r.err = errResponseClosed
	if reuse {
		r.p.put(r.c)
	} else {
		r.c.close()
	}
	r.c = nil
}

// finishBuffered reads the rest of the body when it has already arrived, as
// when a relay stops at an SSE stream's [DONE] and the chunked terminator sits
// in the buffer. It never waits on the socket.
func (r *Response) finishBuffered() bool {
	if r.c.br.Buffered() == 0 {
		return false
	}
	if r.c.nc.SetReadDeadline(aLongTimeAgo) != nil {
		return false
	}
	var buf [512]byte
	var err error
	for err == nil {
		_, err = r.body.Read(buf[:])
	}
	return err == io.EOF && r.c.nc.SetReadDeadline(time.Time{}) == nil
}

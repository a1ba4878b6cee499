package frontend

import (
	"errors"
	"io"
	"sync"

	"github.com/valyala/fasthttp"
)

// Request bodies are read here, not by fasthttp: the server streams them
// (fasthttp.Server.StreamRequestBody), and readBody reads each one from its
// stream before the request is routed, as fasthttp would have, but within
// server.max_body_bytes. fasthttp grows a chunked body's buffer by doubling
// and copying until it passes the limit, so that a chunked body over the
// limit held about three times the limit before it was refused; here it
// holds at most the limit and one segment.
//
// With streaming on, fasthttp reads at most 8 KiB of a body before the
// handler runs (none of a chunked one), also when its Content-Length is over
// the limit; readBody refuses those from the header. Anything of a refused
// body left unread is never parsed as a request: the answer closes the
// connection. The connection's read deadline, server.request_timeout from
// the request's first byte, bounds reading the body here as it did in
// fasthttp, so a body that stalls still gets a 408.

// bodySegment is the size of the pooled buffers a chunked body is read into.
const bodySegment = 64 << 10

var bodySegments = sync.Pool{New: func() any { return new([bodySegment]byte) }}

// readBody reads the request's body into memory and sets it as the
// request's body. A body over server.max_body_bytes, one that breaks off or
// stalls, and a malformed chunked body are answered as readError answers
// them (413, 400, 408), and readBody reports false.
func (s *Server) readBody(ctx *fasthttp.RequestCtx) bool {
	stream := ctx.RequestBodyStream()
	if stream == nil {
		// No body: neither a Content-Length nor Transfer-Encoding.
		return true
	}
	limit := s.cfg.Server.MaxBodyBytes
	n := ctx.Request.Header.ContentLength()
	if n >= 0 && int64(n) > limit {
		s.readError(ctx, fasthttp.ErrBodyTooLarge)
		return false
	}
	body, err := readLimited(stream, n, limit)
	if err != nil {
		s.readError(ctx, err)
		return false
	}
	ctx.Request.SetBodyRaw(body)
	return true
}

// readLimited reads a body from r: exactly n bytes when n ≥ 0 (a
// Content-Length, already checked against limit), else up to io.EOF, when
// it returns fasthttp.ErrBodyTooLarge once more than limit bytes arrived. A
// known length is read into a buffer of that size; a body of unknown length
// into pooled segments, which are never more than limit+1 bytes together,
// and then into one buffer of its size.
func readLimited(r io.Reader, n int, limit int64) ([]byte, error) {
	if n >= 0 {
		b := make([]byte, n)
		m, err := fill(r, b)
		if m < n {
			if err == nil || err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
		return b, nil
	}
	var segs []*[bodySegment]byte
	defer func() {
		for _, seg := range segs {
			bodySegments.Put(seg)
		}
	}()
	var total int64
	last := 0 // bytes in the last segment
	for {
		seg := bodySegments.Get().(*[bodySegment]byte)
		segs = append(segs, seg)
		// Read no more than one byte past the limit.
		want := bodySegment
		if room := limit - total; room < bodySegment {
			want = int(room) + 1
		}
		m, err := fill(r, seg[:want])
		total += int64(m)
		last = m
		if total > limit {
			return nil, fasthttp.ErrBodyTooLarge
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	b := make([]byte, 0, total)
	for i, seg := range segs {
		if i < len(segs)-1 {
			b = append(b, seg[:]...)
		} else {
			b = append(b, seg[:last]...)
		}
	}
	return b, nil
}

// errNoProgress: a body reader returned nothing, and no error, too often.
var errNoProgress = errors.New("the request body stream made no progress")

// fill reads into b until it is full or r fails; io.EOF is returned as it is.
func fill(r io.Reader, b []byte) (int, error) {
	n, empty := 0, 0
	for n < len(b) {
		m, err := r.Read(b[n:])
		n += m
		if err != nil {
			return n, err
		}
		if m == 0 {
			if empty++; empty >= 100 {
				return n, errNoProgress
			}
		}
	}
	return n, nil
}

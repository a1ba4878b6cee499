package frontend

import (
	"bytes"
	"errors"
	"io"
	"net"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/inferrail/inferrail/actors/fleet"
	"github.com/inferrail/inferrail/model/openai"
	"github.com/inferrail/inferrail/transport/telemetry"
	"github.com/inferrail/inferrail/transport/tracing"
	"github.com/inferrail/inferrail/transport/upstream"
)

// relayStream is a streamed response's body: fasthttp's server reads it
// (Response.SetBodyStream) and writes each read to the client as a chunk,
// flushed, so that each SSE event leaves as soon as the engine sent it;
// events the engine sent together (upstream.Response.Ready) leave together,
// in one write. It
// reads the engine's body on the server's own goroutine, where
// SetBodyStreamWriter had a goroutine and a pipe per response, and a
// hand-off between them per event (issue 16's profile).
//
// Once the body's last byte has gone to the client (an event stream's
// data: [DONE] event, or a Content-Length body's last byte), the response
// is complete whatever happens next: a client that leaves at once, as many
// do on [DONE], while the engine's closing chunk is still on its way, is
// not a cancellation, and the attempt is ok. What the relay passes on is
// never changed, but for the usage chunk of a stream whose usage the
// gateway asked for (r.stripUsage), which it removes; the tail it keeps is
// bounded and holds nothing per token.
//
// fasthttp closes it once (CloseWithError) when the response is written or
// dropped; that ends the attempt: its outcome, usage, lease and spans.
// Read and CloseWithError run on the connection's goroutine.
type relayStream struct {
	s      *Server
	r      *request
	d      fleet.Decision
	resp   *upstream.Response
	actx   *attemptCtx
	conn   net.Conn
	series *telemetry.Series
	ok     fleet.Outcome // the outcome of a complete response
	status int
	rb     *relayBuf

	sse, strip   bool
	length, sent int64
	first        bool
	out          []byte // read from the engine, not yet returned
	// end is what Read returns once out is drained: io.EOF, or the error
	// that broke the response off; outcome, usage and found are the
	// attempt's, set with it.
	end     error
	outcome fleet.Outcome
	usage   openai.Usage
	found   bool
}

var _ fasthttp.ReadCloserWithError = (*relayStream)(nil)

// errRelayCancelled breaks off a response whose client has gone.
var errRelayCancelled = errors.New("the client disconnected")

func (s *Server) newRelay(r *request, d fleet.Decision, resp *upstream.Response, actx *attemptCtx,
	conn net.Conn, series *telemetry.Series, ok fleet.Outcome, status int) *relayStream {
	rb := relayBufs.Get().(*relayBuf)
	rb.tail.Reset()
	rb.head.n = 0
	rs := &r.relay
	*rs = relayStream{s: s, r: r, d: d, resp: resp, actx: actx, conn: conn, series: series, ok: ok,
		status: status, rb: rb, first: true, length: resp.ContentLength()}
	rs.sse = bytes.HasPrefix(resp.Header.ContentType(), []byte("text/event-stream"))
	rs.strip = rs.sse && r.stripUsage && resp.StatusCode() == fasthttp.StatusOK
	if rs.strip {
		rb.strip.Flush(nil) // empties it
	}
	return rs
}

// Read returns what the engine sent next, as it came (but for a stripped
// usage chunk), waiting for it when nothing is buffered.
func (rs *relayStream) Read(p []byte) (int, error) {
	for len(rs.out) == 0 {
		if rs.end != nil {
			return 0, rs.end
		}
		rs.step()
	}
	n := copy(p, rs.out)
	rs.out = rs.out[n:]
	return n, nil
}

// pass sets out to p as the client gets it.
func (rs *relayStream) pass(p []byte) {
	if rs.strip {
		rs.rb.out = rs.rb.strip.Write(rs.rb.out[:0], p)
		p = rs.rb.out
	}
	rs.out = p
}

// step reads the engine once: out gets what came, and at the body's end
// (or when it broke off) end is set.
func (rs *relayStream) step() {
	buf, tail, head, r := rs.rb.b[:], &rs.rb.tail, &rs.rb.head, rs.r
	n, err := rs.resp.Read(buf)
	// What the engine sent together goes out in one chunk and one flush;
	// nothing waits for more.
	for err == nil && n < len(buf) && rs.resp.Ready() {
		var m int
		m, err = rs.resp.Read(buf[n:])
		n += m
	}
	if n > 0 {
		if rs.first {
			ttft := time.Since(r.start)
			rs.series.TTFT.Update(ttft.Seconds())
			if rs.sse {
				rs.d.ReportFirstToken(r.start.Add(ttft))
			}
			if rs.d.Predicted {
				r.met.TTFTRatio(rs.d.Estimate, ttft)
			}
			r.up.Event(tracing.FirstChunk)
			rs.first = false
		}
		rs.pass(buf[:n])
		rs.sent += int64(n)
		if rs.sse {
			tail.Write(buf[:n])
			if r.messages || r.responses {
				head.Write(buf[:n])
			}
		}
	}
	switch {
	case err == nil:
		return
	case errors.Is(err, io.EOF), rs.complete():
	case errors.Is(rs.actx.Cause(), errClientGone):
		rs.stop(fleet.OutcomeCancelled, errRelayCancelled)
		return
	default:
		// The engine broke the stream: cut the client's connection so
		// that it sees a truncated response, not a complete one.
		rs.conn.Close()
		rs.stop(fleet.OutcomeFailed, errEngineBroke)
		return
	}
	if rs.strip {
		// What an unfinished last event held goes out as it came.
		rs.rb.out = rs.rb.strip.Flush(append(rs.rb.out[:0], rs.out...))
		rs.out = rs.rb.out
		rs.strip = false
	}
	rs.finishBody()
}

// finishBody ends a body the client has had whole: ok, with the usage of a
// complete 200 event stream's final usage chunk when it has one.
func (rs *relayStream) finishBody() {
	r := rs.r
	rs.stop(rs.ok, io.EOF)
	rs.s.remember(r, rs.d.Replica, rs.resp.StatusCode(), rs.rb.head.b[:rs.rb.head.n])
	if rs.sse && rs.resp.StatusCode() == fasthttp.StatusOK {
		if rs.usage, rs.found = r.streamUsage(&rs.rb.head, &rs.rb.tail); rs.found {
			r.usage(rs.usage)
			if r.tokenized {
				rs.s.checkPrompt(r, rs.d.Replica, rs.series, rs.usage.PromptTokens)
			}
		}
	}
}

// complete reports that the body's last byte has been read.
func (rs *relayStream) complete() bool {
	return rs.sse && rs.r.streamDone(&rs.rb.tail) || rs.length >= 0 && rs.sent == rs.length
}

func (rs *relayStream) stop(o fleet.Outcome, end error) {
	rs.outcome, rs.end = o, end
}

// CloseWithError ends the attempt. fasthttp passes why it stopped writing,
// which the relay's own state tells already: what it has not handed over.
func (rs *relayStream) CloseWithError(error) error {
	if rs.rb == nil {
		return nil
	}
	s, r, d, series := rs.s, rs.r, rs.d, rs.series
	switch {
	case len(rs.out) > 0, rs.end == nil && !rs.complete():
		// fasthttp stopped before the client had the body's last byte:
		// the client has gone (its write failed, or the response was
		// dropped unwritten).
		rs.actx.cancel(errClientGone)
		rs.outcome, rs.usage, rs.found = fleet.OutcomeCancelled, openai.Usage{}, false
	case rs.end == nil:
		// It had the last byte; only the engine's end was still to come.
		rs.finishBody()
	}
	rs.resp.Close()
	rs.actx.cancel(nil)
	s.unwatch(r.w)
	relayBufs.Put(rs.rb)
	rs.rb, rs.out = nil, nil
	o := rs.outcome
	Account(s.fleet, s.log, r.met, series, d, r.policy.PromptTokens, rs.usage, rs.found)
	s.done(r, d, o)
	s.settleLimits(r)
	switch o {
	case fleet.OutcomeCancelled:
		r.met.Disconnects.Inc()
		r.finish(series, telemetry.StatusCancelled)
	case rs.ok:
		r.finish(series, telemetry.StatusClass(rs.status))
	default:
		r.finish(series, telemetry.StatusAborted)
		r.err = errEngineBroke
	}
	r.up.End(rs.status, r.outcome, r.err)
	r.span.End(rs.status, r.outcome, r.err)
	return nil
}

package frontend

import (
	"bytes"
	"errors"
	"io"
	"net"
	"slices"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/inferrail/inferrail/actors/fleet"
	"github.com/inferrail/inferrail/model/anthropic"
	"github.com/inferrail/inferrail/model/openai"
	"github.com/inferrail/inferrail/model/responses"
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
	firstAt      time.Time // when the first byte was relayed
	out          []byte    // read from the engine, not yet returned
	last         [4]byte   // the last bytes the client got, to tell an event's end
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

// errStreamUnfinished is why an event stream whose body ended before its
// last event is cut.
var errStreamUnfinished = errors.New("the engine ended the stream before its last event")

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
	if k := len(rs.last); len(p) >= k {
		copy(rs.last[:], p[len(p)-k:])
	} else {
		copy(rs.last[:], rs.last[len(p):])
		copy(rs.last[k-len(p):], p)
	}
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
			rs.firstAt = time.Now()
			ttft := rs.firstAt.Sub(r.start)
			rs.series.TTFT.Update(ttft.Seconds())
			if rs.sse {
				rs.d.ReportFirstToken(rs.firstAt)
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
	case rs.complete():
	case errors.Is(rs.actx.Cause(), errClientGone):
		rs.stop(fleet.OutcomeCancelled, errRelayCancelled)
		return
	case errors.Is(err, io.EOF) && !(rs.sse && rs.resp.StatusCode() == fasthttp.StatusOK):
	case errors.Is(err, io.EOF):
		// A body that ended well, but an event stream without its last
		// event: the engine stopped mid-stream (a simulator's kill ends
		// the chunked body so).
		rs.cut(errStreamUnfinished)
		return
	default:
		rs.cut(err)
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

// cut ends a response the engine broke off after its first byte (it died,
// reset the connection, or the attempt was cancelled under it: a timeout,
// a failed health check, the shutdown), with err. It is counted by reason
// and logged with the request id, replica and bytes relayed. An event
// stream ends in the API's own error event (cutEvent) and a properly ended
// body, as vLLM ends a stream that fails, so that clients raise an error
// rather than hang or read a truncation; any other body cannot say it
// failed, so the client's connection is cut, and it sees a truncated
// response, not a complete one.
func (rs *relayStream) cut(err error) {
	r := rs.r
	reason, e := cutError(rs.actx.Cause())
	r.met.Cut(reason)
	rs.s.log.Warn("response cut after its first byte", "id", r.id, "model", r.model, "replica", rs.d.Replica,
		"bytes", rs.sent, "reason", reason, "stream", rs.sse, "err", err)
	if !rs.sse {
		rs.conn.Close()
		rs.stop(fleet.OutcomeFailed, errEngineBroke)
		return
	}
	out := slices.Clone(rs.out)
	if len(out) == 0 && rs.sent > 0 && !eventEnded(rs.last[:]) || len(out) > 0 && !eventEnded(out) {
		// The engine stopped inside an event: end it, so that the error
		// event is one of its own.
		out = append(out, "\n\n"...)
	}
	rs.out = cutEvent(out, r, e, &rs.rb.head, &rs.rb.tail)
	rs.stop(fleet.OutcomeFailed, io.EOF)
}

// cutError is the reason a stream was cut, from its attempt's cause, and
// the error the client is told.
func cutError(cause error) (string, *openai.Error) {
	switch {
	case errors.Is(cause, errTimeout):
		return telemetry.CutTimeout, apiError(fasthttp.StatusGatewayTimeout, "",
			"The engine did not finish the response within server.request_timeout.", "")
	case errors.Is(cause, errShutdown):
		return telemetry.CutShutdown, apiError(fasthttp.StatusServiceUnavailable, "ServiceUnavailableError",
			"The gateway shut down before the engine finished the response.", "")
	case errors.Is(cause, errReplicaUnhealthy):
		return telemetry.CutUnhealthy, apiError(fasthttp.StatusBadGateway, "BadGatewayError",
			"The engine failed its health checks before it finished the response.", "")
	}
	return telemetry.CutEngine, apiError(fasthttp.StatusBadGateway, "BadGatewayError",
		"The engine broke off the response (it stopped, or reset the connection).", "")
}

// cutEvent appends to dst the event that ends r's stream with e, in r's
// API: vLLM's error event and data: [DONE] for the OpenAI API, an error
// event for Anthropic's Messages, response.failed for Responses (numbered
// after the last event in tail, for the response head names).
func cutEvent(dst []byte, r *request, e *openai.Error, head *streamHead, tail *openai.StreamTail) []byte {
	switch {
	case r.messages:
		return anthropic.AppendStreamError(dst, anthropic.ErrorType(e.Status), e.Message)
	case r.responses:
		return responses.AppendFailed(dst, responses.ID(head.b[:head.n]), responses.NextSequence(tail.EachData), e.Message)
	}
	return openai.AppendDone(openai.AppendStreamError(dst, e))
}

// eventEnded reports whether b, the end of a stream, ends an event: its
// last line and then a blank one (\n\n, \r\n\r\n or \r\r).
func eventEnded(b []byte) bool {
	return bytes.HasSuffix(b, []byte("\n\n")) || bytes.HasSuffix(b, []byte("\r\n\r\n")) || bytes.HasSuffix(b, []byte("\r\r"))
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
	r.used(rs.usage, rs.found)
	now := time.Now()
	s.countSLO(r, rs.status, rs.firstAt, now, rs.usage, rs.found)
	s.logRequest(r, rs.status, rs.firstAt, now)
	return nil
}

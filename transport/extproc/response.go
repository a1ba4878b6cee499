package extproc

import (
	"strconv"
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/inferrail/inferrail/actors/fleet"
	"github.com/inferrail/inferrail/model/openai"
	"github.com/inferrail/inferrail/transport/frontend"
	"github.com/inferrail/inferrail/transport/telemetry"
)

// responseHeaders commits the attempt: the replica Envoy says served it
// takes the lease (a fallback of the list may have), its first byte is
// counted, and the response gets the front end's x-inferrail headers.
func (x *exchange) responseHeaders(h *extprocv3.HttpHeaders, md *corev3.Metadata) error {
	resp := &extprocv3.HeadersResponse{Response: &extprocv3.CommonResponse{}}
	out := &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseHeaders{ResponseHeaders: resp}}
	if !x.live {
		return x.send(out)
	}
	for _, hv := range h.GetHeaders().GetHeaders() {
		switch strings.ToLower(hv.Key) {
		case ":status":
			x.status, _ = strconv.Atoi(headerValue(hv))
		case "content-type":
			x.sse = strings.HasPrefix(headerValue(hv), "text/event-stream")
		}
	}
	x.served(md)
	x.sawHeaders = true
	s := x.s
	s.fleet.FirstByte(x.d)
	s.gate.Wake(x.model)
	set := []*corev3.HeaderValueOption{header("x-request-id", x.requestID),
		header(frontend.HeaderReplica, x.d.Replica), header(frontend.HeaderPolicy, x.d.Policy)}
	if x.tokenized {
		set = append(set, header(frontend.HeaderPromptTokens, strconv.Itoa(x.policy.PromptTokens)))
	}
	if x.affinity != "" {
		set = append(set, header(frontend.HeaderAffinity, x.affinity))
	}
	if x.d.Predicted {
		set = append(set, header(frontend.HeaderCachedTokens, strconv.Itoa(x.d.CachedTokens)))
		x.met.PromptTokens.Add(x.policy.PromptTokens)
		x.met.PredictedCached.Add(x.d.CachedTokens)
	}
	resp.Response.HeaderMutation = &extprocv3.HeaderMutation{SetHeaders: set}
	if h.EndOfStream {
		x.finish()
	}
	return x.send(out)
}

// served moves the attempt to the replica Envoy reports served it, when
// that is another one of the list than the one chosen.
func (x *exchange) served(md *corev3.Metadata) {
	ep, ok := Served(md)
	if !ok || ep == Endpoint(x.d.URL) {
		return
	}
	for _, snap := range x.s.fleet.Replicas() {
		if Endpoint(snap.URL) != ep || !snap.Serves(x.model) {
			continue
		}
		if d, moved := x.s.fleet.Moved(x.d, x.model, snap.ID, x.policy); moved {
			x.d = d
			x.series = x.s.met.Replica(d.Replica, x.model, d.Policy)
		}
		return
	}
	x.s.log.Debug("ext_proc: the served endpoint is no replica of the model; the chosen one keeps the request",
		"served", ep, "replica", x.d.Replica, "model", x.model)
}

// responseBody relays one chunk at once, an SSE event as soon as the
// engine sent it, and keeps what the usage is read from: the stream's tail
// (its final usage chunk) or a JSON body.
func (x *exchange) responseBody(b *extprocv3.HttpBody) error {
	out := &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseBody{ResponseBody: &extprocv3.BodyResponse{
		Response: &extprocv3.CommonResponse{BodyMutation: &extprocv3.BodyMutation{Mutation: &extprocv3.BodyMutation_StreamedResponse{
			StreamedResponse: &extprocv3.StreamedBodyResponse{Body: b.Body, EndOfStream: b.EndOfStream}}}}}}}
	if x.live {
		x.relayed += int64(len(b.Body))
		if len(b.Body) > 0 && x.firstChunk() {
			x.firstAt = time.Now()
			x.series.TTFT.Update(x.firstAt.Sub(x.start).Seconds())
		}
		if x.responses && x.sse && len(x.head) < frontend.StreamHeadBytes {
			x.head = append(x.head, b.Body[:min(len(b.Body), frontend.StreamHeadBytes-len(x.head))]...)
		}
		switch {
		case x.sse:
			x.tail.Write(b.Body)
		case !x.jsonCut && len(x.json)+len(b.Body) <= maxUsageBody:
			x.json = append(x.json, b.Body...)
		default:
			x.jsonCut, x.json = true, nil
		}
		if b.EndOfStream {
			x.finish()
		}
	}
	return x.send(out)
}

// firstChunk reports whether no body chunk was seen yet, and notes one.
func (x *exchange) firstChunk() bool {
	first := !x.sawBody
	x.sawBody = true
	return first
}

// finish ends the attempt as the engine answered: the usage's prompt
// tokens checked against the gateway's count and its cached tokens
// against the prediction, fleet.Done with the outcome (a 5xx failed), the
// request counted.
func (x *exchange) finish() {
	if !x.live {
		return
	}
	var u openai.Usage
	found := false
	if x.status == 200 {
		switch {
		case x.responses && x.sse:
			u, found = frontend.ResponsesStreamUsage(&x.tail)
		case x.responses && !x.jsonCut:
			u, found = frontend.ResponsesUsage(x.json)
		case x.sse:
			u, found = frontend.StreamUsage(x.messages, nil, &x.tail)
		case !x.jsonCut:
			u, found = frontend.ResponseUsage(x.messages, x.json)
		}
		if found && x.tokenized {
			frontend.CheckPrompt(x.s.fleet, x.s.log, x.model, x.d.Replica, x.series, x.policy.PromptTokens, u.PromptTokens)
		}
	}
	if x.responses {
		answer := x.json
		if x.sse {
			answer = x.head
		}
		x.s.homes.Remember(x.body, x.d.Replica, x.status, answer)
		x.body, x.head = nil, nil
	}
	x.account(u, found)
	now := time.Now()
	first := x.firstAt
	if first.IsZero() {
		first = now // no body: the head was the whole response
	}
	frontend.CountSLOServed(x.met, x.policy.SLO, x.status, false, first.Sub(x.start), now.Sub(first), u, found)
	x.logRequest(u, found, now)
	o := fleet.OutcomeOK
	if x.status >= 500 {
		o = fleet.OutcomeFailed
	}
	x.done(o, telemetry.StatusClass(x.status))
}

// done ends the lease once, with outcome o, and counts the request as
// status.
func (x *exchange) done(o fleet.Outcome, status string) {
	x.live = false
	x.s.fleet.Done(x.d, o)
	x.s.gate.Wake(x.model)
	x.series.Request(status)
	x.series.Duration.Update(time.Since(x.start).Seconds())
	x.json = nil
}

// end runs when the stream is over. An attempt still live lost its
// client, or Envoy gave up on it: its lease goes back, exactly once. An
// event stream whose last event ([DONE]) had gone out is complete, as the
// front end counts it.
func (x *exchange) end() {
	if !x.live {
		return
	}
	if x.sse && x.tail.Done() {
		x.finish()
		return
	}
	if !x.sawHeaders {
		// The exchange ended after its request phase with no response
		// phase: Envoy gave up on the request (its client left, a
		// timeout) or a later filter refused it, and the engine may never
		// have seen it. Its blocks must not be predicted cached there.
		x.done(fleet.OutcomeWithdrawn, telemetry.StatusCancelled)
		x.met.Withdrawn.Inc()
		x.s.log.Info("ext_proc: the exchange ended before any response; the pick is withdrawn from the index",
			"id", x.requestID, "model", x.model, "replica", x.d.Replica)
		return
	}
	if x.sawBody {
		// The response broke off after its first byte. The engine may have
		// died (Envoy resets the client's stream then) or the client left:
		// the ext_proc stream ends the same way, and Envoy sends no more
		// body messages the picker could add an error event to.
		x.met.Cut(telemetry.CutUnfinished)
		x.s.log.Warn("ext_proc: the response ended before its last byte (the engine broke off, or the client left)",
			"id", x.requestID, "model", x.model, "replica", x.d.Replica, "bytes", x.relayed, "stream", x.sse)
	}
	x.met.Disconnects.Inc()
	x.account(openai.Usage{}, false)
	x.logRequest(openai.Usage{}, false, time.Now())
	x.done(fleet.OutcomeCancelled, telemetry.StatusCancelled)
}

// account compares the engine's usage (u, when found) with the attempt's
// prediction, once its response headers have come (frontend.Account).
func (x *exchange) account(u openai.Usage, found bool) {
	if x.sawHeaders {
		frontend.Account(x.s.fleet, x.s.log, x.met, x.series, x.d, x.policy.PromptTokens, u, found)
	}
}

package extproc

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/inferrail/inferrail/actors/fleet"
	"github.com/inferrail/inferrail/model/flow"
	"github.com/inferrail/inferrail/model/openai"
	"github.com/inferrail/inferrail/model/policy"
	"github.com/inferrail/inferrail/model/route"
	"github.com/inferrail/inferrail/transport/decisionlog"
	"github.com/inferrail/inferrail/transport/extproc/protocol"
	"github.com/inferrail/inferrail/transport/frontend"
	"github.com/inferrail/inferrail/transport/requestlog"
	"github.com/inferrail/inferrail/transport/telemetry"
)

// BodyChunk is the most body bytes one StreamedResponse carries, as
// llm-d's EPP sends them (pkg/common/envoy/chunking.go, BodyByteLimit):
// under Envoy's 64 KiB default buffer for one ext_proc message.
const BodyChunk = 62000

// exchange is one Process stream: one HTTP request from its headers to
// its response's end. It is owned by the stream's goroutine.
type exchange struct {
	s      *Server
	stream extprocv3.ExternalProcessor_ProcessServer
	start  time.Time

	// From the request headers.
	path, sessionID, requestID string
	idGiven                    bool
	authz                      string // Authorization, for response lookups
	// The llm-d flow-control headers (flow.HeaderObjective and
	// flow.HeaderFairnessID), empty when absent.
	objective, fairnessID string
	// slo holds llm-d's SLO headers, nil when absent.
	slo    flow.SLOHeaders
	subset []string
	hinted bool // a subset hint was given

	body    []byte
	headed  bool // the request headers were answered
	routed  bool // the request body was answered: the response phase follows
	passing bool // a request without a body: nothing to account for

	// The routed request's attempt.
	model     string
	met       *telemetry.Model
	policy    policy.Request
	tokenized bool
	// messages: an Anthropic Messages request, whose usage is Anthropic's.
	messages bool
	// responses: an OpenAI Responses request, whose usage is in its
	// response.completed event (or its body's usage object).
	responses bool
	// affinity is how a request continuing a stored response was placed
	// (frontend.AffinityPinned or AffinityUnknown); "" for any other.
	affinity string
	// head is a Responses stream's first bytes, which name its id.
	head   []byte
	d      fleet.Decision
	series *telemetry.Series
	live   bool // d holds a lease that Done has not ended

	// The response.
	status  int
	sse     bool
	sawBody bool // a response body chunk came
	// sawHeaders: the response headers came, so the attempt committed and
	// its prediction was counted.
	sawHeaders bool
	relayed    int64 // the response body's bytes that went through
	tail       openai.StreamTail
	json       []byte // a JSON response's body, up to maxUsageBody
	jsonCut    bool
	firstAt    time.Time // when the first body chunk came

	// entry is the request's line in the request log (requestlog.go);
	// logKind: a generation request, with a log to write.
	entry   requestlog.Entry
	logKind bool
}

// maxUsageBody bounds the JSON response body kept to read its usage.
const maxUsageBody = 8 << 20

func newExchange(s *Server, stream extprocv3.ExternalProcessor_ProcessServer) *exchange {
	return &exchange{s: s, stream: stream, start: time.Now()}
}

// handle answers one message; stop reports that the stream is over for
// the picker (an immediate response went out).
func (x *exchange) handle(req *extprocv3.ProcessingRequest) (stop bool, err error) {
	switch v := req.Request.(type) {
	case *extprocv3.ProcessingRequest_RequestHeaders:
		return x.requestHeaders(v.RequestHeaders, req.MetadataContext)
	case *extprocv3.ProcessingRequest_RequestBody:
		return x.requestBody(v.RequestBody, req.MetadataContext)
	case *extprocv3.ProcessingRequest_RequestTrailers:
		if !x.routed && !x.passing {
			// Trailers end a body whose last chunk did not say so.
			if stop, err = x.route(); stop || err != nil {
				return stop, err
			}
		}
		return false, x.send(&extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestTrailers{
			RequestTrailers: &extprocv3.TrailersResponse{}}})
	case *extprocv3.ProcessingRequest_ResponseHeaders:
		return false, x.responseHeaders(v.ResponseHeaders, req.MetadataContext)
	case *extprocv3.ProcessingRequest_ResponseBody:
		return false, x.responseBody(v.ResponseBody)
	case *extprocv3.ProcessingRequest_ResponseTrailers:
		x.finish()
		return false, x.send(&extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseTrailers{
			ResponseTrailers: &extprocv3.TrailersResponse{}}})
	}
	return false, nil // a message this mode does not send
}

func (x *exchange) send(r *extprocv3.ProcessingResponse) error { return x.stream.Send(r) }

// headerValue is h's value, raw as Envoy sends it or as a string.
func headerValue(h *corev3.HeaderValue) string {
	if len(h.RawValue) > 0 {
		return string(h.RawValue)
	}
	return h.Value
}

func (x *exchange) requestHeaders(h *extprocv3.HttpHeaders, md *corev3.Metadata) (bool, error) {
	for _, hv := range h.GetHeaders().GetHeaders() {
		switch strings.ToLower(hv.Key) {
		case ":path":
			x.path = headerValue(hv)
		case "x-session-id":
			x.sessionID = headerValue(hv)
		case "x-request-id":
			x.requestID = headerValue(hv)
		case "authorization":
			x.authz = headerValue(hv)
		case flow.HeaderObjective:
			x.objective = headerValue(hv)
		case flow.HeaderFairnessID:
			x.fairnessID = headerValue(hv)
		case flow.HeaderSLOTTFT, flow.HeaderSLOTPOT, flow.HeaderSLOTTFTAlias, flow.HeaderSLOTPOTAlias:
			x.slo.Set(hv.Key, []byte(headerValue(hv)))
		case "content-length":
			// One buffer of the body's size, not one grown chunk by chunk.
			if n, err := strconv.ParseInt(headerValue(hv), 10, 64); err == nil && n > 0 && n <= x.s.cfg.Server.MaxBodyBytes {
				x.body = make([]byte, 0, n)
			}
		}
	}
	x.readHint(md)
	if !h.EndOfStream {
		return false, nil // answered once the body has ended
	}
	// No body (GET /v1/models): any ready replica can answer it.
	x.passing = true
	ep, ok := x.randomEndpoint()
	if !ok {
		x.s.met.Model("").Error("no_replica")
		return true, x.send(immediate(refuse(errNoBody, "")))
	}
	x.headed = true
	return false, x.send(x.headersResponse([]string{ep}, -1))
}

// readHint keeps the subset hint of a message's metadata context, if it
// carries one.
func (x *exchange) readHint(md *corev3.Metadata) {
	if eps, ok := SubsetHint(md); ok {
		x.subset, x.hinted = eps, true
	}
}

func (x *exchange) requestBody(b *extprocv3.HttpBody, md *corev3.Metadata) (bool, error) {
	if x.passing || x.routed {
		// A body after a header-only request: pass it on as it is.
		return false, x.send(bodyResponse(b.Body, b.EndOfStream))
	}
	x.readHint(md)
	if limit := x.s.cfg.Server.MaxBodyBytes; int64(len(x.body)+len(b.Body)) > limit {
		x.s.met.Model("").Error("body_too_large")
		return true, x.send(immediate(refusal{reason: "body_too_large", e: &openai.Error{Status: 413, Type: "Payload Too Large",
			Message: "The request body is larger than server.max_body_bytes (" + strconv.FormatInt(limit, 10) + " bytes)."}}))
	}
	x.body = append(x.body, b.Body...)
	if !b.EndOfStream {
		return false, nil
	}
	return x.route()
}

// route routes the buffered request and answers its headers, then its
// body. The body's chunks were never answered before: the headers'
// answer must come first (GIE PR #3033).
func (x *exchange) route() (bool, error) {
	s := x.s
	rs := frontend.ResolveModel(s.fleet, x.body)
	if rs.Err != nil {
		s.met.Model("").Error(rs.Reason)
		return true, x.send(immediate(refusal{e: rs.Err, reason: rs.Reason}))
	}
	x.model, x.body, x.met = rs.Model, rs.Body, s.met.Model(rs.Model)
	path, _, _ := strings.Cut(x.path, "?")
	if e := rs.PromptError(path); e != nil {
		x.met.Error("bad_request")
		return true, x.send(immediate(refusal{e: e, reason: "bad_request"}))
	}
	deadline := x.start.Add(s.cfg.Server.RequestTimeout)
	if frontend.ValidRequestID([]byte(x.requestID)) {
		x.idGiven = true
	} else {
		x.requestID = frontend.NewRequestID()
	}
	x.messages = strings.HasSuffix(path, "/v1/messages")
	x.responses = strings.HasSuffix(path, "/v1/responses")
	slo, e := frontend.RequestSLO(s.live.Load(), x.model, x.slo)
	if e != nil {
		x.met.Error("bad_request")
		return true, x.send(immediate(refusal{e: e, reason: "bad_request"}))
	}
	var p frontend.Prompt
	x.policy, p, x.tokenized = frontend.PreparePolicy(s.tok, x.model, path,
		[]byte(x.sessionID), x.body, rs.User, x.requestID, deadline)
	x.policy.SLO = slo
	if s.live.Load().Logging.LogPrompts {
		s.log.Debug("request", "id", x.requestID, "model", x.model, "body", string(x.body))
	}
	exclude, ok := x.excluded()
	if !ok {
		x.met.Error("no_subset_match")
		return true, x.send(immediate(refuse(errNoSubsetMatch, x.model)))
	}
	if x.responses {
		var refused *refusal
		if exclude, refused = x.pin(exclude, deadline); refused != nil {
			x.met.Error(refused.reason)
			return true, x.send(immediate(*refused))
		}
	}
	rec := decisionlog.Record{RequestID: x.requestID, Model: x.model, Attempt: 1,
		PromptTokens: x.policy.PromptTokens, Blocks: len(x.policy.Blocks), Tokenized: x.tokenized}
	pr := fleet.PickRequest{Model: x.model, Policy: x.policy, Exclude: exclude, Deadline: pickDeadline(deadline), Rank: true,
		Unpriced: p.Batch}
	var took time.Duration // the last pick's, without any wait in the queue
	pick := func() (fleet.Decision, error) {
		pr.Deadline = pickDeadline(deadline)
		t0 := time.Now()
		d, err := frontend.Decide(s.fleet, s.dlog, x.met, pr, rec)
		took = time.Since(t0)
		return d, err
	}
	var d fleet.Decision
	var err error
	if s.gate.On() {
		// Flow control decides as the front end's does: priority bands,
		// fairness, the saturation detector.
		ctx, cancel := context.WithCancelCause(x.stream.Context())
		stop := context.AfterFunc(s.base, func() { cancel(context.Cause(s.base)) })
		t := frontend.Ticket{Model: x.model, Deadline: deadline, Attempt: 1,
			Objective: []byte(x.objective), FairnessID: []byte(x.fairnessID)}
		d, err = s.gate.Admit(ctx, &t, pick)
		stop()
		cancel(nil)
	} else {
		d, err = pick()
	}
	if err != nil {
		if x.stream.Context().Err() != nil {
			x.met.Disconnects.Inc()
			return true, nil // the client left while the request waited
		}
		if x.hinted && errors.Is(err, route.ErrNoReplica) {
			err = errNoSubsetMatch
		}
		r := refuse(err, x.model)
		x.met.Error(r.reason)
		frontend.CountSLORefused(x.met, x.policy.SLO, err)
		return true, x.send(immediate(r))
	}
	s.met.Decision(d.Policy, took)
	x.d, x.live, x.routed, x.headed = d, true, true, true
	x.beginEntry(path)
	x.series = s.met.Replica(d.Replica, x.model, d.Policy)
	x.series.Decisions.Inc()
	if err := x.send(x.headersResponse(x.endpoints(d), len(x.body))); err != nil {
		return false, err
	}
	for off := 0; ; off += BodyChunk {
		end := min(off+BodyChunk, len(x.body))
		if err := x.send(bodyResponse(x.body[off:end], end == len(x.body))); err != nil {
			return false, err
		}
		if end == len(x.body) {
			break
		}
	}
	if !x.responses {
		x.body = nil // a Responses body is kept for Remember
	}
	return false, nil
}

// pin places a Responses request that continues a stored response on the
// replica that stores it, as the front end does (frontend.Homes): the
// model's other replicas join exclude. It refuses the request when that
// replica has left the fleet.
func (x *exchange) pin(exclude []string, deadline time.Time) ([]string, *refusal) {
	s := x.s
	p := s.homes.Place(x.stream.Context(), x.model, x.body, x.authz, deadline)
	switch {
	case p.ID == "":
		return exclude, nil
	case p.Home.Replica == "":
		x.affinity = frontend.AffinityUnknown
		return exclude, nil
	case p.Home.Gone:
		s.log.Warn("previous_response_id was stored by a replica that has left the fleet; the conversation is lost",
			"id", x.requestID, "model", x.model, "previous_response_id", p.ID, "replica", p.Home.Replica)
		return exclude, &refusal{e: frontend.ResponseGone(p.ID, p.Home.Replica, x.model, "previous_response_id"),
			reason: frontend.ReasonResponseGone}
	}
	x.affinity = frontend.AffinityPinned
	return append(exclude, p.Exclude...), nil
}

// excluded is the fleet's replicas the subset hint rules out, as a
// decision's Exclude list; ok is false when the hint leaves no replica
// of the model.
func (x *exchange) excluded() (exclude []string, ok bool) {
	if !x.hinted {
		return nil, true
	}
	eligible := 0
	for _, snap := range x.s.fleet.Replicas() {
		if !snap.Serves(x.model) {
			continue
		}
		ep := Endpoint(snap.URL)
		in := false
		for _, e := range x.subset {
			if e == ep {
				in = true
				break
			}
		}
		if in {
			eligible++
		} else {
			exclude = append(exclude, snap.ID)
		}
	}
	return exclude, eligible > 0
}

// endpoints is d's ranking as Envoy addresses it: the fallback list, the
// chosen replica first.
func (x *exchange) endpoints(d fleet.Decision) []string {
	eps := make([]string, 0, max(len(d.Ranking), 1))
	eps = append(eps, Endpoint(d.URL))
	for _, id := range d.Ranking {
		if id == d.Replica {
			continue
		}
		if snap, ok := x.s.fleet.Snapshot(id); ok {
			if ep := Endpoint(snap.URL); ep != "" {
				eps = append(eps, ep)
			}
		}
	}
	return eps
}

// randomEndpoint is a ready replica's endpoint, drawn at random, for a
// request without a body (llm-d's fallbackToRandomEndpoint).
func (x *exchange) randomEndpoint() (string, bool) {
	now := time.Now()
	var ready []string
	for _, snap := range x.s.fleet.Replicas() {
		if snap.Healthy && !snap.Ejected(now) {
			if ep := Endpoint(snap.URL); ep != "" {
				ready = append(ready, ep)
			}
		}
	}
	if len(ready) == 0 {
		return "", false
	}
	return ready[rand.IntN(len(ready))], true
}

// headersResponse answers the request headers: the destination as a header
// and as envoy.lb metadata (they must be equal), the body's new length
// when contentLength ≥ 0, and the request id the engine is to log.
func (x *exchange) headersResponse(eps []string, contentLength int) *extprocv3.ProcessingResponse {
	dest := strings.Join(eps, ",")
	set := []*corev3.HeaderValueOption{header(protocol.DestinationHeader, dest)}
	if contentLength >= 0 {
		set = append(set, header("content-length", strconv.Itoa(contentLength)))
	}
	if x.requestID != "" && !x.idGiven {
		set = append(set, header("x-request-id", x.requestID))
	}
	return &extprocv3.ProcessingResponse{
		Response: &extprocv3.ProcessingResponse_RequestHeaders{RequestHeaders: &extprocv3.HeadersResponse{
			Response: &extprocv3.CommonResponse{ClearRouteCache: true, HeaderMutation: &extprocv3.HeaderMutation{SetHeaders: set}}}},
		DynamicMetadata: &structpb.Struct{Fields: map[string]*structpb.Value{
			protocol.LBNamespace: structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{
				protocol.DestinationHeader: structpb.NewStringValue(dest)}})}},
	}
}

// bodyResponse is one chunk of a body: always a StreamedResponse, never an
// empty CommonResponse, which gateways answer with a 500 in this mode (GIE
// PR #3028).
func bodyResponse(b []byte, end bool) *extprocv3.ProcessingResponse {
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestBody{RequestBody: &extprocv3.BodyResponse{
		Response: &extprocv3.CommonResponse{BodyMutation: &extprocv3.BodyMutation{Mutation: &extprocv3.BodyMutation_StreamedResponse{
			StreamedResponse: &extprocv3.StreamedBodyResponse{Body: b, EndOfStream: end}}}}}}}
}

// pickDeadline is a decision's deadline: pickWait from now, within the
// request's.
func pickDeadline(request time.Time) time.Time {
	if dl := time.Now().Add(pickWait); dl.Before(request) {
		return dl
	}
	return request
}

package extproc

import (
	"errors"
	"strconv"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"

	"github.com/inferrail/inferrail/actors/fleet"
	"github.com/inferrail/inferrail/model/flow"
	"github.com/inferrail/inferrail/model/openai"
	"github.com/inferrail/inferrail/model/route"
	"github.com/inferrail/inferrail/transport/extproc/protocol"
	"github.com/inferrail/inferrail/transport/frontend"
)

// Why a request is answered at once without the fleet's routing.
var (
	errNoSubsetMatch = errors.New("no endpoint of the subset hint is eligible")
	errNoBody        = errors.New("no replica is ready")
	errShutdown      = errors.New("endpoint picker shutting down")
)

// refusal is the answer to a request the picker will not route: its
// status, the dropped reason (empty for none), the OpenAI error body and
// the reason counted in inferrail_request_errors_total.
type refusal struct {
	e       *openai.Error
	dropped string
	reason  string
}

// refuse maps a routing error to the EPP's answer. The protocol's rule is
// that 429 means capacity exists but is contended (the flow-control queue
// full or its wait passed, every replica at its cap), and 503 that there
// is no serving capacity (no healthy replica, the profile's filters or
// the subset hint left none). The message is the front end's.
func refuse(err error, model string) refusal {
	e := frontend.RouteError(err, model)
	r := refusal{e: e, reason: frontend.RouteReason(err)}
	switch {
	case errors.Is(err, route.ErrOverloaded):
		r.dropped = flow.DroppedSaturated
		e.Status, e.Type = 429, "RateLimitError"
	case frontend.FlowDropped(err) != "":
		// 429, as RouteError answers a full queue, a wait passed, a
		// sheddable request shed or evicted; 503 when no endpoint came.
		r.dropped = frontend.FlowDropped(err)
	case errors.Is(err, route.ErrNoReplica), errors.Is(err, route.ErrFilteredOut):
		r.dropped = flow.DroppedNoEndpoints
	case errors.Is(err, errNoSubsetMatch):
		r.dropped, r.reason = flow.DroppedNoEndpoints, "no_subset_match"
		r.e = &openai.Error{Status: 503, Type: "ServiceUnavailableError",
			Message: "No endpoint of the request's subset hint (" + protocol.SubsetKey + ") serves `" + model + "` and can take it."}
	case errors.Is(err, errNoBody):
		r.dropped, r.reason = flow.DroppedNoEndpoints, "no_replica"
		r.e = &openai.Error{Status: 503, Type: "ServiceUnavailableError", Message: "No replica is ready."}
	case errors.Is(err, errShutdown), errors.Is(err, fleet.ErrStopped):
		r.dropped, r.reason = flow.DroppedShuttingDown, "shutdown"
		r.e = &openai.Error{Status: 503, Type: "ServiceUnavailableError", Message: "The endpoint picker is shutting down."}
	}
	return r
}

// immediate is the ImmediateResponse of a refusal: the status, the OpenAI
// error JSON, its content type, the dropped reason and, as the front end
// sends with 429 and 503, Retry-After.
func immediate(r refusal) *extprocv3.ProcessingResponse {
	set := []*corev3.HeaderValueOption{header("content-type", "application/json")}
	if r.dropped != "" {
		set = append(set, header(flow.HeaderDropped, r.dropped))
	}
	if r.e.Status == 429 || r.e.Status == 503 {
		set = append(set, header("retry-after", "1"))
	}
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ImmediateResponse{
		ImmediateResponse: &extprocv3.ImmediateResponse{
			Status:  &typev3.HttpStatus{Code: typev3.StatusCode(r.e.Status)},
			Headers: &extprocv3.HeaderMutation{SetHeaders: set},
			Body:    openai.AppendError(nil, r.e),
			Details: "inferrail: " + strconv.Itoa(r.e.Status) + " " + r.reason,
		}}}
}

// header is one header to set, its value raw as Envoy reads it.
func header(key, value string) *corev3.HeaderValueOption {
	return &corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: key, RawValue: []byte(value)},
		AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD}
}

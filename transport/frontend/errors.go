package frontend

import (
	"errors"

	"github.com/valyala/fasthttp"

	"github.com/inferrail/inferrail/actors/fleet"
	"github.com/inferrail/inferrail/model/flow"
	"github.com/inferrail/inferrail/model/openai"
	"github.com/inferrail/inferrail/model/policy"
	"github.com/inferrail/inferrail/model/route"
	"github.com/inferrail/inferrail/model/sched"
)

// Causes a request's upstream context is cancelled with.
var (
	errClientGone       = errors.New("client disconnected")
	errReplicaUnhealthy = errors.New("replica failed its health checks while the request waited")
	errTimeout          = errors.New("server.request_timeout passed")
	errShutdown         = errors.New("gateway shutting down")
)

// apiError builds an OpenAI-shaped error with the status phrase as its type
// where vLLM would use one.
func apiError(status int, typ, msg, param string) *openai.Error {
	if typ == "" {
		typ = fasthttp.StatusMessage(status)
	}
	return &openai.Error{Status: status, Type: typ, Message: msg, Param: param}
}

// RouteError maps a fleet error to the client's answer. It is the one place
// the front end picks status codes for routing failures.
func RouteError(err error, model string) *openai.Error {
	switch {
	case errors.Is(err, ErrFlowFull):
		return apiError(fasthttp.StatusTooManyRequests, "",
			"The replicas serving `"+model+"` are busy and the gateway's queue for it is full; retry later.", "")
	case errors.Is(err, ErrFlowTimeout):
		return apiError(fasthttp.StatusTooManyRequests, "",
			"The replicas serving `"+model+"` stayed busy while the request waited in the gateway's queue (flow_control.max_wait); retry later.", "")
	case errors.Is(err, ErrFlowShed):
		return apiError(fasthttp.StatusTooManyRequests, "",
			"The replicas serving `"+model+"` are saturated and the request is sheddable (a negative priority); retry later.", "")
	case errors.Is(err, ErrFlowEvicted):
		return apiError(fasthttp.StatusTooManyRequests, "",
			"The request was evicted from the gateway's queue for `"+model+"` to make room for higher-priority work; retry later.", "")
	case errors.Is(err, ErrFlowNoEndpoints):
		return apiError(fasthttp.StatusServiceUnavailable, "ServiceUnavailableError",
			"No healthy replica served `"+model+"` while the request waited in the gateway's queue (flow_control.max_wait).", "")
	case errors.Is(err, policy.ErrNotAdmitted):
		// llm-d answers an admission plugin's denial (latency-slo-admitter)
		// with 500 "request cannot be admitted", and names no dropped
		// reason (shared/reference/llm-d-gie.md §3).
		return apiError(fasthttp.StatusInternalServerError, "InternalServerError",
			"The request cannot be admitted: no replica serving `"+model+"` is predicted to meet its latency objective ("+
				flow.HeaderSLOTTFT+", "+flow.HeaderSLOTPOT+" or the model's slo).", "")
	case errors.Is(err, fleet.ErrUnknownModel):
		return openai.ModelNotFound(model)
	case errors.Is(err, route.ErrOverloaded):
		return apiError(fasthttp.StatusServiceUnavailable, "ServiceUnavailableError",
			"Every replica serving `"+model+"` is at its concurrency limit; retry later.", "")
	case errors.Is(err, route.ErrNoReplica):
		return apiError(fasthttp.StatusServiceUnavailable, "ServiceUnavailableError",
			"No healthy replica serves `"+model+"`.", "")
	case errors.Is(err, route.ErrFilteredOut):
		return apiError(fasthttp.StatusServiceUnavailable, "ServiceUnavailableError",
			"The scheduling profile routing `"+model+"` set every replica aside ("+filterReason(err)+"); no replica can take the request.", "")
	case errors.Is(err, route.ErrDeadline):
		return apiError(fasthttp.StatusServiceUnavailable, "ServiceUnavailableError",
			"The gateway could not choose a replica in time; retry later.", "")
	case errors.Is(err, policy.ErrNotAdmitted):
		// llm-d answers an admitter's refusal with 500.
		return apiError(fasthttp.StatusInternalServerError, "",
			"The request cannot be admitted: no replica serving `"+model+"` is predicted to meet its latency objective.", "")
	}
	return apiError(fasthttp.StatusBadGateway, "BadGatewayError", "Routing failed.", "")
}

// RouteReason names a fleet error in inferrail_request_errors_total.
func RouteReason(err error) string {
	switch {
	case errors.Is(err, ErrFlowFull):
		return "flow_full"
	case errors.Is(err, ErrFlowTimeout):
		return "flow_timeout"
	case errors.Is(err, ErrFlowShed):
		return "flow_shed"
	case errors.Is(err, ErrFlowEvicted):
		return "flow_evicted"
	case errors.Is(err, ErrFlowNoEndpoints):
		return "flow_no_endpoints"
	case errors.Is(err, policy.ErrNotAdmitted):
		return "not_admitted"
	case errors.Is(err, fleet.ErrUnknownModel):
		return "unknown_model"
	case errors.Is(err, route.ErrOverloaded):
		return "overloaded"
	case errors.Is(err, route.ErrNoReplica):
		return "no_replica"
	case errors.Is(err, route.ErrFilteredOut):
		return "filtered_out"
	case errors.Is(err, route.ErrDeadline):
		return "routing_deadline"
	case errors.Is(err, policy.ErrNotAdmitted):
		return "not_admitted"
	}
	return "routing"
}

// filterReason names the profile and filter that left no replica.
func filterReason(err error) string {
	var fe *sched.FilteredError
	if errors.As(err, &fe) {
		return "profile " + fe.Profile + ", filter " + fe.Filter
	}
	return "its filters"
}

func writeError(ctx *fasthttp.RequestCtx, e *openai.Error) {
	if anthropicPath(ctx.Path()) {
		writeAnthropicError(ctx, e)
		return
	}
	ctx.SetStatusCode(e.Status)
	ctx.SetContentType("application/json")
	if e.Status == fasthttp.StatusServiceUnavailable || e.Status == fasthttp.StatusTooManyRequests {
		ctx.Response.Header.Set("Retry-After", "1")
	}
	ctx.SetBody(openai.AppendError(nil, e))
}

package frontend

import (
	"errors"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/inferrail/inferrail/config"
	"github.com/inferrail/inferrail/model/flow"
	"github.com/inferrail/inferrail/model/openai"
	"github.com/inferrail/inferrail/model/policy"
	"github.com/inferrail/inferrail/transport/telemetry"
)

// A request's latency objective (policy.Request.SLO) comes from llm-d's
// SLO headers, else its model's default (models[].slo), and is read the
// same way by the gateway and the endpoint picker (RequestSLO). Whether
// it was met is counted per model (inferrail_slo_requests_total) as the
// request ends: CountSLORefused for one the gateway refused before any
// engine, CountSLOServed for one an engine answered.

// RequestSLO is the objective of a request for model under c, from its
// SLO headers h, else the model's default (none with a nil c). A
// malformed header is the client's 400, returned as e.
func RequestSLO(c *config.Config, model string, h flow.SLOHeaders) (slo policy.SLO, e *openai.Error) {
	var def policy.SLO
	if c != nil {
		if m, ok := c.Model(model); ok {
			def = policy.SLO{TTFT: m.SLO.TTFT, TPOT: m.SLO.TPOT}
		}
	}
	slo, err := flow.ParseSLO(h, def)
	if err != nil {
		return policy.SLO{}, apiError(fasthttp.StatusBadRequest, openai.TypeBadRequestError,
			"Invalid latency objective: "+err.Error()+".", "")
	}
	return slo, nil
}

// SLOHeaders are h's SLO headers, as the gateway and /admin/explain read
// them; the slices are h's, valid until the handler returns.
func SLOHeaders(h *fasthttp.RequestHeader) flow.SLOHeaders {
	return flow.SLOHeaders{TTFT: h.Peek(flow.HeaderSLOTTFT), TPOT: h.Peek(flow.HeaderSLOTPOT),
		TTFTAlias: h.Peek(flow.HeaderSLOTTFTAlias), TPOTAlias: h.Peek(flow.HeaderSLOTPOTAlias)}
}

// requestSLO sets r's objective, or answers a malformed SLO header with a
// 400 in r's API and reports false.
func (s *Server) requestSLO(r *request) bool {
	slo, e := RequestSLO(r.live, r.model, SLOHeaders(&r.ctx.Request.Header))
	if e != nil {
		r.fail(reasonBadRequest, errors.New(e.Message))
		writeError(r.ctx, e)
		return false
	}
	r.policy.SLO = slo
	return true
}

// CountSLORefused counts a request with objective slo that the gateway
// refused for err before any engine saw it: not_admitted when a policy
// found no replica able to meet it (policy.ErrNotAdmitted), else refused.
func CountSLORefused(met *telemetry.Model, slo policy.SLO, err error) {
	switch {
	case slo == policy.SLO{}:
	case errors.Is(err, policy.ErrNotAdmitted):
		met.SLO(flow.SLONotAdmitted)
	default:
		met.SLO(flow.SLORefused)
	}
}

// CountSLOServed counts a request with objective slo whose response an
// engine began with status: failed when it was a 5xx or broken off
// (broken), not counted when it was a 4xx (the request's own fault), and
// otherwise judged (flow.Attained) on ttft, the time to the response's
// first byte, decode, the time from it to the last, and the output tokens
// of u, the engine's usage (when found).
func CountSLOServed(met *telemetry.Model, slo policy.SLO, status int, broken bool, ttft, decode time.Duration, u openai.Usage, found bool) {
	switch {
	case slo == policy.SLO{}:
	case broken || status >= 500:
		met.SLO(flow.SLOFailed)
	case status >= 400:
	default:
		tokens := 0
		if found {
			tokens = u.CompletionTokens
		}
		met.SLO(flow.Attained(slo, ttft, decode, tokens))
	}
}

// countSLO counts r as it ends, with the status the client got, the
// times its response's first and last bytes left (zero when none did), and
// the engine's usage u (when found). A request whose client left is not
// counted, nor one refused before its objective was read.
func (s *Server) countSLO(r *request, status int, first, end time.Time, u openai.Usage, found bool) {
	switch {
	case r.policy.SLO == policy.SLO{}, r.outcome == telemetry.StatusCancelled:
	case r.entry.Replica == "" && r.refused:
		CountSLORefused(r.met, r.policy.SLO, r.err)
	case r.entry.Replica == "":
		// Every attempt failed, its deadline passed or the gateway shut
		// down before an engine answered.
		if status >= 500 {
			r.met.SLO(flow.SLOFailed)
		}
	default:
		streamed := !first.IsZero()
		if !streamed {
			// A response that left whole, now: its first byte with its last.
			first = time.Now()
			end = first
		}
		if r.policy.SLO.TPOT > 0 && status < 400 && (!streamed || !found) && r.outcome != telemetry.StatusAborted {
			s.warnTPOT(r, streamed)
		}
		CountSLOServed(r.met, r.policy.SLO, status, r.outcome == telemetry.StatusAborted,
			first.Sub(r.start), end.Sub(first), u, found)
	}
}

// warnTPOT tells the operator, once, that r's TPOT objective was not
// judged, and why: the time per token is measured on streams, over the
// tokens the engine's usage reports.
func (s *Server) warnTPOT(r *request, streamed bool) {
	if s.tpotUnjudged.Swap(true) {
		return
	}
	why := "its response was not streamed, so no token's time is known"
	if streamed {
		why = "its stream carried no usage (the client did not ask for stream_options.include_usage), " +
			"so the number of tokens is unknown; set observability.usage_for_accuracy: inject to have the gateway ask for it"
	}
	s.log.Warn("a request's TPOT objective could not be judged, and requests like it are counted in "+
		telemetry.MetricSLO+" by their TTFT alone: "+why, "id", r.id, "model", r.model)
}

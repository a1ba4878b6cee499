package frontend

import (
	"time"

	"github.com/inferrail/inferrail/model/openai"
	"github.com/inferrail/inferrail/model/responses"
)

// The OpenAI Responses API, as vLLM serves it
// (vllm/entrypoints/openai/responses): routed like chat, on the prompt
// vLLM renders for it (model/responses, prompt.Preparer.Responses); the
// engine's usage (input_tokens, input_tokens_details.cached_tokens,
// output_tokens, streamed in response.completed) feeds the same
// accounting. A request that continues a stored response
// (previous_response_id) goes to the replica that answered that
// response, because vLLM keeps its responses in that engine's memory
// (with VLLM_ENABLE_RESPONSES_API_STORE=1; without it, it stores none and
// answers every previous_response_id with a 404): the gateway remembers
// which replica served each response id it relayed, and asks the
// model's replicas (vLLM's GET /v1/responses/{id}) about an id it did not
// relay (one from before a restart, or through another gateway
// instance). When the replica that stored it has left the fleet, the
// gateway answers 404 as the engine would, saying why; an id no replica
// holds is routed as any request, and the engine that gets it answers
// its 404.
const pathResponses = "/v1/responses"

// HeaderAffinity names, on a request with previous_response_id, how the
// gateway placed it: AffinityPinned (on the replica that stored the
// response) or AffinityUnknown (no replica said it holds the id).
const (
	HeaderAffinity  = "x-inferrail-affinity"
	AffinityPinned  = "pinned"
	AffinityUnknown = "unknown"
)

// responseLookupWait bounds how long the gateway asks the replicas about
// a response id it did not relay; a replica that has not answered by then
// is taken not to hold it.
const responseLookupWait = 250 * time.Millisecond

// ReasonResponseGone counts, in inferrail_request_errors_total, requests
// refused because the replica that stored their previous response (or the
// response they ask for) has left the fleet, in the gateway and the
// endpoint picker alike.
const ReasonResponseGone = "response_gone"

// maxResponseHomes bounds how many response ids the gateway remembers;
// the oldest are forgotten first. vLLM's store keeps every response until
// the engine restarts, so a conversation idle past this many newer
// responses is routed as an unknown id.
const maxResponseHomes = 1 << 16

// ResponsesTokenizer is a Tokenizer that also prepares Responses bodies.
// The gateway's tokenizer pool is one; a Tokenizer that is not routes
// Responses requests without a prediction.
type ResponsesTokenizer interface {
	PrepareResponses(model string, body []byte, deadline time.Time) (p Prompt, ok bool)
}

func prepareResponses(tok Tokenizer, model string, body []byte, deadline time.Time) (Prompt, bool) {
	rt, ok := tok.(ResponsesTokenizer)
	if !ok {
		return Prompt{}, false
	}
	return rt.PrepareResponses(model, body, deadline)
}

// pin keeps a request on one replica: every other replica of its model
// is excluded from its decisions. A nil *pin keeps nothing.
type pin struct {
	others []string
}

// exclude is a decision's Exclude list for a request that has tried
// tried: the other replicas, and tried when they leave the home one.
func (p *pin) exclude(tried []string) []string {
	if p == nil {
		return tried
	}
	return p.others
}

// pinResponse places a Responses request that continues a stored
// response on the replica that stored it. It reports false when it has
// answered the request: that replica has left the fleet.
func (s *Server) pinResponse(r *request) bool {
	if !r.responses {
		return true
	}
	p := s.homes.Place(s.base, r.model, r.body, string(r.ctx.Request.Header.Peek("Authorization")), r.deadline)
	switch {
	case p.ID == "":
		return true
	case p.Home.Replica == "":
		r.ctx.Response.Header.Set(HeaderAffinity, AffinityUnknown)
		s.log.Debug("no replica holds the previous_response_id; routed on the request alone",
			"id", r.id, "model", r.model, "previous_response_id", p.ID)
		return true
	case p.Home.Gone:
		r.fail(ReasonResponseGone, nil)
		s.log.Warn("previous_response_id was stored by a replica that has left the fleet; the conversation is lost",
			"id", r.id, "model", r.model, "previous_response_id", p.ID, "replica", p.Home.Replica)
		writeError(r.ctx, ResponseGone(p.ID, p.Home.Replica, r.model, "previous_response_id"))
		return false
	}
	r.pin = &pin{others: p.Exclude}
	r.ctx.Response.Header.Set(HeaderAffinity, AffinityPinned)
	return true
}

// ResponseGone is the answer for a response whose replica has left the
// fleet (or no longer serves model; "" names none): vLLM's 404 for an
// id it does not hold, saying why, with param naming the field.
func ResponseGone(id, replica, model, param string) *openai.Error {
	e := responses.NotFound(id)
	serves := "serves the model"
	if model != "" {
		serves = "serves `" + model + "`"
	}
	e.Message = "Response with id '" + id + "' not found: replica " + replica + ", which stored it, no longer " + serves +
		" (vLLM keeps stored responses in the engine's memory). Start a new response, sending the conversation as input."
	e.Param = param
	return e
}

// remember notes which replica served the response r's answer names (a
// body, or a stream's first bytes), so that a request continuing it goes
// there. Only 200 answers of requests that asked to be stored count.
func (s *Server) remember(r *request, replica string, status int, answer []byte) {
	if r.responses {
		s.homes.Remember(r.body, replica, status, answer)
	}
}

// ResponsesUsage reads the usage of a non-streamed Responses answer, for
// the endpoint picker (the gateway's request does it through
// responseUsage).
func ResponsesUsage(body []byte) (openai.Usage, bool) { return responses.FindUsage(body) }

// ResponsesStreamUsage reads the usage of a Responses stream from its
// tail, for the endpoint picker.
func ResponsesStreamUsage(tail *openai.StreamTail) (openai.Usage, bool) {
	return responsesStreamUsage(tail)
}

// responsesStreamDone reports whether a Responses stream has ended with
// its last event (response.completed, or an error).
func responsesStreamDone(tail *openai.StreamTail) bool {
	v, whole, ok := tail.LastDataEnd()
	if !ok {
		return false
	}
	final, _, _ := responses.Final(v, whole)
	return final
}

// responsesStreamUsage is the usage of a Responses stream's
// response.completed event.
func responsesStreamUsage(tail *openai.StreamTail) (openai.Usage, bool) {
	v, whole, ok := tail.LastDataEnd()
	if !ok {
		return openai.Usage{}, false
	}
	_, u, found := responses.Final(v, whole)
	return u, found
}

package frontend

import (
	"context"
	"net/url"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

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

// reasonResponseGone counts, in inferrail_request_errors_total, requests
// refused because the replica that stored their previous response has
// left the fleet.
const reasonResponseGone = "response_gone"

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

// responseHomes maps the ids of the responses the gateway relayed to the
// replicas that served them. Safe for concurrent use; the zero value is
// ready.
type responseHomes struct {
	mu    sync.Mutex
	home  map[string]string
	order []string // a ring of the ids held, oldest at next
	next  int
}

func (h *responseHomes) put(id, replica string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.home == nil {
		h.home = make(map[string]string)
		h.order = make([]string, 0, 1024)
	}
	if _, ok := h.home[id]; ok {
		h.home[id] = replica
		return
	}
	if len(h.order) < maxResponseHomes {
		h.order = append(h.order, id)
	} else {
		delete(h.home, h.order[h.next])
		h.order[h.next] = id
		h.next = (h.next + 1) % maxResponseHomes
	}
	h.home[id] = replica
}

func (h *responseHomes) get(id string) (string, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	r, ok := h.home[id]
	return r, ok
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
	f, err := openai.FindMember(r.body, "previous_response_id")
	if err != nil || !f.Found || !f.IsString || f.Name == "" {
		return true
	}
	id := f.Name
	home, ok := s.homes.get(id)
	if !ok {
		if home, ok = s.findHome(r, id); !ok {
			r.ctx.Response.Header.Set(HeaderAffinity, AffinityUnknown)
			s.log.Debug("no replica holds the previous_response_id; routed on the request alone",
				"id", r.id, "model", r.model, "previous_response_id", id)
			return true
		}
		s.homes.put(id, home)
	}
	if snap, ok := s.fleet.Snapshot(home); !ok || !snap.Serves(r.model) {
		r.fail(reasonResponseGone, nil)
		s.log.Warn("previous_response_id was stored by a replica that has left the fleet; the conversation is lost",
			"id", r.id, "model", r.model, "previous_response_id", id, "replica", home)
		writeError(r.ctx, apiError(fasthttp.StatusNotFound, "invalid_request_error",
			"Response with id '"+id+"' not found: replica "+home+", which stored it, no longer serves `"+r.model+
				"` (vLLM keeps stored responses in the engine's memory). Start a new response, sending the conversation as input.",
			"previous_response_id"))
		return false
	}
	p := &pin{}
	for _, snap := range s.fleet.Replicas() {
		if snap.ID != home && snap.Serves(r.model) {
			p.others = append(p.others, snap.ID)
		}
	}
	r.pin = p
	r.ctx.Response.Header.Set(HeaderAffinity, AffinityPinned)
	return true
}

// findHome asks every replica serving r's model, at once, whether it
// stores the response id (GET /v1/responses/{id}, with r's Authorization
// and the replica's engine key), and returns the first that answers 200,
// within responseLookupWait.
func (s *Server) findHome(r *request, id string) (string, bool) {
	deadline := time.Now().Add(responseLookupWait)
	if r.deadline.Before(deadline) {
		deadline = r.deadline
	}
	ctx, cancel := context.WithDeadline(s.base, deadline)
	defer cancel()
	uri := pathResponses + "/" + url.PathEscape(id)
	authz := string(r.ctx.Request.Header.Peek("Authorization"))
	found := make(chan string, 1)
	var wg sync.WaitGroup
	for _, snap := range s.fleet.Replicas() {
		if !snap.Serves(r.model) {
			continue
		}
		pool, err := s.pool(snap.URL)
		if err != nil {
			continue
		}
		wg.Add(1)
		go func(replica string) {
			defer wg.Done()
			req := fasthttp.AcquireRequest()
			defer fasthttp.ReleaseRequest(req)
			req.Header.SetMethod(fasthttp.MethodGet)
			req.SetRequestURI(uri)
			if len(authz) > 0 {
				req.Header.Set("Authorization", authz)
			}
			s.engineAuth(&req.Header, replica)
			resp, err := pool.Do(ctx, req)
			if err != nil {
				return
			}
			ok := resp.StatusCode() == fasthttp.StatusOK
			resp.Close()
			if ok {
				select {
				case found <- replica:
					cancel() // the others need not answer
				default:
				}
			}
		}(snap.ID)
	}
	wg.Wait()
	select {
	case home := <-found:
		return home, true
	default:
		return "", false
	}
}

// remember notes which replica served the response r's answer names (a
// body, or a stream's first bytes), so that a request continuing it goes
// there. Only 200 answers of requests that asked to be stored count.
func (s *Server) remember(r *request, replica string, status int, answer []byte) {
	if !r.responses || status != fasthttp.StatusOK {
		return
	}
	if f, err := openai.FindMember(r.body, "store"); err == nil && f.Found && string(r.body[f.Start:f.End]) == "false" {
		return
	}
	if id := responses.ID(answer); id != "" {
		s.homes.put(id, replica)
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

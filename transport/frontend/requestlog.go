package frontend

import (
	"time"

	"github.com/inferrail/inferrail/actors/fleet"
	"github.com/inferrail/inferrail/model/openai"
	"github.com/inferrail/inferrail/transport/requestlog"
	"github.com/inferrail/inferrail/transport/telemetry"
)

// The request log (observability.request_log) gets a line per generation
// request (chat, completions, Messages, Responses) that resolved to a
// model: its entry (request.entry) is filled as the request goes, and
// handed to the log when it ends. A body the gateway refuses before it
// knows the model is not logged: a replay has nothing to send it to.

// beginEntry starts r's entry, once its prompt is prepared.
func (s *Server) beginEntry(r *request, path []byte) {
	r.logKind = openAIGeneration(path) || r.messages || r.responses
	if !r.logKind {
		return
	}
	r.logged = s.rlog.Sampled(r.policy.Key)
	r.entry.Arrival, r.entry.Model, r.entry.Session = r.start, r.model, r.policy.SessionKey
	if r.tokenized {
		r.entry.InputLength = r.policy.PromptTokens
	}
}

// decided notes the policy of r's latest decision.
func (r *request) decided(d fleet.Decision) { r.entry.Policy = d.Policy }

// committed notes the decision whose response r relays.
func (r *request) committed(d fleet.Decision) { r.entry.Served(d.Replica, d.Predicted, d.CachedTokens) }

// used notes the engine's usage of r's committed response.
func (r *request) used(u openai.Usage, found bool) {
	if found {
		r.entry.Usage(u)
	}
}

// logRequest hands r's entry to the request log as r ends: status is what
// the client was sent; the first byte relayed left at first (zero when none
// did) and the last at end.
func (s *Server) logRequest(r *request, status int, first, end time.Time) {
	if !r.logKind || s.rlog == nil {
		return
	}
	r.entry.Status = status
	r.entry.Ended(first, end)
	s.rlog.Log(r.policy.Key, &r.entry, r.policy.Blocks, r.policy.BlockSize)
}

// logUnary logs r, ended in its handler: a non-streamed response leaves in
// one write once the handler returns, so its first and last bytes are
// taken together, now, when an engine's response is relayed at all.
func (s *Server) logUnary(r *request) {
	if !r.logKind || s.rlog == nil {
		return
	}
	status := r.ctx.Response.StatusCode()
	if r.outcome == telemetry.StatusCancelled {
		status = requestlog.StatusClientGone
	}
	var now time.Time
	if r.entry.Replica != "" && r.outcome != telemetry.StatusCancelled && r.outcome != telemetry.StatusAborted {
		now = time.Now()
	}
	s.logRequest(r, status, now, now)
}

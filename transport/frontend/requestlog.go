package frontend

import (
	"time"

	"github.com/inferrail/inferrail/actors/fleet"
	"github.com/inferrail/inferrail/model/openai"
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
func (r *request) committed(d fleet.Decision) {
	r.entry.Replica = d.Replica
	if d.Predicted {
		r.entry.Predicted, r.entry.HasPredicted = d.CachedTokens, true
	}
}

// firstByte notes the first byte of r's response relayed, at now.
func (r *request) firstByte(now time.Time) { r.entry.FirstByte = now.Sub(r.start) }

// used notes the engine's usage of r's committed response.
func (r *request) used(u openai.Usage, found bool) {
	if !found {
		return
	}
	r.entry.OutputLength = u.CompletionTokens
	if u.Details {
		r.entry.Cached, r.entry.HasCached = u.CachedTokens, true
	}
}

// logRequest hands r's entry to the request log as r ends: status is what
// the client was sent, and the last byte left at end (zero when no engine's
// byte was relayed).
func (s *Server) logRequest(r *request, status int, end time.Time) {
	if !r.logKind || s.rlog == nil {
		return
	}
	e := &r.entry
	e.Status = status
	if !end.IsZero() {
		e.End = end.Sub(r.start)
	} else {
		e.FirstByte = 0
	}
	s.rlog.Log(r.policy.Key, e, r.policy.Blocks, r.policy.BlockSize)
}

// logUnary logs r, ended in its handler: a non-streamed response leaves in
// one write once the handler returns, so its first and last bytes are
// taken together, now, when the engine's response was relayed at all.
func (s *Server) logUnary(r *request) {
	if !r.logKind || s.rlog == nil {
		return
	}
	status := r.ctx.Response.StatusCode()
	if r.outcome == telemetry.StatusCancelled {
		status = statusClientGone
	}
	var end time.Time
	if r.entry.Replica != "" && r.outcome != telemetry.StatusCancelled && r.outcome != telemetry.StatusAborted {
		end = time.Now()
		r.firstByte(end)
	}
	s.logRequest(r, status, end)
}

// statusClientGone is the status logged for a request whose client left
// before its response: nginx's 499, as the gateway's errors name it.
const statusClientGone = 499

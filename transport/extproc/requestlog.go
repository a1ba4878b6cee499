package extproc

import (
	"strings"
	"time"

	"github.com/inferrail/inferrail/model/openai"
	"github.com/inferrail/inferrail/transport/requestlog"
)

// The request log (observability.request_log) gets a line per generation
// request (chat, completions, Messages, Responses) the picker routed, as
// the front end writes it: the entry is begun once the request is routed
// and handed to the log when its response ends. A request the picker
// answers itself (a refusal) has no line.

// generation reports whether path (its query cut) is a generation API's.
func generation(path string) bool {
	for _, p := range []string{"/v1/chat/completions", "/v1/completions", "/v1/messages", "/v1/responses"} {
		if strings.HasSuffix(path, p) {
			return true
		}
	}
	return false
}

// beginEntry starts the routed request's entry.
func (x *exchange) beginEntry(path string) {
	x.logKind = x.s.rlog != nil && generation(path)
	if !x.logKind {
		return
	}
	x.entry = requestlog.Entry{Arrival: x.start, Model: x.model, Session: x.policy.SessionKey, Policy: x.d.Policy}
	if x.tokenized {
		x.entry.InputLength = x.policy.PromptTokens
	}
}

// logRequest hands the entry to the log as the response ends, at now, with
// the engine's usage u when found.
func (x *exchange) logRequest(u openai.Usage, found bool, now time.Time) {
	if !x.logKind {
		return
	}
	e := &x.entry
	e.Policy = x.d.Policy
	e.Status = requestlog.StatusClientGone
	if x.sawHeaders {
		e.Status = x.status
		e.Served(x.d.Replica, x.d.Predicted, x.d.CachedTokens)
	}
	if found {
		e.Usage(u)
	}
	e.Ended(x.firstAt, now)
	x.s.rlog.Log(x.policy.Key, e, x.policy.Blocks, x.policy.BlockSize)
}

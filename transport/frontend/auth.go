package frontend

import (
	"time"

	"github.com/valyala/fasthttp"

	"github.com/inferrail/inferrail/actors/replica"
	"github.com/inferrail/inferrail/transport/auth"
	"github.com/inferrail/inferrail/transport/tracing"
)

// Reasons of inferrail_request_errors_total the auth hooks count.
const (
	reasonUnauthorized    = "unauthorized"
	reasonModelNotAllowed = "model_not_allowed"
)

// authorize checks a request's API key before its body is read, so a
// client without a key uploads nothing. It returns who the request is
// (nil without API keys), or false once it has answered 401. Paths the
// client port does not serve pass, to get their 404 whatever the key.
func (s *Server) authorize(ctx *fasthttp.RequestCtx) (*auth.Identity, bool) {
	if s.auth == nil {
		return nil, true
	}
	path := ctx.Path()
	if _, ok := allowedMethods(string(path)); !ok {
		return nil, true
	}
	who, e := s.auth.Client(&ctx.Request.Header, path)
	if e == nil {
		return who, true
	}
	s.met.Model("").Error(reasonUnauthorized)
	writeError(ctx, e)
	ctx.Response.Header.Set("WWW-Authenticate", auth.Challenge)
	if ctx.Request.Header.ContentLength() != 0 {
		// The body is left unread: the connection cannot carry another
		// request.
		ctx.SetConnectionClose()
	}
	return nil, false
}

// authorized is authorize for the Expect: 100-continue check.
func (s *Server) authorized(ctx *fasthttp.RequestCtx) bool {
	_, ok := s.authorize(ctx)
	return ok
}

// deniedModel answers a restricted key's request for a model it may not
// use, or one that does not exist, alike, as OpenAI does: 404
// model_not_found. It reports false for a request that may go on.
func (s *Server) deniedModel(ctx *fasthttp.RequestCtx, span tracing.Span, who *auth.Identity, name, model string, ok bool) bool {
	if !who.Restricted() || (ok && who.Allows(model)) {
		return false
	}
	s.met.Model("").Error(reasonModelNotAllowed)
	writeError(ctx, auth.ModelDenied(name))
	span.End(ctx.Response.StatusCode(), reasonModelNotAllowed, nil)
	return true
}

// engineAuth puts replica's engine key on an attempt in place of the
// client's credentials (see auth.Guard.EngineAuth).
func (s *Server) engineAuth(h *fasthttp.RequestHeader, replica string) {
	if s.auth != nil {
		s.auth.EngineAuth(h, replica)
	}
}

// tenantOf and keyIDOf name a request's tenant and key id in logs and the
// decision log; "" without API keys.
func tenantOf(who *auth.Identity) string {
	if who == nil {
		return ""
	}
	return who.Tenant
}

func keyIDOf(who *auth.Identity) string {
	if who == nil {
		return ""
	}
	return who.KeyID
}

// engineAnswered raises replica.WarnEngineUnauthorized when an engine
// refuses the credentials the gateway gave it (401), and clears it at the
// engine's next success. Without gateway-managed engine keys a 401 is the
// client's own key's, and says nothing about the replica.
func (s *Server) engineAnswered(id string, status int) {
	if s.auth == nil || (status != fasthttp.StatusUnauthorized && status >= 300) || !s.auth.ManagesEngineKeys() {
		return
	}
	snap, ok := s.fleet.Snapshot(id)
	if !ok {
		return
	}
	if status == fasthttp.StatusUnauthorized {
		snap.Warnings.Raise(s.log, time.Now(), replica.WarnEngineUnauthorized,
			"the engine refuses the gateway's requests with 401: check that upstream.api_key_file or the replica's api_key_file holds its --api-key",
			"replica", id)
	} else if snap.Warnings.Active(replica.WarnEngineUnauthorized) {
		snap.Warnings.Clear(s.log, replica.WarnEngineUnauthorized)
	}
}

package admin

import (
	"github.com/valyala/fasthttp"

	"github.com/inferrail/inferrail/transport/auth"
)

// WithAuth guards every admin route with g's admin credentials (a bearer
// token or a client certificate; /metrics left open when
// auth.admin.metrics_public); call it before Serve.
func (s *Server) WithAuth(g *auth.Guard) *Server {
	s.auth = g
	return s
}

// authorize answers 401 to a request without a good admin credential and
// reports false; true lets it on.
func (s *Server) authorize(ctx *fasthttp.RequestCtx) bool {
	if s.auth == nil {
		return true
	}
	e := s.auth.Admin(ctx)
	if e == nil {
		return true
	}
	writeErr(ctx, e.Status, e.Type, e.Message)
	ctx.Response.Header.Set("WWW-Authenticate", auth.Challenge)
	return false
}

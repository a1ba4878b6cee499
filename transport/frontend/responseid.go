package frontend

import (
	"bufio"
	"context"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/inferrail/inferrail/model/responses"
	"github.com/inferrail/inferrail/transport/auth"
)

// The stored-response endpoints vLLM serves beside POST /v1/responses
// (responses/api_router.py): GET /v1/responses/{id} (retrieve, or with
// ?stream=true&starting_after=N replay a background response's events)
// and POST /v1/responses/{id}/cancel. vLLM has no DELETE. Each goes to
// the replica that stores the response, found as for previous_response_id
// (Homes.Locate, among the replicas of the models the client's key may
// use); an id no replica holds gets vLLM's 404, and an id whose replica
// has left the fleet the gateway's documented 404 (ResponseGone).
const (
	pathResponseByID = pathResponses + "/"
	cancelSuffix     = "/cancel"
)

// responseRoute reads a stored-response path: the id, whether it is the
// cancel endpoint, and the method it allows; ok is false for any other
// path.
func responseRoute(path string) (id string, cancel bool, allow string, ok bool) {
	rest, found := strings.CutPrefix(path, pathResponseByID)
	if !found || rest == "" {
		return "", false, "", false
	}
	if id, found = strings.CutSuffix(rest, cancelSuffix); found {
		return id, true, "POST", id != "" && !strings.Contains(id, "/")
	}
	return rest, false, "GET, HEAD", !strings.Contains(rest, "/")
}

// allowedMethods is the methods path allows; ok is false for a path the
// client port does not serve.
func allowedMethods(path string) (allow string, ok bool) {
	if allow, ok = routes[path]; ok {
		return allow, true
	}
	_, _, allow, ok = responseRoute(path)
	return allow, ok
}

// responseByID forwards a stored-response request to the replica that
// stores the response, and relays its answer as it comes.
func (s *Server) responseByID(ctx *fasthttp.RequestCtx, who *auth.Identity) {
	id, cancel, _, _ := responseRoute(string(ctx.Path()))
	deadline := time.Now().Add(s.cfg.Server.RequestTimeout)
	authz := string(ctx.Request.Header.Peek("Authorization"))
	home := s.homes.Locate(s.base, id, who.Allows, authz, deadline)
	if home.Replica == "" || home.Foreign {
		// Foreign: stored by a replica of models the key may not use, which
		// is not the key's to know.
		writeError(ctx, responses.NotFound(id))
		return
	}
	if home.Gone {
		s.met.Model("").Error(ReasonResponseGone)
		s.log.Warn("the response was stored by a replica that has left the fleet; it is lost",
			"response_id", id, "replica", home.Replica)
		writeError(ctx, ResponseGone(id, home.Replica, "", "response_id"))
		return
	}
	snap, ok := s.fleet.Snapshot(home.Replica)
	if !ok {
		writeError(ctx, responses.NotFound(id))
		return
	}
	p, err := s.pool(snap.URL)
	if err != nil {
		writeError(ctx, upstreamError(err, ""))
		return
	}
	req := fasthttp.AcquireRequest()
	defer fasthttp.ReleaseRequest(req)
	req.Header.SetMethod(fasthttp.MethodGet)
	if cancel {
		req.Header.SetMethod(fasthttp.MethodPost)
		req.SetBody(ctx.PostBody())
		req.Header.SetContentTypeBytes(ctx.Request.Header.ContentType())
	}
	req.SetRequestURIBytes(ctx.RequestURI())
	if authz != "" {
		req.Header.Set("Authorization", authz)
	}
	s.engineAuth(&req.Header, home.Replica)
	rctx, stop := context.WithDeadline(s.base, deadline)
	resp, err := p.Do(rctx, req)
	if err != nil {
		stop()
		s.met.Model("").Error("upstream_failed")
		writeError(ctx, upstreamError(err, ""))
		return
	}
	s.engineAnswered(home.Replica, resp.StatusCode())
	ctx.SetStatusCode(resp.StatusCode())
	copyResponseHeaders(&ctx.Response.Header, resp.Header)
	ctx.Response.Header.Set(HeaderReplica, home.Replica)
	if resp.ContentLength() >= 0 && resp.ContentLength() <= maxBufferedBody {
		err = readBodyInto(&ctx.Response, resp)
		resp.Close()
		stop()
		if err != nil {
			ctx.SetConnectionClose()
			ctx.Response.ResetBody()
		}
		return
	}
	// A replayed event stream (?stream=true), or a chunked body: relayed
	// as it comes, until it ends or the request's deadline.
	ctx.SetBodyStreamWriter(func(w *bufio.Writer) {
		defer stop()
		defer resp.Close()
		rb := relayBufs.Get().(*relayBuf)
		defer relayBufs.Put(rb)
		for {
			n, err := resp.Read(rb.b[:])
			if n > 0 {
				if _, werr := w.Write(rb.b[:n]); werr != nil || w.Flush() != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	})
}

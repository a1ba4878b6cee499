package frontend

import (
	"errors"
	"io"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/inferrail/inferrail/actors/fleet"
	"github.com/inferrail/inferrail/config"
	"github.com/inferrail/inferrail/model/flow"
	"github.com/inferrail/inferrail/model/openai"
	"github.com/inferrail/inferrail/model/policy"
	"github.com/inferrail/inferrail/model/route"
	"github.com/inferrail/inferrail/transport/auth"
	"github.com/inferrail/inferrail/transport/decisionlog"
	"github.com/inferrail/inferrail/transport/requestlog"
	"github.com/inferrail/inferrail/transport/telemetry"
	"github.com/inferrail/inferrail/transport/tracing"
	"github.com/inferrail/inferrail/transport/upstream"
)

// maxBufferedBody caps a non-streamed engine response the gateway holds
// before sending it on.
const maxBufferedBody = 256 << 20

// relayBuf is what one streamed relay holds: its read buffer, and the tail
// of what it passed on, which tells whether the response's last byte has
// gone to the client and holds the final usage chunk.
type relayBuf struct {
	b    [32 << 10]byte
	tail openai.StreamTail
	head streamHead // a Messages or Responses stream's start
	// strip and out remove the usage chunk of a stream whose usage the
	// gateway asked for (observability.usage_for_accuracy: inject).
	strip openai.UsageStrip
	out   []byte
}

var relayBufs = sync.Pool{New: func() any { return new(relayBuf) }}

// request is what every attempt of one client request shares.
type request struct {
	ctx      *fasthttp.RequestCtx
	model    string
	body     []byte // the body to send, model spliced in
	id       string // x-request-id
	start    time.Time
	deadline time.Time
	w        *watch
	met      *telemetry.Model
	// wb is w's home, and first the first attempt's context: the request
	// is allocated anyway.
	wb    watch
	first attemptCtx
	// tried is the home of the replicas route has tried: three attempts
	// worth, retry.max_attempts' default.
	tried [3]string
	// relay streams the committed attempt's response, when it streams.
	relay relayStream
	// live is the config in effect when the request came: its retries
	// and logging follow it even if a reload lands meanwhile.
	live *config.Config
	// user is the body's user member (Resolved.User).
	user openai.ModelField
	// policy is what the policy may know of the request; tokenized
	// reports that its prompt was prepared.
	policy    policy.Request
	tokenized bool
	// refused: routing or flow control refused the request (its error is
	// err) before any engine saw it.
	refused bool
	batch   bool // a completions batch, routed on its first prompt (Prompt.Batch)
	// messages: an Anthropic Messages request (/v1/messages), whose
	// responses and usage are Anthropic's.
	messages bool
	// responses: an OpenAI Responses request (/v1/responses); pin keeps
	// one that continues a stored response on the replica holding it.
	responses bool
	pin       *pin
	// stripUsage is set when the gateway added stream_options.include_usage
	// to the body, so the usage chunk is not the client's.
	stripUsage bool
	// who is the API key the request came with; nil without API keys.
	who *auth.Identity
	// lim is the request's part in its tenant's rate limits.
	lim limits
	// entry is the request's line in the request log, filled as it goes
	// (requestlog.go); logKind: a generation request, which the log
	// takes; logged: the log sampled it.
	entry           requestlog.Entry
	logKind, logged bool

	// span is the request's server span and up its current attempt's
	// upstream span; both are zero when tracing is off. outcome and err
	// are how the request ended, for span.
	span, up tracing.Span
	outcome  string
	err      error
}

// fail counts a request that failed for reason.
func (r *request) fail(reason string, err error) {
	r.met.Error(reason)
	r.outcome, r.err = reason, err
}

func (s *Server) proxy(ctx *fasthttp.RequestCtx, who *auth.Identity) {
	start := time.Now()
	span := s.tracer.Request(spanName(ctx.Path()), fasthttp.MethodPost, ctx.Path(),
		requestCarrier{&ctx.Request.Header}, start)
	rs := ResolveModel(s.fleet, ctx.PostBody())
	if rs.Reason == reasonBadRequest {
		s.met.Model("").Error(rs.Reason)
		writeError(ctx, rs.Err)
		span.End(ctx.Response.StatusCode(), rs.Reason, nil)
		return
	}
	if s.deniedModel(ctx, span, who, rs.Name, rs.Model, rs.Err == nil) {
		return
	}
	if rs.Err != nil {
		s.met.Model("").Error(rs.Reason)
		writeError(ctx, rs.Err)
		span.End(ctx.Response.StatusCode(), rs.Reason, nil)
		return
	}
	if e := rs.PromptError(string(ctx.Path())); e != nil {
		s.met.Model(rs.Model).Error(reasonBadRequest)
		writeError(ctx, e)
		span.End(ctx.Response.StatusCode(), reasonBadRequest, nil)
		return
	}
	model, body := rs.Model, rs.Body
	r := &request{ctx: ctx, model: model, body: body, user: rs.User, start: start,
		deadline: start.Add(s.cfg.Server.RequestTimeout), met: s.met.Model(model), live: s.live.Load(), span: span, who: who,
		messages: string(ctx.Path()) == pathMessages, responses: string(ctx.Path()) == pathResponses}
	if id := ctx.Request.Header.Peek("X-Request-Id"); ValidRequestID(id) {
		r.id = string(id)
	} else {
		r.id = NewRequestID()
	}
	ctx.Response.Header.Set("X-Request-Id", r.id)
	s.policyRequest(r, ctx.Path())
	if !s.requestSLO(r) {
		span.End(ctx.Response.StatusCode(), r.outcome, r.err)
		return
	}
	s.beginEntry(r, ctx.Path())
	if !s.pinResponse(r) {
		s.logUnary(r)
		span.End(ctx.Response.StatusCode(), r.outcome, nil)
		return
	}
	if s.cfg.Observability.UsageForAccuracy == config.UsageInject && openAIGeneration(ctx.Path()) {
		r.body, r.stripUsage = openai.IncludeUsage(make([]byte, 0, len(r.body)+40), r.body)
	}
	if span.Recording() {
		tokens := -1
		if r.tokenized {
			tokens = r.policy.PromptTokens
		}
		span.Describe(model, r.id, tokens)
		if who != nil {
			span.Tenant(who.Tenant, who.KeyID)
		}
	}
	if r.live.Logging.LogPrompts {
		s.log.Debug("request", "id", r.id, "model", model, "tenant", tenantOf(who), "key", keyIDOf(who), "body", string(body))
	}

	if !s.admitLimits(r) {
		s.logUnary(r)
		span.End(ctx.Response.StatusCode(), r.outcome, nil)
		return
	}

	r.w = &r.wb
	s.watchConn(r.w, ctx.Conn())
	if !s.route(r) {
		s.settleLimits(r)
		s.unwatch(r.w)
		s.countSLO(r, ctx.Response.StatusCode(), time.Time{}, time.Time{}, openai.Usage{}, false)
		s.logUnary(r)
		span.End(ctx.Response.StatusCode(), r.outcome, r.err)
	}
}

// Resolved is a request body's model, resolved on the fleet.
type Resolved struct {
	// Name is the model the body names, "" when none.
	Name string
	// Model is the configured model it resolves to; "" with Err.
	Model string
	// Body is the body to send: the client's, with Model spliced in where
	// the body named an alias, no model or a model that is not a string.
	Body []byte
	// Prompt and User locate Body's prompt and user members, found in the
	// same scan as its model (User's value decoded, Prompt's not).
	Prompt, User openai.ModelField
	// Err is the client's answer when the body cannot be routed, and
	// Reason its reason in inferrail_request_errors_total:
	// reasonBadRequest (the body is not a JSON object) or
	// reasonUnknownModel (no such model, or none named where several are
	// served).
	Err    *openai.Error
	Reason string
}

// The reasons ResolveModel fails with.
const (
	reasonBadRequest   = "bad_request"
	reasonUnknownModel = "unknown_model"
)

// ResolveModel reads the model body names and resolves it on fl, as both
// the gateway and the endpoint picker (transport/extproc) do before
// routing.
func ResolveModel(fl *fleet.Fleet, body []byte) Resolved {
	var fs [3]openai.ModelField
	err := openai.FindMembers(body, requestMembers, fs[:])
	f := fs[0]
	if err != nil {
		return notObject(body)
	}
	model, ok := fl.Resolve(f.Name)
	if !ok {
		rs := Resolved{Name: f.Name, Body: body, Reason: reasonUnknownModel, Err: openai.ModelNotFound(f.Name)}
		if f.Name == "" {
			rs.Err = apiError(fasthttp.StatusBadRequest, openai.TypeBadRequestError,
				"The request names no model, and the gateway serves more than one.", "model")
		}
		return rs
	}
	if !f.Found || !f.IsString || f.Name != model {
		body = openai.SpliceModel(make([]byte, 0, len(body)+len(model)+12), body, f, model)
		// The splice moved what follows the model; find the rest again.
		if err := openai.FindMembers(body, requestMembers, fs[:]); err != nil {
			return notObject(body)
		}
	}
	return Resolved{Name: f.Name, Model: model, Body: body, Prompt: fs[1], User: fs[2]}
}

// notObject is ResolveModel's answer to a body that is not a JSON object.
func notObject(body []byte) Resolved {
	return Resolved{Body: body, Reason: reasonBadRequest,
		Err: apiError(fasthttp.StatusBadRequest, "", "The request body is not a JSON object.", "")}
}

// requestMembers are the members of a request body that the gateway reads
// before routing, in ResolveModel's one scan: the model, the prompt (whose
// shape PromptError checks) and the user (a conversation key).
var requestMembers = []openai.Member{{Key: "model", Value: true}, {Key: "prompt"}, {Key: "user", Value: true}}

// runtimeRand draws from the runtime's random source, which is safe for
// concurrent use.
type runtimeRand struct{}

func (runtimeRand) Uint64() uint64 { return rand.Uint64() }

// NewRequestID is a fresh x-request-id for a request that came without a
// valid one.
func NewRequestID() string { return openai.RandomID(runtimeRand{}) }

// failUpstream answers a request whose every attempt failed.
func (s *Server) failUpstream(r *request, last error) {
	r.fail("upstream_failed", last)
	writeError(r.ctx, upstreamError(last, r.model))
}

// route runs the attempts of r until one commits a response or none is
// left. It reports whether a streamed relay took over r's watch.
func (s *Server) route(r *request) (streaming bool) {
	maxAttempts := max(r.live.Retry.MaxAttempts, 1)
	tried := r.tried[:0]
	var last error
	for attempt := 1; ; attempt++ {
		if attempt > 1 {
			if !s.backoff(r, attempt) {
				s.failUpstream(r, last)
				return false
			}
			r.met.Retries.Inc()
		}
		t0 := time.Now()
		// Through flow control: it may wait in the model's queue.
		d, err := s.dispatch(r, tried, attempt)
		took := time.Since(t0)
		if r.span.Recording() {
			r.span.Route(t0, traceRoute(attempt, d, err))
		}
		if err != nil {
			switch {
			case errors.Is(err, errClientGone):
				r.met.Disconnects.Inc()
				r.outcome = telemetry.StatusCancelled
				r.ctx.SetConnectionClose()
			case errors.Is(err, errShutdown):
				r.fail("shutdown", err)
				writeError(r.ctx, apiError(fasthttp.StatusServiceUnavailable, "ServiceUnavailableError", "The gateway is shutting down.", ""))
			case last != nil:
				s.failUpstream(r, last)
			default:
				r.fail(RouteReason(err), err)
				r.refused = true
				writeError(r.ctx, RouteError(err, r.model))
			}
			if reason := s.droppedReason(err); reason != "" && last == nil {
				r.ctx.Response.Header.Set(flow.HeaderDropped, reason)
			}
			return false
		}
		s.met.Decision(d.Policy, took)
		r.decided(d)
		tried = append(tried, d.Replica)
		res := s.attempt(r, d, attempt, attempt < maxAttempts)
		switch {
		case res.streaming:
			return true
		case res.done:
			return false
		}
		last = res.err
		if attempt >= maxAttempts {
			s.failUpstream(r, last)
			return false
		}
	}
}

// done ends an attempt (fleet.Done) and wakes a request queued for its
// model's freed slot.
func (s *Server) done(r *request, d fleet.Decision, o fleet.Outcome) {
	s.fleet.Done(d, o)
	s.gate.Wake(r.model)
}

// pickWait bounds how long a request waits for its routing actor. A decision
// takes microseconds, but a burst queues decisions behind each other; the
// bound is for an actor that is stuck, not one that is busy.
const pickWait = time.Second

// pick asks the fleet for a replica, preferring ones this request has not
// tried; when every candidate has been tried, a tried one may serve again.
// A decision of a sampled request goes to the decision log.
func (s *Server) pick(r *request, tried []string, attempt int) (fleet.Decision, error) {
	dl := time.Now().Add(pickWait)
	if dl.After(r.deadline) {
		dl = r.deadline
	}
	rec := decisionlog.Record{RequestID: r.id, Model: r.model, Attempt: attempt,
		PromptTokens: r.policy.PromptTokens, Blocks: len(r.policy.Blocks), Tokenized: r.tokenized,
		Tenant: tenantOf(r.who), KeyID: keyIDOf(r.who)}
	pr := fleet.PickRequest{Model: r.model, Policy: r.policy, Exclude: r.pin.exclude(tried), Deadline: dl, Unpriced: r.batch}
	d, err := Decide(s.fleet, s.dlog, r.met, pr, rec)
	if (errors.Is(err, route.ErrNoReplica) || errors.Is(err, route.ErrFilteredOut)) && len(tried) > 0 {
		pr.Exclude = r.pin.exclude(nil)
		d, err = Decide(s.fleet, s.dlog, r.met, pr, rec)
	}
	return d, err
}

// Decide asks fl for a replica (pr), as every attempt of the gateway and
// the endpoint picker does: it counts a priced decision's estimate on
// met, and logs a decision dlog samples (by rec.RequestID) with rec,
// which holds what the caller knows of the request.
func Decide(fl *fleet.Fleet, dlog *decisionlog.Writer, met *telemetry.Model, pr fleet.PickRequest, rec decisionlog.Record) (fleet.Decision, error) {
	pr.Log = dlog.Sampled(rec.RequestID)
	d, err := fl.Pick(pr)
	if err == nil && d.Predicted {
		met.Estimated(d.Policy, d.Estimate)
	}
	if err == nil && d.Explanation != nil {
		lr := rec // on the heap only when logged
		lr.Decision = decisionlog.View(d.Explanation)
		if d.Predicted {
			cached, ttft := d.CachedTokens, d.Estimate.Seconds()
			lr.PredictedCachedTokens, lr.EstimatedTTFT = &cached, &ttft
		}
		dlog.Log(&lr)
	}
	return d, err
}

// backoff waits before retry attempt n (n ≥ 2): retry.backoff doubled per
// retry, within the request's deadline. It reports false when no time is left.
func (s *Server) backoff(r *request, n int) bool {
	wait := r.live.Retry.Backoff << (n - 2)
	if time.Now().Add(wait).After(r.deadline) {
		return false
	}
	if wait <= 0 {
		return true
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-s.base.Done():
		return false
	}
}

type result struct {
	done      bool  // a response was written (or the client has gone)
	streaming bool  // a relay owns the rest of the response
	err       error // why the attempt failed, when it may be retried
}

// attempt sends r to d's replica, attempt n. Before the first response byte, a failure
// that another replica might not have is returned for a retry when canRetry;
// after it, the response is committed.
func (s *Server) attempt(r *request, d fleet.Decision, n int, canRetry bool) result {
	series := s.met.Replica(d.Replica, r.model, d.Policy)
	series.Decisions.Inc()
	r.up = r.span.Upstream(n, d.Replica, d.URL, r.ctx.RequestURI())
	pool, err := s.pool(d.URL)
	if err != nil {
		s.done(r, d, fleet.OutcomeFailed)
		r.up.End(0, "failed", err)
		return result{err: err}
	}
	actx := r.newAttempt(n)
	r.w.arm(d.Replica, actx)

	req := fasthttp.AcquireRequest()
	req.Header.SetMethod(fasthttp.MethodPost)
	req.SetRequestURIBytes(r.ctx.RequestURI())
	copyRequestHeaders(&req.Header, &r.ctx.Request.Header)
	s.engineAuth(&req.Header, d.Replica)
	req.Header.Set("X-Request-Id", r.id)
	// The engine continues the trace (vLLM's --otlp-traces-endpoint):
	// the upstream span, not the client's, is its parent.
	r.up.Inject(requestCarrier{&req.Header})
	req.SetBodyRaw(r.body)
	resp, err := pool.Do(actx, req)
	fasthttp.ReleaseRequest(req)

	if err != nil {
		cause := actx.Cause()
		actx.cancel(nil)
		switch {
		case errors.Is(cause, errClientGone):
			s.done(r, d, fleet.OutcomeCancelled)
			r.met.Disconnects.Inc()
			r.finish(series, telemetry.StatusCancelled)
			r.up.End(0, telemetry.StatusCancelled, nil)
			r.ctx.SetConnectionClose()
			return result{done: true}
		case errors.Is(cause, errShutdown):
			s.done(r, d, fleet.OutcomeCancelled)
			r.fail("shutdown", cause)
			r.up.End(0, "shutdown", cause)
			writeError(r.ctx, apiError(fasthttp.StatusServiceUnavailable, "ServiceUnavailableError", "The gateway is shutting down.", ""))
			return result{done: true}
		case errors.Is(cause, errTimeout):
			s.done(r, d, fleet.OutcomeFailed)
			r.fail("timeout", cause)
			r.up.End(0, "timeout", cause)
			writeError(r.ctx, apiError(fasthttp.StatusGatewayTimeout, "", "The engine did not answer within server.request_timeout.", ""))
			return result{done: true}
		case errors.Is(cause, errReplicaUnhealthy):
			err = cause
		}
		s.done(r, d, fleet.OutcomeFailed)
		r.up.End(0, "failed", err)
		return result{err: &attemptError{replica: d.Replica, err: err}}
	}

	status := resp.StatusCode()
	s.engineAnswered(d.Replica, status)
	if canRetry && (status == 502 || status == 503 || status == 504) {
		resp.Close()
		actx.cancel(nil)
		s.done(r, d, fleet.OutcomeFailed)
		r.up.End(status, "retried", nil)
		return result{err: &attemptError{replica: d.Replica, err: errors.New("answered " + strconv.Itoa(status))}}
	}

	// The response is committed: nothing is retried from here on.
	r.lim.committed = true
	r.committed(d)
	r.up.Event(tracing.FirstByte)
	r.span.Served(d.Replica, n)
	s.fleet.FirstByte(d)
	s.gate.Wake(r.model)
	r.w.headArrived()
	outcome := fleet.OutcomeOK
	if status >= 500 {
		outcome = fleet.OutcomeFailed
	}
	ctx := r.ctx
	ctx.SetStatusCode(status)
	copyResponseHeaders(&ctx.Response.Header, resp.Header)
	ctx.Response.Header.Set("X-Request-Id", r.id)
	ctx.Response.Header.Set(HeaderReplica, d.Replica)
	ctx.Response.Header.Set(HeaderPolicy, d.Policy)
	if d.Predicted {
		r.predicted(ctx, r.policy.PromptTokens, d.CachedTokens)
	}

	if resp.ContentLength() < 0 || resp.ContentLength() > maxBufferedBody {
		ctx.Response.SetBodyStream(s.newRelay(r, d, resp, actx, ctx.Conn(), series, outcome, status), -1)
		return result{streaming: true}
	}
	err = readBodyInto(&ctx.Response, resp)
	resp.Close()
	cause := actx.Cause()
	actx.cancel(nil)
	if err != nil {
		Account(s.fleet, s.log, r.met, series, d, r.policy.PromptTokens, openai.Usage{}, false)
		if errors.Is(cause, errClientGone) {
			s.done(r, d, fleet.OutcomeCancelled)
			r.met.Disconnects.Inc()
			r.finish(series, telemetry.StatusCancelled)
		} else {
			s.done(r, d, fleet.OutcomeFailed)
			r.finish(series, telemetry.StatusAborted)
			r.err = err
		}
		r.up.End(status, r.outcome, err)
		ctx.SetConnectionClose()
		ctx.Response.ResetBody()
		return result{done: true}
	}
	body := ctx.Response.Body()
	s.remember(r, d.Replica, status, body)
	if status >= 400 {
		// An engine's error answer generated nothing.
		r.lim.used = 0
	}
	var u openai.Usage
	found := false
	if (r.wantsUsage() || d.Predicted || r.logged) && status == fasthttp.StatusOK {
		if u, found = r.responseUsage(body); found {
			r.used(u, found)
			r.usage(u)
			if r.tokenized {
				s.checkPrompt(r, d.Replica, series, u.PromptTokens)
			}
		}
	}
	Account(s.fleet, s.log, r.met, series, d, r.policy.PromptTokens, u, found)
	s.done(r, d, outcome)
	r.finish(series, telemetry.StatusClass(status))
	r.up.End(status, r.outcome, nil)
	return result{done: true}
}

// readBodyInto reads an engine's Content-Length body into the client's
// response body, which fasthttp pools, through a pooled buffer: io.ReadAll
// grew a slice of its own, which SetBody then copied.
func readBodyInto(dst *fasthttp.Response, src io.Reader) error {
	dst.ResetBody()
	rb := relayBufs.Get().(*relayBuf)
	defer relayBufs.Put(rb)
	for {
		n, err := src.Read(rb.b[:])
		dst.AppendBody(rb.b[:n])
		switch {
		case err == io.EOF:
			return nil
		case err != nil:
			return err
		}
	}
}

// newAttempt is the context of r's attempt n, running until r's deadline.
func (r *request) newAttempt(n int) *attemptCtx {
	a := &r.first
	if n > 1 {
		a = new(attemptCtx)
	}
	a.start(r.deadline)
	return a
}

// finish records a request's end on its replica's series.
func (r *request) finish(s *telemetry.Series, status string) {
	s.Request(status)
	s.Duration.Update(time.Since(r.start).Seconds())
	r.outcome = status
}

// spanName is the server span's name for a proxied path: a constant, so
// that it costs nothing.
func spanName(path []byte) string {
	switch string(path) {
	case "/v1/chat/completions":
		return "POST /v1/chat/completions"
	case "/v1/completions":
		return "POST /v1/completions"
	case pathMessages:
		return "POST " + pathMessages
	case pathCountTokens:
		return "POST " + pathCountTokens
	case pathResponses:
		return "POST " + pathResponses
	}
	return "POST"
}

// traceRoute is a decision (or the error that stopped one) for a route span.
func traceRoute(attempt int, d fleet.Decision, err error) tracing.Route {
	rt := tracing.Route{Attempt: attempt, Policy: d.Policy, Replica: d.Replica, Err: err,
		Predicted: d.Predicted, CachedTokens: d.CachedTokens, EstimatedTTFT: d.Estimate}
	if d.Explanation != nil {
		for _, x := range d.Explanation.Replicas {
			if x.Offered {
				rt.Candidates++
			}
		}
	}
	return rt
}

// errEngineBroke is why a response the engine had started is incomplete.
var errEngineBroke = errors.New("the engine broke off its response")

// attemptError is a failed attempt that was not the client's doing.
type attemptError struct {
	replica string
	err     error
}

func (e *attemptError) Error() string { return "replica " + e.replica + ": " + e.err.Error() }
func (e *attemptError) Unwrap() error { return e.err }

// upstreamError is the answer when every attempt failed.
func upstreamError(err error, model string) *openai.Error {
	msg := "Every attempt to reach an engine serving `" + model + "` failed"
	if err != nil {
		msg += ": " + err.Error()
	}
	var de *upstream.DialError
	if errors.As(err, &de) || errors.Is(err, errReplicaUnhealthy) {
		return apiError(fasthttp.StatusServiceUnavailable, "ServiceUnavailableError", msg+".", "")
	}
	return apiError(fasthttp.StatusBadGateway, "BadGatewayError", msg+".", "")
}

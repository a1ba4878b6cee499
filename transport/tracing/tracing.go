package tracing

import (
	"context"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Scope is the instrumentation scope the gateway's spans are reported under.
const Scope = "github.com/inferrail/inferrail"

// Span names besides the server span's, which is its method and path.
const (
	RouteSpan    = "route"
	UpstreamSpan = "upstream"
)

// Events on an upstream span: the engine's response head arrived, and the
// first chunk of a streamed body (what inferrail_ttft_seconds measures).
const (
	FirstByte  = "first_byte"
	FirstChunk = "first_chunk"
)

// Attribute keys: OpenTelemetry's HTTP semantic conventions, and the
// gateway's own under inferrail.*.
const (
	KeyMethod        = attribute.Key("http.request.method")
	KeyPath          = attribute.Key("url.path")
	KeyURL           = attribute.Key("url.full")
	KeyStatus        = attribute.Key("http.response.status_code")
	KeyErrorType     = attribute.Key("error.type")
	KeyModel         = attribute.Key("inferrail.model")
	KeyRequestID     = attribute.Key("inferrail.request_id")
	KeyPromptTokens  = attribute.Key("inferrail.prompt_tokens")
	KeyAttempt       = attribute.Key("inferrail.attempt")
	KeyAttempts      = attribute.Key("inferrail.attempts")
	KeyPolicy        = attribute.Key("inferrail.policy")
	KeyReplica       = attribute.Key("inferrail.replica")
	KeyCandidates    = attribute.Key("inferrail.candidates")
	KeyCachedTokens  = attribute.Key("inferrail.predicted_cached_tokens")
	KeyEstimatedTTFT = attribute.Key("inferrail.estimated_ttft_s")
	KeyOutcome       = attribute.Key("inferrail.outcome")
	KeyTenant        = attribute.Key("inferrail.tenant")
	KeyKeyID         = attribute.Key("inferrail.key_id")
)

// Tracer starts the gateway's spans. A nil *Tracer starts none. A Tracer is
// safe for concurrent use.
type Tracer struct {
	t    trace.Tracer
	prop propagation.TraceContext
}

// New returns a Tracer over tp: a Provider's, or in tests an SDK provider
// with an in-memory exporter.
func New(tp trace.TracerProvider) *Tracer {
	return &Tracer{t: tp.Tracer(Scope)}
}

// Span is one span of a request: its server span, or an attempt's upstream
// span. The zero Span (tracing off) does nothing. A Span is a small value;
// copies refer to the same span. It belongs to its request: one goroutine
// at a time uses it.
type Span struct {
	s   trace.Span      // nil when tracing is off
	ctx context.Context // carries s: the parent of its children, and what Inject sends
	t   *Tracer
	// rec reports that s records: only then are attributes, events and
	// children worth building. A request the sampler dropped keeps its
	// non-recording span for Inject alone.
	rec    bool
	server bool
}

// Request starts the server span of a client request that arrived at
// start, named name (such as "POST /v1/chat/completions"). It continues the
// trace of the client's traceparent in h, when it sent a valid one.
func (t *Tracer) Request(name, method string, path []byte, h propagation.TextMapCarrier, start time.Time) Span {
	if t == nil {
		return Span{}
	}
	ctx := t.prop.Extract(context.Background(), h)
	ctx, s := t.t.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer), trace.WithTimestamp(start))
	sp := Span{s: s, ctx: ctx, t: t, rec: s.IsRecording(), server: true}
	if sp.rec {
		s.SetAttributes(KeyMethod.String(method), KeyPath.String(string(path)))
	}
	return sp
}

// Recording reports whether s records, so that a caller can skip building
// what only a recorded span would keep.
func (s Span) Recording() bool { return s.rec }

// Describe names the request's model and id, and its prompt's length in
// tokens when the gateway tokenized it (promptTokens ≥ 0).
func (s Span) Describe(model, requestID string, promptTokens int) {
	if !s.rec {
		return
	}
	s.s.SetAttributes(KeyModel.String(model), KeyRequestID.String(requestID))
	if promptTokens >= 0 {
		s.s.SetAttributes(KeyPromptTokens.Int(promptTokens))
	}
}

// Tenant records the API key a request came with: its tenant and id, never
// the key.
func (s Span) Tenant(tenant, keyID string) {
	if !s.rec {
		return
	}
	s.s.SetAttributes(KeyTenant.String(tenant), KeyKeyID.String(keyID))
}

// Route is one routing decision, for a "route" span.
type Route struct {
	Attempt int    // 1 for the first attempt
	Policy  string // the policy (the request's split arm) that chose
	Replica string // the replica chosen; empty when none was
	// Candidates is how many replicas were offered to the policy; 0 when
	// the decision was not explained.
	Candidates int
	// Predicted reports that the KV index priced the winner: CachedTokens
	// prompt tokens predicted cached there, and EstimatedTTFT the cost
	// model's time to first token.
	Predicted     bool
	CachedTokens  int
	EstimatedTTFT time.Duration
	Err           error // why no replica was chosen
}

// Route records a routing decision that started at start and ended now as
// a "route" child of s.
func (s Span) Route(start time.Time, r Route) {
	if !s.rec {
		return
	}
	_, c := s.t.t.Start(s.ctx, RouteSpan, trace.WithSpanKind(trace.SpanKindInternal), trace.WithTimestamp(start))
	c.SetAttributes(KeyAttempt.Int(r.Attempt), KeyPolicy.String(r.Policy))
	if r.Replica != "" {
		c.SetAttributes(KeyReplica.String(r.Replica))
	}
	if r.Candidates > 0 {
		c.SetAttributes(KeyCandidates.Int(r.Candidates))
	}
	if r.Predicted {
		c.SetAttributes(KeyCachedTokens.Int(r.CachedTokens), KeyEstimatedTTFT.Float64(r.EstimatedTTFT.Seconds()))
	}
	if r.Err != nil {
		c.SetStatus(codes.Error, r.Err.Error())
	}
	c.End()
}

// Upstream starts the "upstream" client span of attempt n, sent to replica
// at base (its base URL) for path. For a request the sampler dropped it returns s itself, whose
// Inject still tells the engine the trace and that it is not sampled.
func (s Span) Upstream(n int, replica, base string, path []byte) Span {
	if !s.rec {
		return s
	}
	ctx, c := s.t.t.Start(s.ctx, UpstreamSpan, trace.WithSpanKind(trace.SpanKindClient))
	c.SetAttributes(KeyAttempt.Int(n), KeyReplica.String(replica), KeyMethod.String("POST"), KeyURL.String(base+string(path)))
	return Span{s: c, ctx: ctx, t: s.t, rec: true}
}

// Inject writes s's trace context into h: traceparent, and tracestate when
// the trace carries one.
func (s Span) Inject(h propagation.TextMapCarrier) {
	if s.s == nil {
		return
	}
	s.t.prop.Inject(s.ctx, h)
}

// Event records that name (FirstByte, FirstChunk) happened now.
func (s Span) Event(name string) {
	if !s.rec {
		return
	}
	s.s.AddEvent(name)
}

// Served records, on a server span, the replica that answered and after
// how many attempts.
func (s Span) Served(replica string, attempts int) {
	if !s.rec {
		return
	}
	s.s.SetAttributes(KeyReplica.String(replica), KeyAttempts.Int(attempts))
}

// End ends s. status is the HTTP status (0 when no response came), outcome
// how it ended (such as "2xx", "failed", "cancelled", "retried"), and err
// what failed, if anything. As OpenTelemetry's HTTP conventions have it, a
// server span is an error on a 5xx or err, a client span on any status
// from 400 or err.
func (s Span) End(status int, outcome string, err error) {
	if !s.rec {
		return
	}
	if status > 0 {
		s.s.SetAttributes(KeyStatus.Int(status))
	}
	if outcome != "" {
		s.s.SetAttributes(KeyOutcome.String(outcome))
	}
	failed := status >= 500 || (!s.server && status >= 400)
	switch {
	case err != nil:
		s.s.SetStatus(codes.Error, err.Error())
		s.s.SetAttributes(KeyErrorType.String(errorType(status, outcome)))
	case failed:
		s.s.SetStatus(codes.Error, "")
		s.s.SetAttributes(KeyErrorType.String(errorType(status, outcome)))
	}
	s.s.End()
}

// errorType is error.type: the status code when a response came, as the
// HTTP conventions ask, else the outcome (a low-cardinality identifier).
func errorType(status int, outcome string) string {
	if status > 0 {
		return strconv.Itoa(status)
	}
	if outcome == "" {
		return "_OTHER"
	}
	return outcome
}

package frontend

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/inferrail/inferrail/actors/fleet"
	"github.com/inferrail/inferrail/config"
	"github.com/inferrail/inferrail/model/openai"
	"github.com/inferrail/inferrail/transport/auth"
	"github.com/inferrail/inferrail/transport/conncheck"
	"github.com/inferrail/inferrail/transport/decisionlog"
	"github.com/inferrail/inferrail/transport/ratelimit"
	"github.com/inferrail/inferrail/transport/requestlog"
	"github.com/inferrail/inferrail/transport/sockio"
	"github.com/inferrail/inferrail/transport/telemetry"
	"github.com/inferrail/inferrail/transport/tracing"
	"github.com/inferrail/inferrail/transport/upstream"
)

// Options configure a Server.
type Options struct {
	Config *config.Config
	Fleet  *fleet.Fleet
	Logger *slog.Logger // nil discards
	// Metrics records requests; nil keeps them in a registry of its own.
	Metrics *telemetry.Registry
	// Tokenizer prepares prompts for the KV index; nil routes every
	// request without a prediction.
	Tokenizer Tokenizer
	// DecisionLog gets the sampled requests' routing decisions; nil logs
	// none.
	DecisionLog *decisionlog.Writer
	// RequestLog gets a line per sampled generation request
	// (observability.request_log); nil logs none.
	RequestLog *requestlog.Writer
	// Tracer traces proxied requests (spans and W3C trace context to the
	// engines); nil traces none, at no cost.
	Tracer *tracing.Tracer
	// Auth checks API keys and holds the engines' keys; nil: the port is
	// open and the client's headers are forwarded as they came.
	Auth *auth.Guard
	// UpstreamTLS reaches https:// replicas; nil: the system's roots.
	UpstreamTLS *tls.Config
	// Limits holds the tenants' rate limits, which SetConfig reloads; nil:
	// one of the server's own, for Config's rate_limits.
	Limits *ratelimit.Limiter

	// fasthttpBodies leaves reading request bodies to fasthttp, as the
	// gateway did before readBody (see body.go); benchmarks compare the two.
	fasthttpBodies bool
}

// Server is the gateway's client port. See the package doc.
type Server struct {
	cfg    *config.Config // as started: the server and upstream sections
	live   atomic.Pointer[config.Config]
	fleet  *fleet.Fleet
	log    *slog.Logger
	met    *telemetry.Registry
	tok    Tokenizer
	dlog   *decisionlog.Writer
	rlog   *requestlog.Writer
	tracer *tracing.Tracer
	auth   *auth.Guard
	upTLS  *tls.Config
	limits *ratelimit.Limiter
	srv    *fasthttp.Server
	// streamBodies: fasthttp streams request bodies, and readBody reads
	// them.
	streamBodies bool
	// watcher checks clients and replicas of requests in flight.
	watcher *conncheck.Watcher
	// gate queues requests while every replica of their model is full or
	// the pool is saturated (flow_control).
	gate *Gate
	// homes remembers which replica stored each Responses response.
	homes *Homes

	pools *pools // by replica base URL
	// tpotUnjudged is set once a TPOT objective could not be judged, and
	// the operator told why (countSLO).
	tpotUnjudged atomic.Bool

	shutdown sync.Once
	// base is cancelled at shutdown's deadline, ending every attempt still
	// running.
	base       context.Context
	cancelBase context.CancelCauseFunc
}

// SetConfig puts a reloaded config in effect for the requests that start
// from now on: its retry section, flow_control, rate_limits and
// logging.log_prompts.
// The sections the server was built from (server, upstream) need a
// restart, and are read from the config New was given.
func (s *Server) SetConfig(c *config.Config) {
	s.live.Store(c)
	s.limits.Apply(c)
	s.gate.Apply(c)
}

// New builds a Server. It starts the watcher goroutine; Shutdown stops it.
func New(opts Options) *Server {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{
		cfg:    opts.Config,
		fleet:  opts.Fleet,
		log:    log,
		met:    opts.Metrics,
		tok:    opts.Tokenizer,
		dlog:   opts.DecisionLog,
		rlog:   opts.RequestLog,
		tracer: opts.Tracer,
		auth:   opts.Auth,
		upTLS:  opts.UpstreamTLS,
		pools:  newPools(upstream.Options{DialTimeout: opts.Config.Upstream.DialTimeout, TLS: opts.UpstreamTLS}),

		streamBodies: !opts.fasthttpBodies,
	}
	if s.met == nil {
		s.met = telemetry.New(opts.Fleet)
	}
	s.live.Store(opts.Config)
	s.limits = opts.Limits
	if s.limits == nil {
		s.limits = ratelimit.New(opts.Config, nil, nil)
		s.met.Include(s.limits.Metrics())
	}
	s.gate = NewGate(opts.Config, opts.Fleet, s.met, log)
	s.homes = newHomes(opts.Fleet, s.met, log, s.pools, s.engineAuth)
	s.base, s.cancelBase = context.WithCancelCause(context.Background())
	s.watcher = conncheck.NewWatcher(watchEvery)
	sc := &s.cfg.Server
	s.srv = &fasthttp.Server{
		Handler:            s.handle,
		ErrorHandler:       s.readError,
		ExpectHandler:      s.expect,
		Name:               "inferrail",
		ReadTimeout:        sc.RequestTimeout,
		IdleTimeout:        sc.HeaderReadTimeout,
		MaxRequestBodySize: int(sc.MaxBodyBytes),
		// readBody reads streamed bodies within server.max_body_bytes.
		StreamRequestBody: s.streamBodies,
		// A multipart body is a body like any other: fasthttp would read it
		// into a form (and temporary files) before the handler, whatever
		// its length, when streaming.
		DisablePreParseMultipartForm: s.streamBodies,
		ReduceMemoryUsage:            false,
		CloseOnShutdown:              true,
		// Bodies are never logged: fasthttp's own error log gets none.
		Logger: discardLogger{},
	}
	return s
}

type discardLogger struct{}

func (discardLogger) Printf(string, ...any) {}

// Serve accepts clients on ln until Shutdown.
func (s *Server) Serve(ln net.Listener) error {
	err := s.srv.Serve(sockio.Listener{Listener: ln})
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return err
	}
	return nil
}

// Shutdown stops accepting, lets requests in flight finish until ctx ends,
// then cuts the rest, and stops the watcher and the upstream pools.
// Calls after the first return nil at once.
func (s *Server) Shutdown(ctx context.Context) error {
	var err error
	s.shutdown.Do(func() {
		stop := context.AfterFunc(ctx, s.cut)
		defer stop()
		err = s.srv.ShutdownWithContext(ctx)
		s.cut()
		s.watcher.Close()
		s.pools.close()
	})
	return err
}

// cut ends every request still running: the base first, then every
// watched request's current attempt (see watch.arm).
func (s *Server) cut() {
	s.cancelBase(errShutdown)
	s.watcher.FireAll(errShutdown)
}

// pool returns the connection pool for a replica, creating it on first use.
func (s *Server) pool(url string) (*upstream.Pool, error) { return s.pools.get(url) }

// routes lists every path the client port serves and its methods; it is
// never changed.
var routes = withPooling(map[string]string{
	"/v1/chat/completions": "POST",
	"/v1/completions":      "POST",
	pathMessages:           "POST",
	pathCountTokens:        "POST",
	pathResponses:          "POST",
	pathTokenize:           "POST",
	pathDetokenize:         "POST",
	pathChatRender:         "POST",
	pathCompletionRender:   "POST",
	"/v1/models":           "GET, HEAD",
	"/health":              "GET, HEAD",
})

// withPooling adds the pooling paths to r, POST only.
func withPooling(r map[string]string) map[string]string {
	for _, p := range poolingPaths {
		r[p] = "POST"
	}
	return r
}

func (s *Server) handle(ctx *fasthttp.RequestCtx) {
	who, ok := s.authorize(ctx)
	if !ok {
		return
	}
	who.CountRequest()
	// Every body is read before the request is looked at, as fasthttp
	// reads them when it does not stream them.
	if s.streamBodies && !s.readBody(ctx) {
		return
	}
	path := string(ctx.Path())
	allow, ok := allowedMethods(path)
	if !ok {
		writeError(ctx, apiError(fasthttp.StatusNotFound, "", "Not Found", ""))
		return
	}
	method := string(ctx.Method())
	if !methodAllowed(allow, method) {
		ctx.Response.Header.Set("Allow", allow)
		writeError(ctx, apiError(fasthttp.StatusMethodNotAllowed, "", "Method Not Allowed", ""))
		return
	}
	switch path {
	case "/v1/models":
		s.models(ctx, who)
	case "/health":
		s.health(ctx)
	case pathCountTokens:
		s.countTokens(ctx, who)
	case pathTokenize:
		s.tokenize(ctx, who)
	case pathDetokenize:
		s.detokenize(ctx, who)
	case pathChatRender, pathCompletionRender:
		s.render(ctx, who, path == pathChatRender)
	default:
		if _, _, _, byID := responseRoute(path); byID {
			s.responseByID(ctx, who)
			return
		}
		s.proxy(ctx, who)
	}
}

func methodAllowed(allow, method string) bool {
	switch allow {
	case "POST":
		return method == "POST"
	default:
		return method == "GET" || method == "HEAD"
	}
}

// expect answers Expect: 100-continue. A request that would be refused
// anyway (unknown path, wrong method, a body over the limit) is refused at
// once, before the client uploads its body, with the same JSON error (404,
// 405 with Allow, 413) it would get without the header; fasthttp then
// closes the connection, since the client may have started sending.
func (s *Server) expect(ctx *fasthttp.RequestCtx) int {
	h := &ctx.Request.Header
	allow, ok := allowedMethods(string(h.RequestURI()))
	if !ok {
		// RequestURI may carry a query; fall back to the path.
		allow, ok = allowedMethods(string(pathOf(h.RequestURI())))
	}
	switch {
	case !ok:
		writeError(ctx, apiError(fasthttp.StatusNotFound, "", "Not Found", ""))
	case !methodAllowed(allow, string(h.Method())):
		ctx.Response.Header.Set("Allow", allow)
		writeError(ctx, apiError(fasthttp.StatusMethodNotAllowed, "", "Method Not Allowed", ""))
	case !s.authorized(ctx):
		// 401 (authorized answered), before the client uploads a body it
		// has no key for.
	case s.cfg.Server.MaxBodyBytes > 0 && int64(h.ContentLength()) > s.cfg.Server.MaxBodyBytes:
		s.met.Model("").Error("body_too_large")
		writeError(ctx, apiError(fasthttp.StatusRequestEntityTooLarge, "",
			"The request body is larger than server.max_body_bytes ("+strconv.FormatInt(s.cfg.Server.MaxBodyBytes, 10)+" bytes).", ""))
	default:
		return fasthttp.StatusContinue
	}
	return ctx.Response.StatusCode()
}

func pathOf(uri []byte) []byte {
	for i, c := range uri {
		if c == '?' {
			return uri[:i]
		}
	}
	return uri
}

// readError answers requests fasthttp or readBody could not read: a body
// over the limit (413), a body or head that stalled past
// server.request_timeout (408), and malformed HTTP (400), in the OpenAI
// error shape.
func (s *Server) readError(ctx *fasthttp.RequestCtx, err error) {
	var ne net.Error
	switch {
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		s.met.Model("").Error("body_too_large")
		writeError(ctx, apiError(fasthttp.StatusRequestEntityTooLarge, "",
			"The request body is larger than server.max_body_bytes ("+strconv.FormatInt(s.cfg.Server.MaxBodyBytes, 10)+" bytes).", ""))
	case errors.As(err, &ne) && ne.Timeout():
		s.met.Model("").Error("request_timeout")
		writeError(ctx, apiError(fasthttp.StatusRequestTimeout, "",
			"The request was not received within server.request_timeout.", ""))
	default:
		s.met.Model("").Error("bad_http")
		writeError(ctx, apiError(fasthttp.StatusBadRequest, "", "The request is not valid HTTP/1.1.", ""))
	}
	ctx.SetConnectionClose()
}

func (s *Server) health(ctx *fasthttp.RequestCtx) {
	for _, snap := range s.fleet.Replicas() {
		if snap.Healthy {
			ctx.SetStatusCode(fasthttp.StatusOK)
			return
		}
	}
	writeError(ctx, apiError(fasthttp.StatusServiceUnavailable, "ServiceUnavailableError", "No replica is healthy.", ""))
}

// models lists configured models and aliases in config order, each with the
// card an engine published (its id set to the listed name), or a minimal
// card until one has. A key allowed some models sees only those.
func (s *Server) models(ctx *fasthttp.RequestCtx, who *auth.Identity) {
	now := time.Now().Unix()
	b := append(make([]byte, 0, 1024), `{"object":"list","data":[`...)
	n := 0
	for _, m := range s.fleet.Models() {
		if !who.Allows(m.Model) {
			continue
		}
		if n++; n > 1 {
			b = append(b, ',')
		}
		if f, err := openai.FindMember(m.Card, "id"); m.Card != nil && err == nil {
			b = openai.SpliceMember(b, m.Card, f, "id", m.ID)
			continue
		}
		b = openai.AppendModelCard(b, &openai.ModelCard{ID: m.ID, Created: now, Root: m.Model,
			PermissionID: openai.PermissionID(runtimeRand{})})
	}
	b = append(b, "]}"...)
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.SetContentType("application/json")
	ctx.SetBody(b)
}

package extproc

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"sync/atomic"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/inferrail/inferrail/actors/fleet"
	"github.com/inferrail/inferrail/config"
	"github.com/inferrail/inferrail/transport/decisionlog"
	"github.com/inferrail/inferrail/transport/frontend"
	"github.com/inferrail/inferrail/transport/requestlog"
	"github.com/inferrail/inferrail/transport/telemetry"
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
	Tokenizer frontend.Tokenizer
	// DecisionLog gets the sampled requests' routing decisions; nil logs
	// none.
	DecisionLog *decisionlog.Writer
	// RequestLog gets a line per sampled generation request it routed
	// (observability.request_log); nil logs none.
	RequestLog *requestlog.Writer
	// UpstreamTLS reaches https:// replicas when the picker asks them
	// which stores a response id; nil: the system's roots.
	UpstreamTLS *tls.Config
}

// Server is the endpoint picker's ext_proc service. See the package doc.
type Server struct {
	extprocv3.UnimplementedExternalProcessorServer

	cfg   *config.Config // as started: server.max_body_bytes, request_timeout
	live  atomic.Pointer[config.Config]
	fleet *fleet.Fleet
	log   *slog.Logger
	met   *telemetry.Registry
	tok   frontend.Tokenizer
	dlog  *decisionlog.Writer
	rlog  *requestlog.Writer
	// gate is flow control, the front end's: requests wait while every
	// replica of their model is full or the pool is saturated.
	gate *frontend.Gate
	// homes keeps a request continuing a stored response
	// (previous_response_id) on the replica that stores it, as the front
	// end does.
	homes *frontend.Homes

	// base is cancelled by Shutdown, ending the waits in the gate.
	base       context.Context
	cancelBase context.CancelCauseFunc
}

var _ extprocv3.ExternalProcessorServer = (*Server)(nil)

// New builds a Server. It starts nothing.
func New(opts Options) *Server {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: opts.Config, fleet: opts.Fleet, log: log, met: opts.Metrics, tok: opts.Tokenizer, dlog: opts.DecisionLog,
		rlog: opts.RequestLog}
	if s.met == nil {
		s.met = telemetry.New(opts.Fleet)
	}
	s.live.Store(opts.Config)
	s.gate = frontend.NewGate(opts.Config, opts.Fleet, s.met, log)
	s.homes = frontend.NewHomes(frontend.HomesOptions{Fleet: opts.Fleet, Metrics: s.met, Logger: log,
		DialTimeout: opts.Config.Upstream.DialTimeout, TLS: opts.UpstreamTLS})
	s.base, s.cancelBase = context.WithCancelCause(context.Background())
	return s
}

// SetConfig puts a reloaded config in effect for the streams that start
// from now on (logging.log_prompts, flow_control); the rest needs a
// restart.
func (s *Server) SetConfig(c *config.Config) {
	s.live.Store(c)
	s.gate.Apply(c)
}

// Register serves the ext_proc service on g.
func (s *Server) Register(g *grpc.Server) { extprocv3.RegisterExternalProcessorServer(g, s) }

// Shutdown ends the requests waiting in the flow-control queue (503,
// rejected-shutting-down) and the response lookups, and closes their
// connections; streams past routing run on until the gRPC server stops
// them.
func (s *Server) Shutdown() {
	s.cancelBase(errShutdown)
	s.homes.Close()
}

// Process serves one HTTP request's stream. It answers each message in
// the order Envoy's FULL_DUPLEX_STREAMED mode requires: the request
// headers only once the body has ended and the request is routed, then
// the body, then the response's headers and each of its chunks as they
// come.
func (s *Server) Process(stream extprocv3.ExternalProcessor_ProcessServer) error {
	x := newExchange(s, stream)
	defer x.end()
	for {
		req, err := stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) || status.Code(err) == codes.Canceled || stream.Context().Err() != nil {
				return nil // Envoy closed the stream, or the client left
			}
			return err
		}
		stop, err := x.handle(req)
		if err != nil {
			if stream.Context().Err() != nil {
				return nil
			}
			return err
		}
		if stop {
			return nil
		}
	}
}

// pickWait bounds how long a decision waits for its routing actor, as the
// front end's does.
const pickWait = time.Second

package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/inferrail/inferrail/actors/fleet"
	"github.com/inferrail/inferrail/config"
	"github.com/inferrail/inferrail/transport/decisionlog"
	"github.com/inferrail/inferrail/transport/extproc"
	"github.com/inferrail/inferrail/transport/frontend"
	"github.com/inferrail/inferrail/transport/requestlog"
	"github.com/inferrail/inferrail/transport/telemetry"
)

func runEPP(ctx context.Context, args []string, _, stderr io.Writer) error {
	path, env, cfg, err := configFlag("epp", args, stderr)
	if err != nil {
		return err
	}
	return runGateway(ctx, true, path, env, cfg, stderr, nil)
}

// front is what serves the clients' requests: the HTTP front end (serve)
// or the endpoint picker (epp).
type front interface {
	SetConfig(*config.Config)
	// serve serves until shutdown.
	serve() error
	// shutdown lets requests in flight finish until ctx ends, then cuts
	// the rest.
	shutdown(ctx context.Context) error
}

// httpFront is the HTTP front end on its listener.
type httpFront struct {
	*frontend.Server
	ln net.Listener
}

func (h httpFront) serve() error                       { return h.Serve(h.ln) }
func (h httpFront) shutdown(ctx context.Context) error { return h.Shutdown(ctx) }

// picker is the endpoint picker: the ext_proc service on ln (TLS when
// tls.ext_proc sets it) and the gRPC health service on
// ext_proc.health_listen.
type picker struct {
	srv    *extproc.Server
	health *extproc.Health
	grpc   *grpc.Server // ext_proc
	hgrpc  *grpc.Server // health
	ln     net.Listener
	hln    net.Listener
	every  config.Health

	// hctx ends the readiness updates (stopHealth, at shutdown).
	hctx       context.Context
	stopHealth context.CancelFunc
	wg         sync.WaitGroup
}

func newPicker(cfg *config.Config, fl *fleet.Fleet, log *slog.Logger, met *telemetry.Registry, tok frontend.Tokenizer,
	dlog *decisionlog.Writer, rlog *requestlog.Writer, tlsCfg, upstreamTLS *tls.Config, ln net.Listener) (*picker, error) {
	hln, err := net.Listen("tcp", cfg.ExtProc.HealthListen)
	if err != nil {
		return nil, fmt.Errorf("ext_proc.health_listen: %w", err)
	}
	var opts []grpc.ServerOption
	if tlsCfg != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(tlsCfg)))
	}
	p := &picker{
		srv: extproc.New(extproc.Options{Config: cfg, Fleet: fl, Logger: log, Metrics: met, Tokenizer: tok, DecisionLog: dlog, RequestLog: rlog,
			UpstreamTLS: upstreamTLS}),
		health: extproc.NewHealth(fl),
		grpc:   grpc.NewServer(opts...),
		hgrpc:  grpc.NewServer(),
		ln:     ln, hln: hln, every: cfg.Health,
	}
	p.hctx, p.stopHealth = context.WithCancel(context.Background())
	p.srv.Register(p.grpc)
	p.health.Register(p.hgrpc)
	return p, nil
}

func (p *picker) SetConfig(c *config.Config) { p.srv.SetConfig(c) }

func (p *picker) serve() error {
	p.wg.Add(2)
	go func() { defer p.wg.Done(); p.health.Run(p.hctx, p.every.Interval) }()
	go func() { defer p.wg.Done(); p.hgrpc.Serve(p.hln) }()
	err := p.grpc.Serve(p.ln)
	if errors.Is(err, grpc.ErrServerStopped) {
		return nil
	}
	return err
}

// shutdown turns readiness off first, so that Envoy stops sending, ends
// the requests queued for admission, and lets the streams in flight end
// until ctx does.
func (p *picker) shutdown(ctx context.Context) error {
	p.stopHealth()
	p.srv.Shutdown()
	done := make(chan struct{})
	go func() { p.grpc.GracefulStop(); close(done) }()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		p.grpc.Stop()
		<-done
		err = ctx.Err()
	}
	p.hgrpc.Stop()
	p.wg.Wait()
	return err
}

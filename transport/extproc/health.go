package extproc

import (
	"context"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/inferrail/inferrail/actors/fleet"
)

// The gRPC health services the protocol names (GIE endpoint picker
// protocol; llm-d's Envoy checks the third).
const (
	ServiceLiveness  = "liveness"
	ServiceReadiness = "readiness"
	ServiceExtProc   = "envoy.service.ext_proc.v3.ExternalProcessor"
)

// Health serves the gRPC health protocol for the picker. liveness is
// SERVING from the start. readiness and the ext_proc service are SERVING
// while some replica of the fleet passes its health checks, since only
// then can the picker name an endpoint; llm-d's EPP is ready once its
// datastore has synced, which a fleet with a healthy replica has. Safe
// for concurrent use.
type Health struct {
	hs    *health.Server
	fleet *fleet.Fleet
}

// NewHealth returns the health service of fl's picker.
func NewHealth(fl *fleet.Fleet) *Health {
	h := &Health{hs: health.NewServer(), fleet: fl}
	h.hs.SetServingStatus(ServiceLiveness, healthpb.HealthCheckResponse_SERVING)
	h.check()
	return h
}

// Register serves the health service on g.
func (h *Health) Register(g *grpc.Server) { healthpb.RegisterHealthServer(g, h.hs) }

// Run updates readiness every interval until ctx ends; then every service
// turns NOT_SERVING, so that Envoy stops sending new requests while the
// picker drains.
func (h *Health) Run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			h.hs.Shutdown()
			return
		case <-t.C:
			h.check()
		}
	}
}

func (h *Health) check() {
	st := healthpb.HealthCheckResponse_NOT_SERVING
	for _, snap := range h.fleet.Replicas() {
		if snap.Healthy {
			st = healthpb.HealthCheckResponse_SERVING
			break
		}
	}
	h.hs.SetServingStatus(ServiceReadiness, st)
	h.hs.SetServingStatus(ServiceExtProc, st)
}

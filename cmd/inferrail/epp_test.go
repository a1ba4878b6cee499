package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/inferrail/inferrail/config"
	"github.com/inferrail/inferrail/transport/certs"
	"github.com/inferrail/inferrail/transport/extproc"
	"github.com/inferrail/inferrail/transport/extproc/envoytest"
)

// freeAddr is a loopback address with a port free just now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startEPP runs inferrail epp's startup for cfg until the test ends, and
// returns the ext_proc and admin addresses.
func startEPP(t *testing.T, cfg *config.Config) [2]string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan [2]string, 1)
	done := make(chan error, 1)
	go func() {
		done <- runGateway(ctx, true, "", os.Environ(), cfg, io.Discard, func(a, b string) { ready <- [2]string{a, b} })
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("epp: %v", err)
		}
	})
	select {
	case addrs := <-ready:
		return addrs
	case err := <-done:
		t.Fatalf("epp: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("epp did not start")
	}
	return [2]string{}
}

// TestEPPTLS: tls.ext_proc serves ext_proc over TLS; a client that trusts
// the certificate's CA is routed, a plain one is not.
func TestEPPTLS(t *testing.T) {
	sims, opts := zeroLatencySims(t, 1)
	cfg := gatewayConfig(sims, opts)
	cfg.ExtProc.Listen, cfg.ExtProc.AdminListen, cfg.ExtProc.HealthListen = "127.0.0.1:0", "127.0.0.1:0", freeAddr(t)
	files, err := certs.WriteDevFiles(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cfg.TLS.ExtProc = config.TLSListener{CertFile: files.Cert, KeyFile: files.Key}
	addrs := startEPP(t, cfg)
	pem, err := os.ReadFile(files.CA)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	route := func(creds credentials.TransportCredentials) (*envoytest.Routed, error) {
		conn, err := grpc.NewClient("passthrough:///"+addrs[0], grpc.WithTransportCredentials(creds))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		x, err := envoytest.Start(ctx, conn)
		if err != nil {
			return nil, err
		}
		defer x.Close()
		return x.Request(envoytest.Request{Method: "GET", Path: "/v1/models"})
	}
	tlsCreds := credentials.NewTLS(&tls.Config{RootCAs: roots, ServerName: "127.0.0.1"})
	deadline := time.Now().Add(10 * time.Second)
	for {
		routed, err := route(tlsCreds)
		if err != nil {
			t.Fatal(err)
		}
		if routed.Immediate == nil {
			if len(routed.Endpoints) != 1 {
				t.Fatalf("%+v", routed)
			}
			break
		}
		if time.Now().After(deadline) { // no replica healthy yet: 503
			t.Fatalf("never routed: %s", routed.Immediate.Body)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := route(insecure.NewCredentials()); err == nil {
		t.Fatal("a plain-text client was served on the TLS port")
	}
}

// TestEPP: inferrail epp's startup serves ext_proc, the three gRPC health
// services (readiness once a replica is healthy) and the admin port, and
// routes a streamed request as Envoy drives it; it stops cleanly.
func TestEPP(t *testing.T) {
	sims, opts := zeroLatencySims(t, 2)
	cfg := gatewayConfig(sims, opts)
	cfg.ExtProc.Listen, cfg.ExtProc.AdminListen, cfg.ExtProc.HealthListen = "127.0.0.1:0", "127.0.0.1:0", freeAddr(t)
	cfg.Health.Interval, cfg.Health.Timeout = 100*time.Millisecond, 100*time.Millisecond
	addrs := startEPP(t, cfg)

	hc, err := grpc.NewClient("passthrough:///"+cfg.ExtProc.HealthListen, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer hc.Close()
	check := func(svc string) healthpb.HealthCheckResponse_ServingStatus {
		r, err := healthpb.NewHealthClient(hc).Check(context.Background(), &healthpb.HealthCheckRequest{Service: svc})
		if err != nil {
			return healthpb.HealthCheckResponse_UNKNOWN
		}
		return r.Status
	}
	deadline := time.Now().Add(10 * time.Second)
	for check(extproc.ServiceReadiness) != healthpb.HealthCheckResponse_SERVING {
		if time.Now().After(deadline) {
			t.Fatal("readiness never SERVING")
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, svc := range []string{extproc.ServiceLiveness, extproc.ServiceExtProc} {
		if st := check(svc); st != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("%s: %v", svc, st)
		}
	}

	conn, err := grpc.NewClient("passthrough:///"+addrs[0], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	x, err := envoytest.Start(context.Background(), conn)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	r := envoytest.Request{Method: "POST", Path: "/v1/chat/completions", ChunkSize: 100, Headers: map[string]string{"content-type": "application/json"},
		Body: []byte(`{"model":"sim","messages":[{"role":"user","content":"hello through envoy"}],"max_tokens":4,"stream":true,"stream_options":{"include_usage":true}}`)}
	routed, err := x.Request(r)
	if err != nil || routed.Immediate != nil {
		t.Fatalf("%v %+v", err, routed)
	}
	hclient := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	var out strings.Builder
	status, hdr, err := x.Forward(context.Background(), hclient, r, routed, 0, func(b []byte) { out.Write(b) })
	if err != nil || status != 200 || !strings.Contains(out.String(), "[DONE]") || hdr["x-inferrail-prompt-tokens"] == "" {
		t.Fatalf("%v %d %v %s", err, status, hdr, out.String())
	}
	resp, err := hclient.Get("http://" + addrs[1] + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(page), `inferrail_requests_total`) {
		t.Fatal("the admin port's /metrics has no inferrail_requests_total")
	}
}

package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/inferrail/inferrail/config"
	"github.com/inferrail/inferrail/sim"
	"github.com/inferrail/inferrail/transport/certs"
)

// Secrets of the end-to-end test, none of which may leave the files they
// are in.
const (
	e2eKey1      = "sk-e2e-first-0123456789abcdef0123456789"
	e2eKey2      = "sk-e2e-second-0123456789abcdef012345678"
	e2eToken     = "e2e-admin-token-0123456789abcdef012345"
	e2eEngineKey = "e2e-engine-key-0123456789abcdef0123456"
)

// lockedBuffer is a log the gateway writes while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// secureFiles writes what the test gateway reads: certificates, the key
// file, the admin token and the engine key.
type secureFiles struct {
	t   *testing.T
	dir string
	ca  *certs.DevCA
}

func (f *secureFiles) write(name string, b []byte) string {
	f.t.Helper()
	p := filepath.Join(f.dir, name)
	// Write then rename, as cert-manager and kubelet swap files, so a
	// reader never sees half a file.
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		f.t.Fatal(err)
	}
	if err := os.Rename(tmp, p); err != nil {
		f.t.Fatal(err)
	}
	return p
}

// issue writes a server certificate for 127.0.0.1 as name.pem and
// name.key, and returns the files and the certificate's serial.
func (f *secureFiles) issue(name string) (certFile, keyFile string, serial string) {
	f.t.Helper()
	c, k, err := f.ca.Issue(false, "127.0.0.1", "localhost")
	if err != nil {
		f.t.Fatal(err)
	}
	certFile, keyFile = f.write(name+".pem", c), f.write(name+".key", k)
	pair, err := tls.X509KeyPair(c, k)
	if err != nil {
		f.t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(pair.Certificate[0])
	return certFile, keyFile, leaf.SerialNumber.String()
}

// serialAt returns the serial of the certificate a new TLS connection to
// addr gets.
func serialAt(t *testing.T, addr string, roots *x509.CertPool) string {
	t.Helper()
	c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: roots})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].SerialNumber.String()
}

// TestSecurityEndToEnd runs `inferrail serve` with everything on: API keys
// from a file, an admin token, TLS on both ports, and TLS with an engine
// key to a simulator serving https. Streams run while the client port's
// certificate is rotated: they finish, and new connections get the new
// certificate. The key file is rewritten and applied while the gateway
// runs. Nothing it logs, its metrics or its decision log holds a key, the
// token or the engine key.
func TestSecurityEndToEnd(t *testing.T) {
	ca, err := certs.NewDevCA("e2e CA")
	if err != nil {
		t.Fatal(err)
	}
	f := &secureFiles{t: t, dir: t.TempDir(), ca: ca}
	caFile := f.write("ca.pem", ca.PEM)
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.PEM)

	simCert, simKey, _ := f.issue("sim")
	so := sim.DefaultOptions()
	so.Port = 0
	so.Engine.Latency.Zero = false
	so.Engine.Latency.DecodeToken = 5 * time.Millisecond
	so.SSLCertFile, so.SSLKeyFile, so.APIKey = simCert, simKey, e2eEngineKey
	sims, err := sim.StartN(1, so)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sims[0].Close() })
	if !strings.HasPrefix(sims[0].URL(), "https://") {
		t.Fatalf("sim URL %s", sims[0].URL())
	}

	cfg := gatewayConfig(sims, so)
	cfg.Server.ReloadInterval = 50 * time.Millisecond
	cfg.Logging.Level = "debug"
	cfg.Logging.LogPrompts = true
	cfg.Observability.DecisionLog = config.DecisionLog{Path: filepath.Join(f.dir, "decisions.jsonl"), SampleRate: 1}
	cfg.Auth.APIKeys.File = f.write("keys.yaml", []byte("keys:\n  - {id: first, tenant: acme, key: "+e2eKey1+"}\n"))
	cfg.Auth.Admin.TokenFile = f.write("admin-token", []byte(e2eToken+"\n"))
	cfg.Upstream.APIKeyFile = f.write("engine-key", []byte(e2eEngineKey))
	clientCert, clientKey, serial1 := f.issue("client")
	adminCert, adminKey, _ := f.issue("admin")
	cfg.TLS.Listen = config.TLSListener{CertFile: clientCert, KeyFile: clientKey}
	cfg.TLS.AdminListen = config.TLSListener{CertFile: adminCert, KeyFile: adminKey}
	cfg.TLS.Upstream.CAFile = caFile
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(f.dir, "inferrail.yaml")
	b, _ := cfg.YAML()
	f.write("inferrail.yaml", b)
	logs := &lockedBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan [2]string, 1)
	done := make(chan error, 1)
	go func() {
		done <- serveFile(ctx, path, cfg, io.Discard, logs, func(a, b string) { ready <- [2]string{a, b} })
	}()
	var addr, admin string
	select {
	case a := <-ready:
		addr, admin = a[0], a[1]
	case err := <-done:
		t.Fatalf("serve: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("gateway did not start")
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			if err := <-done; err != nil {
				t.Errorf("serve: %v", err)
			}
		}
	}
	t.Cleanup(stop)

	hc := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	t.Cleanup(hc.CloseIdleConnections)
	do := func(method, url, body string, hdr ...string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	const completion = `{"model":"sim","prompt":"hello there","max_tokens":3}`
	base := "https://" + addr
	waitUntil := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 10s", what)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	// The replica turns healthy over https, with the CA.
	waitUntil("a served request", func() bool {
		code, _ := do("POST", base+"/v1/completions", completion, "Authorization", "Bearer "+e2eKey1)
		return code == 200
	})
	if code, body := do("POST", base+"/v1/completions", completion); code != 401 || !strings.Contains(body, "invalid_api_key") {
		t.Errorf("without a key: %d %s", code, body)
	}
	if code, _ := do("GET", "https://"+admin+"/admin/config", ""); code != 401 {
		t.Errorf("admin without the token: %d", code)
	}
	code, configPage := do("GET", "https://"+admin+"/admin/config", "", "Authorization", "Bearer "+e2eToken)
	if code != 200 || !strings.Contains(configPage, `"token_file"`) {
		t.Errorf("admin with the token: %d %s", code, configPage)
	}

	// Streams run while the certificate is rotated.
	const streams, tokens = 8, 100
	var wg sync.WaitGroup
	results := make(chan string, streams)
	started := make(chan struct{}, streams)
	for range streams {
		wg.Go(func() {
			// A client of its own: the stream keeps its connection, opened
			// before the rotation.
			c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
			defer c.CloseIdleConnections()
			req, _ := http.NewRequest("POST", base+"/v1/completions",
				strings.NewReader(fmt.Sprintf(`{"model":"sim","prompt":"rotate","max_tokens":%d,"stream":true}`, tokens)))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("x-api-key", e2eKey1)
			resp, err := c.Do(req)
			if err != nil {
				results <- err.Error()
				return
			}
			defer resp.Body.Close()
			sc := bufio.NewScanner(resp.Body)
			chunks, sawDone := 0, false
			for sc.Scan() {
				line := sc.Text()
				switch {
				case line == "data: [DONE]":
					sawDone = true
				case strings.HasPrefix(line, "data: "):
					if chunks++; chunks == 1 {
						started <- struct{}{}
					}
				}
			}
			results <- fmt.Sprintf("status %d, %d chunks, done %v, serial %s", resp.StatusCode, chunks, sawDone,
				resp.TLS.PeerCertificates[0].SerialNumber)
		})
	}
	for range streams {
		<-started
	}
	_, _, serial2 := f.issue("client")
	waitUntil("the new certificate on new connections", func() bool { return serialAt(t, addr, roots) == serial2 })
	wg.Wait()
	close(results)
	for r := range results {
		if want := fmt.Sprintf("status 200, %d chunks, done true, serial %s", tokens, serial1); r != want {
			t.Errorf("stream: %s; want %s", r, want)
		}
	}

	// The key file is rewritten: the second key works, the first no more.
	f.write("keys.yaml", []byte("keys:\n  - {id: second, tenant: acme, key: "+e2eKey2+"}\n"))
	waitUntil("the new key file", func() bool {
		code, _ := do("POST", base+"/v1/completions", completion, "x-api-key", e2eKey2)
		return code == 200
	})
	if code, _ := do("POST", base+"/v1/completions", completion, "x-api-key", e2eKey1); code != 401 {
		t.Errorf("the removed key: %d", code)
	}

	_, metricsPage := do("GET", "https://"+admin+"/metrics", "", "Authorization", "Bearer "+e2eToken)
	for _, want := range []string{`inferrail_tenant_requests_total{tenant="acme",key="first"}`,
		`inferrail_tenant_requests_total{tenant="acme",key="second"}`,
		`inferrail_auth_reloads_total{file="api_keys",result="applied"} 1`,
		`inferrail_tls_certificate_reloads_total{listener="tls.listen",result="applied"} 1`} {
		if !strings.Contains(metricsPage, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	hc.CloseIdleConnections()
	stop()
	dlog, _ := os.ReadFile(cfg.Observability.DecisionLog.Path)
	if !bytes.Contains(dlog, []byte(`"tenant":"acme","key_id":"second"`)) {
		t.Errorf("the decision log names no tenant")
	}
	for _, s := range []string{e2eKey1, e2eKey2, e2eToken, e2eEngineKey} {
		for name, text := range map[string]string{"log": logs.String(), "metrics": metricsPage,
			"decision log": string(dlog), "config": configPage} {
			if strings.Contains(text, s) || strings.Contains(text, config.HashKey(s)) {
				t.Errorf("a secret shows in the %s", name)
			}
		}
	}
	if t.Failed() {
		t.Logf("log:\n%s", logs.String())
	}
}

// A gateway whose certificate files do not load does not start, and says
// which key named them.
func TestSecurityStartupErrors(t *testing.T) {
	sims, so := zeroLatencySims(t, 1)
	cfg := gatewayConfig(sims, so)
	cfg.TLS.Listen = config.TLSListener{CertFile: filepath.Join(t.TempDir(), "none.pem"), KeyFile: "none.key"}
	err := serve(context.Background(), cfg, io.Discard, io.Discard, nil)
	if err == nil || !strings.Contains(err.Error(), "tls.listen") {
		t.Errorf("serve: %v", err)
	}
}

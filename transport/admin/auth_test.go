package admin

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/inferrail/inferrail/actors/routing"
	"github.com/inferrail/inferrail/config"
	"github.com/inferrail/inferrail/model/policy"
	"github.com/inferrail/inferrail/transport/auth"
	"github.com/inferrail/inferrail/transport/certs"
	"github.com/inferrail/inferrail/transport/decisionlog"
	"github.com/inferrail/inferrail/transport/telemetry"
)

const adminToken = "admin-token-0123456789abcdef0123456789"

// configs is a fixed live config for the config routes.
type configs struct{ c *config.Config }

func (c configs) Current() (*config.Config, uint64) { return c.c, 1 }
func (c configs) Reload() Reload                    { return Reload{Result: "unchanged", Generation: 1} }
func (c configs) Patch(map[string]any) Reload       { return Reload{Result: "unchanged", Generation: 1} }

// noModels explains nothing: every model is unknown.
type noModels struct{}

func (noModels) Resolve(string) (string, bool) { return "", false }
func (noModels) Explain(string, string, policy.Request, time.Time) (*routing.Explanation, error) {
	return nil, errors.New("no models")
}

func authConfig(t *testing.T, edit func(*config.Config)) *config.Config {
	t.Helper()
	c := config.Default()
	c.Models = []config.Model{config.NewModel("m")}
	c.Replicas = []config.Replica{config.NewReplica("r0", "http://127.0.0.1:1", "m")}
	c.Auth.APIKeys.Keys = []config.APIKey{{ID: "k", SHA256: config.HashKey("client-key")}}
	p := filepath.Join(t.TempDir(), "token")
	os.WriteFile(p, []byte(adminToken+"\n"), 0o600)
	c.Auth.Admin.TokenFile = p
	if edit != nil {
		edit(c)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	return c
}

// serveAdmin serves an admin port for c on loopback, over TLS when tc is
// set, and returns its base URL.
func serveAdmin(t *testing.T, c *config.Config, tc *tls.Config) string {
	t.Helper()
	g, err := auth.New(c, auth.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := New(noReplicas{}, telemetry.New(noReplicas{})).WithConfig(configs{c}).WithTrials(reports(nil)).
		WithModels(configs{c}).WithDecisions(decisionlog.Memory()).
		WithExplain(ExplainOptions{Fleet: noModels{}, Timeout: time.Second}).WithAuth(g).
		WithIndexSnapshot(snapshots{testSnapshot()})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	scheme := "http"
	if tc != nil {
		ln, scheme = tls.NewListener(ln, tc), "https"
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	t.Cleanup(func() {
		s.Shutdown(context.Background())
		<-done
	})
	return scheme + "://" + ln.Addr().String()
}

func call(t *testing.T, c *http.Client, method, url string, lines ...string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader("{}"))
	req.Header.Set("Content-Type", "application/json")
	for _, l := range lines {
		k, v, _ := strings.Cut(l, ": ")
		req.Header[k] = append(req.Header[k], v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

var adminRoutes = []struct{ method, path string }{
	{"GET", "/metrics"}, {"GET", "/admin/replicas"}, {"GET", "/admin/config"}, {"PATCH", "/admin/config"},
	{"POST", "/admin/reload"}, {"GET", "/admin/shadow"}, {"POST", "/admin/explain/v1/chat/completions"},
	{"GET", "/admin/index/snapshot"}, {"GET", "/admin/nothing"}, {"POST", "/admin/"}, {"GET", "/admin/models"}, {"GET", "/admin/decisions"},
}

// TestAdminEveryRoute asks every admin route without the token, with a
// wrong one, one off by a byte, a client key, the header in odd cases and
// repeated.
func TestAdminEveryRoute(t *testing.T) {
	base := serveAdmin(t, authConfig(t, nil), nil)
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	refused := [][]string{
		nil,
		{"Authorization: Bearer nope"},
		{"Authorization: Bearer " + adminToken[:len(adminToken)-1] + "8"},
		{"Authorization: Bearer " + adminToken + "9"},
		{"Authorization: Bearer client-key"},
		{"x-api-key: " + adminToken},
		{"Authorization: Basic " + adminToken},
		{"Authorization: Bearer " + adminToken, "Authorization: Bearer nope"},
	}
	for _, r := range adminRoutes {
		for _, lines := range refused {
			code, body := call(t, hc, r.method, base+r.path, lines...)
			if code != 401 || !strings.Contains(body, `"code":401`) || strings.Contains(body, adminToken) {
				t.Errorf("%s %s %q: %d %s", r.method, r.path, lines, code, body)
			}
		}
		for _, lines := range [][]string{
			{"Authorization: Bearer " + adminToken},
			{"AUTHORIZATION: bearer " + adminToken},
			{"authorization: Bearer " + adminToken, "Authorization: Bearer " + adminToken},
		} {
			if code, body := call(t, hc, r.method, base+r.path, lines...); code == 401 {
				t.Errorf("%s %s %q: %d %s", r.method, r.path, lines, code, body)
			}
		}
	}
	// GET /admin/config shows the hashes redacted.
	_, body := call(t, hc, "GET", base+"/admin/config", "Authorization: Bearer "+adminToken)
	if strings.Contains(body, config.HashKey("client-key")) || !strings.Contains(body, config.Redaction) {
		t.Errorf("/admin/config: %s", body)
	}
}

// The fleet page itself opens without the token, as a browser loads it,
// and holds none of the fleet's data; what it reads still needs the token,
// and the page asks for it when the API answers 401.
func TestFleetPageOpensWithoutToken(t *testing.T) {
	base := serveAdmin(t, authConfig(t, nil), nil)
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	for _, path := range []string{"/admin/", "/admin"} {
		resp, err := hc.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") ||
			!strings.Contains(string(b), `id="token-form"`) {
			t.Errorf("GET %s without a token: %d %s", path, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		if strings.Contains(string(b), "r0") || strings.Contains(string(b), "http://127.0.0.1:1") {
			t.Errorf("GET %s: the page holds the fleet's data", path)
		}
	}
	if code, _ := call(t, hc, "GET", base+"/admin/replicas"); code != 401 {
		t.Errorf("/admin/replicas without a token: %d", code)
	}
}

func TestAdminMetricsPublic(t *testing.T) {
	base := serveAdmin(t, authConfig(t, func(c *config.Config) { c.Auth.Admin.MetricsPublic = true }), nil)
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	for _, r := range adminRoutes {
		code, _ := call(t, hc, r.method, base+r.path)
		if want := r.path == "/metrics"; (code != 401) != want {
			t.Errorf("%s %s without a token: %d", r.method, r.path, code)
		}
	}
}

// TestAdminClientCertificate: over mTLS a client certificate the CA signed
// stands in for the token; one from another CA, or none, does not.
func TestAdminClientCertificate(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, b, 0o600)
		return p
	}
	ca, _ := certs.NewDevCA("test CA")
	other, _ := certs.NewDevCA("other CA")
	sc, sk, _ := ca.Issue(false, "127.0.0.1")
	cc, ck, _ := ca.Issue(true, "ops")
	oc, ok, _ := other.Issue(true, "intruder")
	c := authConfig(t, func(c *config.Config) {
		c.TLS.AdminListen = config.TLSListener{CertFile: write("s.pem", sc), KeyFile: write("s.key", sk), ClientCAFile: write("ca.pem", ca.PEM)}
	})
	pair, err := certs.LoadPair("admin", c.TLS.AdminListen.CertFile, c.TLS.AdminListen.KeyFile, certs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cas, _ := certs.LoadCAs(c.TLS.AdminListen.ClientCAFile)
	base := serveAdmin(t, c, certs.Server(pair, tls.VersionTLS12, cas, false))
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.PEM)
	client := func(certPEM, keyPEM []byte) *http.Client {
		tc := &tls.Config{RootCAs: roots}
		if certPEM != nil {
			kp, err := tls.X509KeyPair(certPEM, keyPEM)
			if err != nil {
				t.Fatal(err)
			}
			tc.Certificates = []tls.Certificate{kp}
		}
		return &http.Client{Transport: &http.Transport{TLSClientConfig: tc, DisableKeepAlives: true}}
	}
	if code, _ := call(t, client(cc, ck), "GET", base+"/admin/config"); code != 200 {
		t.Errorf("with a client certificate: %d", code)
	}
	if code, _ := call(t, client(nil, nil), "GET", base+"/admin/config"); code != 401 {
		t.Errorf("without one: %d", code)
	}
	if code, _ := call(t, client(nil, nil), "GET", base+"/admin/config", "Authorization: Bearer "+adminToken); code != 200 {
		t.Errorf("with the token instead: %d", code)
	}
	// Go's client offers no certificate the server's CAs did not sign, so
	// the request comes without one; forced, the handshake fails.
	req, _ := http.NewRequest("GET", base+"/admin/config", nil)
	if resp, err := client(oc, ok).Do(req); err == nil {
		resp.Body.Close()
		if resp.StatusCode != 401 {
			t.Errorf("another CA's certificate was let in: %d", resp.StatusCode)
		}
	}
	forced := client(nil, nil)
	kp, _ := tls.X509KeyPair(oc, ok)
	forced.Transport.(*http.Transport).TLSClientConfig.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		return &kp, nil
	}
	if resp, err := forced.Do(req); err == nil {
		resp.Body.Close()
		t.Errorf("another CA's certificate was let in: %d", resp.StatusCode)
	}
}

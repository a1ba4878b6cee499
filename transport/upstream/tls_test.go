package upstream

import (
	"context"
	"crypto/x509"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/inferrail/inferrail/sim"
	"github.com/inferrail/inferrail/transport/certs"
)

// startTLSSim runs a simulator serving https with a certificate of a fresh
// CA, and returns it with that CA's pool.
func startTLSSim(t *testing.T) (*sim.Server, *x509.CertPool) {
	t.Helper()
	ca, err := certs.NewDevCA("test")
	if err != nil {
		t.Fatal(err)
	}
	c, k, _ := ca.Issue(false, "127.0.0.1")
	dir := t.TempDir()
	cf, kf := filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem")
	os.WriteFile(cf, c, 0o600)
	os.WriteFile(kf, k, 0o600)
	s := startSim(t, func(o *sim.Options) { zero(o); o.SSLCertFile, o.SSLKeyFile = cf, kf })
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.PEM)
	return s, roots
}

// An https replica is reached over TLS with the CA given, connections
// reused as over plain HTTP; without the CA the handshake fails as a
// DialError, which the front end retries elsewhere.
func TestTLS(t *testing.T) {
	s, roots := startTLSSim(t)
	if !strings.HasPrefix(s.URL(), "https://") {
		t.Fatalf("URL %s", s.URL())
	}
	p := newPool(t, s.URL(), Options{TLS: certs.Client(roots, nil, 0)})
	for i := range 3 {
		if code, body := do(t, p, chatPath, chatBody); code != 200 || !strings.Contains(body, `"object":"chat.completion"`) {
			t.Fatalf("request %d: %d %s", i, code, body)
		}
	}
	if st := p.Stats(); st.Dials != 1 {
		t.Errorf("three requests over TLS: %+v, want one dial", st)
	}

	untrusted := newPool(t, s.URL(), Options{DialTimeout: time.Second})
	_, err := untrusted.Do(context.Background(), newReq(chatPath, chatBody))
	var de *DialError
	if !errors.As(err, &de) || !strings.Contains(err.Error(), "tls") {
		t.Errorf("untrusted certificate: %v", err)
	}
}

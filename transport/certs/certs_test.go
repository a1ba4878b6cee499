package certs

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
)

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func serialOf(c *tls.Certificate) string { return c.Leaf.SerialNumber.String() }

// A Pair rereads its files on a handshake once CheckEvery has passed, not
// before; a rotation that does not load keeps the certificate in effect,
// logged and counted once.
func TestPairReload(t *testing.T) {
	dir := t.TempDir()
	ca, err := NewDevCA("test")
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem")
	issue := func() string {
		c, k, err := ca.Issue(false, "127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(certFile, c, 0o600)
		os.WriteFile(keyFile, k, 0o600)
		kp, _ := tls.X509KeyPair(c, k)
		leaf, _ := x509.ParseCertificate(kp.Certificate[0])
		return leaf.SerialNumber.String()
	}
	first := issue()
	clk := &clock{now: time.Unix(1e9, 0)}
	var logs bytes.Buffer
	set := metrics.NewSet()
	p, err := LoadPair("test", certFile, keyFile, Options{Now: clk.Now, Metrics: set, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if got := serialOf(p.Certificate()); got != first {
		t.Fatalf("serial %s, want %s", got, first)
	}
	second := issue()
	clk.add(CheckEvery / 2)
	if got := serialOf(p.Certificate()); got != first {
		t.Errorf("reread before CheckEvery: %s", got)
	}
	clk.add(CheckEvery / 2)
	if got := serialOf(p.Certificate()); got != second {
		t.Errorf("not reread after CheckEvery: %s, want %s", got, second)
	}

	// Half a rotation: a new certificate with the old key.
	c, _, _ := ca.Issue(false, "127.0.0.1")
	os.WriteFile(certFile, c, 0o600)
	for range 3 {
		clk.add(CheckEvery)
		if got := serialOf(p.Certificate()); got != second {
			t.Errorf("a bad pair replaced the good one: %s", got)
		}
	}
	if n := strings.Count(logs.String(), "reload failed"); n != 1 {
		t.Errorf("logged %d times:\n%s", n, logs.String())
	}
	var m bytes.Buffer
	set.WritePrometheus(&m)
	for _, want := range []string{`inferrail_tls_certificate_reloads_total{listener="test",result="applied"} 1`,
		`inferrail_tls_certificate_reloads_total{listener="test",result="rejected"} 1`,
		`inferrail_tls_certificate_expiry_timestamp_seconds{listener="test"} `} {
		if !strings.Contains(m.String(), want) {
			t.Errorf("no %s in\n%s", want, m.String())
		}
	}
	if _, err := LoadPair("test", certFile, keyFile, Options{}); err == nil {
		t.Error("a mismatched pair loaded at startup")
	}
}

func TestConfigs(t *testing.T) {
	if Version("1.3") != tls.VersionTLS13 || Version("1.2") != tls.VersionTLS12 || Version("1.0") != tls.VersionTLS12 {
		t.Error("Version")
	}
	if c := Client(nil, nil, tls.VersionTLS10); c.MinVersion != tls.VersionTLS12 {
		t.Errorf("client MinVersion %x", c.MinVersion)
	}
	dir := t.TempDir()
	bad := filepath.Join(dir, "ca.pem")
	os.WriteFile(bad, []byte("not PEM"), 0o600)
	if _, err := LoadCAs(bad); err == nil {
		t.Error("a file without certificates loaded as CAs")
	}
	f, err := WriteDevFiles(filepath.Join(dir, "dev"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := LoadPair("dev", f.Cert, f.Key, Options{})
	if err != nil {
		t.Fatal(err)
	}
	roots, err := LoadCAs(f.CA)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Certificate().Leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: "localhost"}); err != nil {
		t.Errorf("the dev certificate does not verify: %v", err)
	}
	s := Server(p, 0, roots, true)
	if s.MinVersion != tls.VersionTLS12 || s.ClientAuth != tls.RequireAndVerifyClientCert {
		t.Errorf("server config %+v", s)
	}
}

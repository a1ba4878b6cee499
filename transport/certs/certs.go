// Package certs loads the TLS certificates and trust of the gateway's
// listeners (client, admin, and later ext_proc) and of its client to
// engines, and reloads certificate files when they change, so a rotated
// certificate (cert-manager, a Kubernetes secret) needs no restart.
//
// certs starts no goroutines: a Pair checks its files on the handshakes
// that ask for its certificate, at most once per CheckEvery, so an idle
// listener costs nothing and a busy one one read of two small files a
// second. Connections already open keep the certificate they shook hands
// with; new ones get the new one. A changed pair that does not load (a
// half-written file, a key that does not match) leaves the old certificate
// in effect; it is logged once and counted.
package certs

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
)

// CheckEvery is how often, at most, a Pair looks at its files.
const CheckEvery = time.Second

// maxPEMBytes bounds a certificate, key or CA file.
const maxPEMBytes = 1 << 20

// Options configure a Pair. A zero field takes its default.
type Options struct {
	// Logger gets reloads and failed reloads; nil discards.
	Logger *slog.Logger
	// Metrics gets inferrail_tls_certificate_reloads_total{listener,result}
	// and inferrail_tls_certificate_expiry_timestamp_seconds{listener};
	// nil keeps none.
	Metrics *metrics.Set
	// CheckEvery overrides CheckEvery (tests).
	CheckEvery time.Duration
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

// Pair is a certificate and its key, read from two PEM files and reread
// when they change. It is safe for concurrent use.
type Pair struct {
	name              string // the listener, in logs and metrics
	certFile, keyFile string
	every             time.Duration
	now               func() time.Time
	log               *slog.Logger

	cur atomic.Pointer[tls.Certificate]

	mu      sync.Mutex // guards the fields below; held while checking
	checked time.Time  // last look at the files
	certPEM []byte     // the bytes cur was built from
	keyPEM  []byte
	// badCert and badKey are the last pair that failed to load, so one
	// bad rotation is logged once, not on every check.
	badCert, badKey []byte

	applied, rejected *metrics.Counter
}

// LoadPair reads certFile and keyFile for the listener name. Unlike a
// reload, a first load that fails is an error.
func LoadPair(name, certFile, keyFile string, o Options) (*Pair, error) {
	p := &Pair{name: name, certFile: certFile, keyFile: keyFile, every: o.CheckEvery, now: o.Now, log: o.Logger}
	if p.every <= 0 {
		p.every = CheckEvery
	}
	if p.now == nil {
		p.now = time.Now
	}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	certPEM, keyPEM, err := p.read()
	if err != nil {
		return nil, err
	}
	c, err := parsePair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("%s: %s and %s: %w", name, certFile, keyFile, err)
	}
	p.cur.Store(c)
	p.certPEM, p.keyPEM, p.checked = certPEM, keyPEM, p.now()
	if o.Metrics != nil {
		p.applied = o.Metrics.NewCounter(`inferrail_tls_certificate_reloads_total{listener="` + name + `",result="applied"}`)
		p.rejected = o.Metrics.NewCounter(`inferrail_tls_certificate_reloads_total{listener="` + name + `",result="rejected"}`)
		o.Metrics.NewGauge(`inferrail_tls_certificate_expiry_timestamp_seconds{listener="`+name+`"}`, func() float64 {
			return float64(p.cur.Load().Leaf.NotAfter.Unix())
		})
	}
	return p, nil
}

// Certificate returns the certificate in effect, first rereading the files
// if CheckEvery has passed since the last look.
func (p *Pair) Certificate() *tls.Certificate {
	now := p.now()
	if p.mu.TryLock() {
		if now.Sub(p.checked) >= p.every {
			p.checked = now
			p.check()
		}
		p.mu.Unlock()
	}
	// A handshake that finds another one checking takes the certificate in
	// effect rather than wait for the disk.
	return p.cur.Load()
}

// GetCertificate is tls.Config.GetCertificate.
func (p *Pair) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return p.Certificate(), nil
}

// GetClientCertificate is tls.Config.GetClientCertificate.
func (p *Pair) GetClientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	return p.Certificate(), nil
}

// check rereads the files and puts a changed pair in effect. Under mu.
func (p *Pair) check() {
	certPEM, keyPEM, err := p.read()
	if err == nil && bytes.Equal(certPEM, p.certPEM) && bytes.Equal(keyPEM, p.keyPEM) {
		return
	}
	var c *tls.Certificate
	if err == nil {
		c, err = parsePair(certPEM, keyPEM)
	}
	if err != nil {
		if certPEM != nil && bytes.Equal(certPEM, p.badCert) && bytes.Equal(keyPEM, p.badKey) {
			return
		}
		p.badCert, p.badKey = certPEM, keyPEM
		if p.rejected != nil {
			p.rejected.Inc()
		}
		p.log.Error("TLS certificate reload failed; the certificate in effect stays", "listener", p.name,
			"cert_file", p.certFile, "key_file", p.keyFile, "err", err)
		return
	}
	p.cur.Store(c)
	p.certPEM, p.keyPEM, p.badCert, p.badKey = certPEM, keyPEM, nil, nil
	if p.applied != nil {
		p.applied.Inc()
	}
	p.log.Info("TLS certificate reloaded", "listener", p.name, "cert_file", p.certFile,
		"subject", c.Leaf.Subject.String(), "not_after", c.Leaf.NotAfter)
}

func (p *Pair) read() (certPEM, keyPEM []byte, err error) {
	if certPEM, err = readPEM(p.certFile); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", p.name, err)
	}
	if keyPEM, err = readPEM(p.keyFile); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", p.name, err)
	}
	return certPEM, keyPEM, nil
}

func readPEM(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxPEMBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(b) > maxPEMBytes {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, maxPEMBytes)
	}
	return b, nil
}

// parsePair builds a certificate with its parsed leaf, whose expiry the
// gauge reads. X509KeyPair never puts key material in its errors.
func parsePair(certPEM, keyPEM []byte) (*tls.Certificate, error) {
	c, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	if c.Leaf == nil {
		if c.Leaf, err = x509.ParseCertificate(c.Certificate[0]); err != nil {
			return nil, err
		}
	}
	return &c, nil
}

// LoadCAs reads a PEM bundle of CA certificates.
func LoadCAs(path string) (*x509.CertPool, error) {
	b, err := readPEM(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("%s: no PEM certificate in it", path)
	}
	return pool, nil
}

// Version maps tls.min_version ("1.2", "1.3") to its constant; anything
// else is TLS 1.2, the floor.
func Version(s string) uint16 {
	if s == "1.3" {
		return tls.VersionTLS13
	}
	return tls.VersionTLS12
}

// Server returns the tls.Config of a listener serving pair, HTTP/1.1 only
// (fasthttp speaks no HTTP/2). With clientCAs, client certificates are
// verified against them: required when require is set, else checked when
// given (the admin port, where a token is the other way in).
func Server(pair *Pair, minVersion uint16, clientCAs *x509.CertPool, require bool) *tls.Config {
	c := &tls.Config{
		MinVersion:     max(minVersion, tls.VersionTLS12),
		GetCertificate: pair.GetCertificate,
		NextProtos:     []string{"http/1.1"},
	}
	if clientCAs != nil {
		c.ClientCAs = clientCAs
		c.ClientAuth = tls.VerifyClientCertIfGiven
		if require {
			c.ClientAuth = tls.RequireAndVerifyClientCert
		}
	}
	return c
}

// Client returns the tls.Config for reaching engines: their certificates
// verified against roots (nil: the system's), pair presented when an engine
// asks for a client certificate (nil: none). Each connection sets its own
// ServerName, from the replica's URL.
func Client(roots *x509.CertPool, pair *Pair, minVersion uint16) *tls.Config {
	c := &tls.Config{
		MinVersion: max(minVersion, tls.VersionTLS12),
		RootCAs:    roots,
		NextProtos: []string{"http/1.1"},
	}
	if pair != nil {
		c.GetClientCertificate = pair.GetClientCertificate
	}
	return c
}

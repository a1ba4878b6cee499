package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net"

	"github.com/VictoriaMetrics/metrics"

	"github.com/inferrail/inferrail/config"
	"github.com/inferrail/inferrail/transport/auth"
	"github.com/inferrail/inferrail/transport/certs"
)

// security is what cfg's auth and tls sections build: the credential
// guard, and the TLS of each listener (nil: plain HTTP) and of the client
// to engines.
type security struct {
	guard         *auth.Guard
	client, admin *tls.Config
	extproc       *tls.Config // the picker's ext_proc port (inferrail epp)
	upstream      *tls.Config
}

// newSecurity reads every key, token and certificate file cfg names; a
// file that does not load fails startup, naming its key.
func newSecurity(cfg *config.Config, log *slog.Logger, set *metrics.Set) (*security, error) {
	g, err := auth.New(cfg, auth.Options{Logger: log, Metrics: set})
	if err != nil {
		return nil, err
	}
	s := &security{guard: g}
	o := certs.Options{Logger: log, Metrics: set}
	min := certs.Version(cfg.TLS.MinVersion)
	if s.client, err = listenerTLS("tls.listen", cfg.TLS.Listen, min, true, o); err != nil {
		return nil, err
	}
	// A token is the other way onto the admin port: a client certificate
	// is asked for, and required only without one.
	token := cfg.Auth.Admin.TokenFile != "" || cfg.Auth.Admin.TokenSHA256 != ""
	if s.admin, err = listenerTLS("tls.admin_listen", cfg.TLS.AdminListen, min, !token, o); err != nil {
		return nil, err
	}
	// Envoy presents a certificate when tls.ext_proc names a client CA.
	if s.extproc, err = listenerTLS("tls.ext_proc", cfg.TLS.ExtProc, min, true, o); err != nil {
		return nil, err
	}
	u := cfg.TLS.Upstream
	var roots *x509.CertPool
	if u.CAFile != "" {
		if roots, err = certs.LoadCAs(u.CAFile); err != nil {
			return nil, fmt.Errorf("tls.upstream.ca_file: %w", err)
		}
	}
	var pair *certs.Pair
	if u.CertFile != "" {
		if pair, err = certs.LoadPair("upstream", u.CertFile, u.KeyFile, o); err != nil {
			return nil, fmt.Errorf("tls.upstream: %w", err)
		}
	}
	s.upstream = certs.Client(roots, pair, min)
	return s, nil
}

// listenerTLS is the tls.Config of a listener, or nil when it is plain.
func listenerTLS(key string, l config.TLSListener, min uint16, require bool, o certs.Options) (*tls.Config, error) {
	if !l.On() {
		return nil, nil
	}
	pair, err := certs.LoadPair(key, l.CertFile, l.KeyFile, o)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	var cas *x509.CertPool
	if l.ClientCAFile != "" {
		if cas, err = certs.LoadCAs(l.ClientCAFile); err != nil {
			return nil, fmt.Errorf("%s.client_ca_file: %w", key, err)
		}
	}
	return certs.Server(pair, min, cas, require), nil
}

// wrap serves ln over TLS when c is set.
func wrap(ln net.Listener, c *tls.Config) net.Listener {
	if c == nil {
		return ln
	}
	return tls.NewListener(ln, c)
}

// scheme is a listener's URL scheme.
func scheme(c *tls.Config) string {
	if c == nil {
		return "http"
	}
	return "https"
}

package conncheck

import (
	"crypto/tls"
	"crypto/x509"
	"testing"

	"github.com/inferrail/inferrail/transport/certs"
)

// A TLS client that closes sends close_notify before its FIN: the bytes
// left unread must not make the connection look alive.
func TestGoneTLS(t *testing.T) {
	ca, err := certs.NewDevCA("test")
	if err != nil {
		t.Fatal(err)
	}
	c, k, _ := ca.Issue(false, "127.0.0.1")
	kp, err := tls.X509KeyPair(c, k)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.PEM)
	rawClient, rawServer := pair(t)
	server := tls.Server(rawServer, &tls.Config{Certificates: []tls.Certificate{kp}})
	defer server.Close()
	client := tls.Client(rawClient, &tls.Config{RootCAs: roots, ServerName: "127.0.0.1"})
	done := make(chan error, 1)
	go func() { done <- client.Handshake() }()
	if err := server.Handshake(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if Gone(server) {
		t.Fatal("an open TLS connection looks gone")
	}
	client.Close() // close_notify, then FIN
	waitGone(t, server, true)
}

package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// DevCA is a throwaway certificate authority, made in memory, for tests and
// for `inferrail launch --tls-dir`: ECDSA P-256 keys, certificates valid
// from an hour ago for a week. It is not for production certificates. Its
// methods are safe for concurrent use.
type DevCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// PEM is the CA certificate, for clients to trust.
	PEM []byte
}

// NewDevCA makes a CA named name.
func NewDevCA(name string) (*DevCA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(7 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &DevCA{cert: cert, key: key, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// Issue returns a certificate and key, PEM, for a server answering to hosts
// (DNS names or IP addresses, the first also its common name), or for a
// client named hosts[0] when client is set.
func (ca *DevCA) Issue(client bool, hosts ...string) (certPEM, keyPEM []byte, err error) {
	if len(hosts) == 0 {
		return nil, nil, fmt.Errorf("certs: issue: no host")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: hosts[0]},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(7 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if client {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, nil, err
	}
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb}), nil
}

// DevFiles are the files WriteDevFiles writes.
type DevFiles struct {
	CA, Cert, Key string
}

// WriteDevFiles makes a CA and a server certificate for localhost,
// 127.0.0.1 and ::1 in dir (created if need be): ca.pem, cert.pem and
// key.pem, replacing any there.
func WriteDevFiles(dir string) (DevFiles, error) {
	ca, err := NewDevCA("inferrail development CA")
	if err != nil {
		return DevFiles{}, err
	}
	certPEM, keyPEM, err := ca.Issue(false, "localhost", "127.0.0.1", "::1")
	if err != nil {
		return DevFiles{}, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return DevFiles{}, err
	}
	f := DevFiles{CA: filepath.Join(dir, "ca.pem"), Cert: filepath.Join(dir, "cert.pem"), Key: filepath.Join(dir, "key.pem")}
	for _, w := range []struct {
		path string
		b    []byte
	}{{f.CA, ca.PEM}, {f.Cert, certPEM}, {f.Key, keyPEM}} {
		if err := os.WriteFile(w.path, w.b, 0o600); err != nil {
			return DevFiles{}, err
		}
	}
	return f, nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic("BUG: certs: crypto/rand failed: " + err.Error())
	}
	return n
}

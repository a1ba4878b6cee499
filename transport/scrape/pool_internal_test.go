package scrape

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestPoolsOfDepartedEnginesClose: an engine no scrape took for an idle
// timeout (its replica left) loses its pool at the next scrape of any
// engine, and a base URL with a path goes to net/http, without a pool.
func TestPoolsOfDepartedEnginesClose(t *testing.T) {
	page := "vllm:num_requests_running{engine=\"0\"} 0\nvllm:num_requests_waiting{engine=\"0\"} 0\nvllm:kv_cache_usage_perc{engine=\"0\"} 0\n"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte(page)) }))
	defer srv.Close()
	s := New(Options{IdleTimeout: 100 * time.Millisecond})
	defer s.Close()
	scrape := func(base string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if _, err := s.Scrape(ctx, base); err != nil {
			t.Fatal(err)
		}
	}
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	gone, kept := srv.URL, "http://localhost:"+port
	scrape(gone)
	if e := s.entry(gone); e == nil || e.p == nil {
		t.Fatalf("no pool for %s", gone)
	}
	time.Sleep(150 * time.Millisecond)
	scrape(kept) // the same engine under another name: a new entry, and a sweep
	if s.entry(gone) != nil {
		t.Errorf("the pool of %s, unscraped for longer than the idle timeout, was kept", gone)
	}
	scrape(srv.URL + "/engine")
	if e := s.entry(srv.URL + "/engine"); e == nil || e.p != nil {
		t.Errorf("a base URL with a path: %+v, want net/http's", e)
	}
}

// TestScrapeTLSPool: an https engine is scraped over its pool with the
// Scraper's TLS config (the engine's CA), and refused without it.
func TestScrapeTLSPool(t *testing.T) {
	page := "vllm:num_requests_running{engine=\"0\"} 2\nvllm:num_requests_waiting{engine=\"0\"} 1\nvllm:kv_cache_usage_perc{engine=\"0\"} 0.5\n"
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte(page)) }))
	defer srv.Close()
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()

	s := New(Options{TLS: &tls.Config{RootCAs: roots}})
	defer s.Close()
	r, err := s.Scrape(ctx, srv.URL)
	if err != nil || r.Running != 2 || r.Waiting != 1 {
		t.Fatalf("%+v, %v", r, err)
	}
	if e := s.entry(srv.URL); e == nil || e.p == nil {
		t.Fatalf("scraped without a pool: %+v", e)
	}
	untrusting := New(Options{})
	defer untrusting.Close()
	if _, err := untrusting.Scrape(ctx, srv.URL); err == nil {
		t.Fatal("an engine whose certificate nobody trusts was scraped")
	}
}

// entry is base's pool entry, nil when it has none.
func (s *Scraper) entry(base string) *enginePool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pools[base]
}

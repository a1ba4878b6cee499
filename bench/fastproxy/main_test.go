package main

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The proxy's round robin, keep-alive and streaming are checked on the
// built binary, beside nginx's, in bench/gwload (TestFastproxy).

// TestProxyUpstreamDown: an upstream that refuses connections is a 502.
func TestProxyUpstreamDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	front, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := newServer([]string{dead})
	done := make(chan error, 1)
	go func() { done <- srv.Serve(front) }()
	defer func() {
		srv.Shutdown()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	resp, err := http.Get("http://" + front.Addr().String() + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway || !strings.HasPrefix(string(body), "fastproxy: ") {
		t.Fatalf("%d %q, want 502", resp.StatusCode, body)
	}
}

// TestProxyManyInFlight: more requests in flight to one upstream than
// fasthttp's default of 512 connections per host all get through, as they
// do through nginx, when the machine stalls and answers pile up.
func TestProxyManyInFlight(t *testing.T) {
	const n = 600
	var arrived atomic.Int64
	all := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if arrived.Add(1) == n {
			close(all)
		}
		select {
		case <-all:
		case <-time.After(5 * time.Second):
		}
		io.WriteString(w, "ok")
	}))
	defer up.Close()
	front, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := newServer([]string{strings.TrimPrefix(up.URL, "http://")})
	go srv.Serve(front)
	defer srv.Shutdown()
	client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 0, MaxIdleConnsPerHost: n}, Timeout: 20 * time.Second}
	var wg sync.WaitGroup
	var bad atomic.Int64
	for range n {
		wg.Go(func() {
			resp, err := client.Get("http://" + front.Addr().String() + "/x")
			if err != nil {
				bad.Add(1)
				return
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || string(body) != "ok" {
				bad.Add(1)
			}
		})
	}
	wg.Wait()
	if bad.Load() > 0 || arrived.Load() != n {
		t.Fatalf("%d of %d requests failed; the upstream saw %d", bad.Load(), n, arrived.Load())
	}
}

func TestLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:8000": true, "127.3.4.5:1": true, "[::1]:80": true, "localhost:9": true,
		"0.0.0.0:8000": false, "10.0.0.1:80": false, "example.com:80": false, "127.0.0.1": false, "": false,
	} {
		if got := loopback(addr); got != want {
			t.Errorf("loopback(%q) = %v, want %v", addr, got, want)
		}
	}
}

package main

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
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

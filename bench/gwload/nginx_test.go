package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/inferrail/inferrail/bench/loadgen"
)

const nginxScript = "../../scripts/nginx-proxy.sh"

// upstreams are two loopback servers for a baseline proxy to stand in
// front of: each answers with its name and what it was sent, except
// /stream, an SSE stream whose second event waits for release.
type upstreams struct {
	hostports []string
	release   chan struct{}
	mu        sync.Mutex
	conns     map[string]int // upstream-side remote address → requests
}

func startUpstreams(t *testing.T) *upstreams {
	u := &upstreams{release: make(chan struct{}), conns: map[string]int{}}
	handler := func(name string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			u.mu.Lock()
			u.conns[r.RemoteAddr]++
			u.mu.Unlock()
			body, _ := io.ReadAll(r.Body)
			if r.URL.Path != "/stream" {
				fmt.Fprintf(w, "%s %s %s %s", name, r.Method, r.URL.Path, body)
				return
			}
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "data: first\n\n")
			w.(http.Flusher).Flush()
			select {
			case <-u.release:
			case <-time.After(5 * time.Second):
			}
			fmt.Fprint(w, "data: second\n\n")
		}
	}
	for _, name := range []string{"a", "b"} {
		srv := httptest.NewServer(handler(name))
		t.Cleanup(srv.Close)
		u.hostports = append(u.hostports, strings.TrimPrefix(srv.URL, "http://"))
	}
	return u
}

// checkProxy checks what a baseline proxy on base, in front of u, must do:
// round robin, the request passed on whole, keep-alive connections to the
// upstreams, and SSE events passed on one by one.
func checkProxy(t *testing.T, base string, u *upstreams) {
	t.Helper()
	client := &http.Client{Timeout: 10 * time.Second}
	got := map[string]int{}
	for i := range 20 {
		resp, err := client.Post(base+"/v1/completions", "application/json", strings.NewReader(fmt.Sprintf(`{"n":%d}`, i)))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		name, rest, _ := strings.Cut(string(body), " ")
		if want := fmt.Sprintf(`POST /v1/completions {"n":%d}`, i); resp.StatusCode != http.StatusOK || rest != want {
			t.Fatalf("request %d: %d %q, want 200 and %q", i, resp.StatusCode, body, want)
		}
		got[name]++
	}
	if got["a"] != 10 || got["b"] != 10 {
		t.Fatalf("round robin: %v", got)
	}
	u.mu.Lock()
	n := len(u.conns)
	u.mu.Unlock()
	// 21 requests (the health probe too) over at most one connection per upstream.
	if n > 2 {
		t.Fatalf("%d upstream connections for 21 sequential requests: keep-alive is off", n)
	}

	// The first event must arrive while the upstream still holds the second;
	// the clock starts before the request, since a proxy that buffered the
	// body could hold the headers back too.
	type reply struct {
		first string
		rest  *bufio.Reader
		body  io.Closer
		err   error
	}
	replies := make(chan reply, 1)
	go func() {
		resp, err := client.Get(base + "/stream")
		if err != nil {
			replies <- reply{err: err}
			return
		}
		br := bufio.NewReader(resp.Body)
		line, err := br.ReadString('\n')
		replies <- reply{line, br, resp.Body, err}
	}()
	var r reply
	select {
	case r = <-replies:
		if r.body != nil {
			defer r.body.Close()
		}
		if r.err != nil || r.first != "data: first\n" {
			t.Fatalf("first line %q, %v", r.first, r.err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("the proxy held the first SSE event back until the upstream went on")
	}
	close(u.release)
	rest, err := io.ReadAll(r.rest)
	if err != nil || string(rest) != "\ndata: second\n\n" {
		t.Fatalf("the rest of the stream: %q, %v", rest, err)
	}
}

// TestNginxProxyScript runs scripts/nginx-proxy.sh in front of two loopback
// servers and checks what the baseline depends on (checkProxy).
func TestNginxProxyScript(t *testing.T) {
	if _, err := exec.LookPath("nginx"); err != nil {
		t.Skip("no nginx (scripts/bench-gateway.sh installs it)")
	}
	u := startUpstreams(t)
	addr, err := freeAddr()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ctx := context.Background()
	p, err := loadgen.Start(ctx, loadgen.Command{Name: "nginx", Bin: nginxScript, Args: append([]string{dir, addr}, u.hostports...)})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := p.Stop(); err != nil {
			t.Error(err)
		}
	}()
	if err := loadgen.WaitHealthy(ctx, p, "http://"+addr+"/health", 10*time.Second); err != nil {
		t.Fatalf("%v; error log: %s", err, readFile(filepath.Join(dir, "error.log")))
	}
	checkProxy(t, "http://"+addr, u)
}

// TestFastproxy builds bench/fastproxy, starts it as gwload does (its
// ready line names its address) and checks it as the nginx baseline.
func TestFastproxy(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "fastproxy")
	if out, err := exec.Command("go", "build", "-o", bin, "../fastproxy").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v: %s", err, out)
	}
	u := startUpstreams(t)
	ctx := context.Background()
	p, err := loadgen.Start(ctx, loadgen.Command{Name: fastproxy, Bin: bin, Args: u.hostports, Ready: fastproxyReady})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := p.Stop(); err != nil {
			t.Error(err)
		}
	}()
	if err := loadgen.WaitHealthy(ctx, p, p.URL+"/health", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	checkProxy(t, p.URL, u)
}

// TestNginxProxyScriptLoopbackOnly: the script refuses any address but
// loopback, before it starts anything.
func TestNginxProxyScriptLoopbackOnly(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{dir, "0.0.0.0:8080", "127.0.0.1:8001"},
		{dir, "127.0.0.1:8080", "10.0.0.10:8000"},
		{dir, "127.0.0.1:8080", "example.com:80"},
		{dir, "127.0.0.1:8080"},
	} {
		cmd := exec.Command(nginxScript, args...)
		cmd.Env = append(cmd.Environ(), "NGINX=/bin/false")
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 {
			t.Errorf("%v: %v, %s; want exit status 2", args, err, out)
		}
	}
}

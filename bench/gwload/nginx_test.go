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

// TestNginxProxyScript runs scripts/nginx-proxy.sh in front of two loopback
// servers and checks what the baseline depends on: round robin, keep-alive
// connections to the upstreams, and SSE events passed on one by one.
func TestNginxProxyScript(t *testing.T) {
	if _, err := exec.LookPath("nginx"); err != nil {
		t.Skip("no nginx (scripts/bench-gateway.sh installs it)")
	}
	release := make(chan struct{})
	var mu sync.Mutex
	conns := map[string]int{} // upstream-side remote address → requests
	handler := func(name string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			conns[r.RemoteAddr]++
			mu.Unlock()
			if r.URL.Path != "/stream" {
				fmt.Fprint(w, name)
				return
			}
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "data: first\n\n")
			w.(http.Flusher).Flush()
			select {
			case <-release:
			case <-time.After(5 * time.Second):
			}
			fmt.Fprint(w, "data: second\n\n")
		}
	}
	a, b := httptest.NewServer(handler("a")), httptest.NewServer(handler("b"))
	defer a.Close()
	defer b.Close()

	addr, err := freeAddr()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ctx := context.Background()
	p, err := loadgen.Start(ctx, loadgen.Command{Name: "nginx", Bin: nginxScript,
		Args: []string{dir, addr, strings.TrimPrefix(a.URL, "http://"), strings.TrimPrefix(b.URL, "http://")}})
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

	client := &http.Client{Timeout: 10 * time.Second}
	got := map[string]int{}
	for range 20 {
		resp, err := client.Get("http://" + addr + "/x")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		got[string(body)]++
	}
	if got["a"] != 10 || got["b"] != 10 {
		t.Fatalf("round robin: %v", got)
	}
	mu.Lock()
	n := len(conns)
	mu.Unlock()
	// 21 requests (the health probe too) over at most one connection per upstream.
	if n > 2 {
		t.Fatalf("%d upstream connections for 21 sequential requests: keep-alive is off", n)
	}

	// The first event must arrive while the upstream still holds the second.
	resp, err := client.Get("http://" + addr + "/stream")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	first := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(resp.Body).ReadString('\n')
		first <- line
	}()
	select {
	case line := <-first:
		if line != "data: first\n" {
			t.Fatalf("first line %q", line)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("nginx held the first SSE event back until the upstream went on")
	}
	close(release)
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

package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/inferrail/inferrail/config"
	"github.com/inferrail/inferrail/sim"
)

// A gateway serving a config file applies an edit on POST /admin/reload
// while requests flow: x-inferrail-policy changes, the reload counts as
// applied and the generation moves to 2. An edit of server.listen is
// refused whole: the policy stays and the reload counts as rejected.
func TestReloadEndToEnd(t *testing.T) {
	sims, opts := zeroLatencySims(t, 2)
	cfg := gatewayConfig(sims, opts)
	cfg.Routing.DefaultPolicy = "least_request"
	cfg.Server.ReloadInterval = 0 // only POST /admin/reload and SIGHUP
	g := serveConfigFile(t, cfg)
	write, addr, admin := func(c *config.Config) { g.write(t, c) }, g.addr, g.admin

	policyOf := func() (string, error) {
		resp, err := http.Post("http://"+addr+"/v1/completions", "application/json",
			strings.NewReader(`{"model":"sim","max_tokens":2,"prompt":"hello there"}`))
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		io.Copy(io.Discard, resp.Body)
		if resp.StatusCode != 200 {
			return "", &statusError{resp.StatusCode}
		}
		return resp.Header.Get("X-Inferrail-Policy"), nil
	}
	reload := func() (int, map[string]any) {
		t.Helper()
		resp, err := http.Post("http://"+admin+"/admin/reload", "", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, out
	}
	if p, err := policyOf(); err != nil || p != "least_request" {
		t.Fatalf("policy %q, %v; want least_request", p, err)
	}

	// Requests keep flowing through the reloads.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var ok, failed atomic.Int64
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := policyOf(); err != nil {
					failed.Add(1)
				} else {
					ok.Add(1)
				}
			}
		})
	}
	grows(t, "requests before the reload", &ok, 4)

	cfg.Routing.DefaultPolicy = "round_robin"
	write(cfg)
	if code, out := reload(); code != 200 || out["result"] != "applied" || out["generation"] != float64(2) {
		t.Fatalf("reload: %d %v", code, out)
	}
	if p, err := policyOf(); err != nil || p != "round_robin" {
		t.Fatalf("policy after the reload %q, %v; want round_robin", p, err)
	}
	if code, out := reload(); code != 200 || out["result"] != "unchanged" {
		t.Fatalf("second reload: %d %v", code, out)
	}

	refused := *cfg
	refused.Server.Listen = "127.0.0.1:1"
	refused.Routing.DefaultPolicy = "random"
	write(&refused)
	code, out := reload()
	if code != 422 || out["result"] != "rejected" || !strings.Contains(out["error"].(string), "server") {
		t.Fatalf("refused reload: %d %v", code, out)
	}
	grows(t, "requests after the refused reload", &ok, 4)
	close(stop)
	wg.Wait()
	t.Logf("%d requests during the reloads, %d failed", ok.Load(), failed.Load())
	if failed.Load() > 0 || ok.Load() == 0 {
		t.Fatalf("%d requests failed during the reloads (%d succeeded)", failed.Load(), ok.Load())
	}
	if p, err := policyOf(); err != nil || p != "round_robin" {
		t.Fatalf("policy after a refused reload %q, %v; want round_robin", p, err)
	}

	resp, err := http.Get("http://" + admin + "/admin/config")
	if err != nil {
		t.Fatal(err)
	}
	var cur struct {
		Generation int            `json:"generation"`
		Config     map[string]any `json:"config"`
	}
	json.NewDecoder(resp.Body).Decode(&cur)
	resp.Body.Close()
	if cur.Generation != 2 || cur.Config["routing"].(map[string]any)["default_policy"] != "round_robin" {
		t.Fatalf("GET /admin/config: generation %d, routing %v", cur.Generation, cur.Config["routing"])
	}
	body := metricsText(t, admin)
	for _, want := range []string{
		`inferrail_config_reloads_total{result="applied"} 1`,
		`inferrail_config_reloads_total{result="unchanged"} 1`,
		`inferrail_config_reloads_total{result="rejected"} 1`,
		`inferrail_config_generation 2`,
	} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// servedConfig is a gateway a test serves from a config file.
type servedConfig struct {
	path, addr, admin string
	// stop stops the gateway and returns serve's error; the test's
	// cleanup calls it too.
	stop func() error
}

// serveConfigFile writes cfg to a file and serves it, as inferrail serve
// does, until stop or the end of the test.
func serveConfigFile(t *testing.T, cfg *config.Config) *servedConfig {
	t.Helper()
	return serveConfigFileEnv(t, cfg, nil)
}

// serveConfigFileEnv is serveConfigFile with INFERRAIL_ entries laid over
// the file, at startup and every reload, as inferrail serve lays its pool
// flags.
func serveConfigFileEnv(t *testing.T, cfg *config.Config, env []string) *servedConfig {
	t.Helper()
	g := &servedConfig{path: filepath.Join(t.TempDir(), "inferrail.yaml")}
	g.write(t, cfg)
	loaded, err := config.Load(g.path, env)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan [2]string, 1)
	done := make(chan error, 1)
	go func() {
		done <- runGateway(ctx, false, g.path, append(os.Environ(), env...), loaded, io.Discard, func(a, b string) { ready <- [2]string{a, b} })
	}()
	var once sync.Once
	var serveErr error
	g.stop = func() error {
		once.Do(func() {
			cancel()
			serveErr = <-done
		})
		return serveErr
	}
	t.Cleanup(func() {
		if err := g.stop(); err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	select {
	case a := <-ready:
		g.addr, g.admin = a[0], a[1]
	case err := <-done:
		t.Fatalf("serve: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("gateway did not start")
	}
	return g
}

// write replaces the config file with c and returns its bytes.
func (g *servedConfig) write(t *testing.T, c *config.Config) []byte {
	t.Helper()
	b, err := c.YAML()
	if err != nil {
		t.Fatal(err)
	}
	// Written beside it and renamed over it, as config management does, so
	// that a poll never reads a half-written file (which it would reject,
	// and count).
	tmp := g.path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, g.path); err != nil {
		t.Fatal(err)
	}
	return b
}

type statusError struct{ code int }

func (e *statusError) Error() string { return "status " + http.StatusText(e.code) }

func metricsText(t *testing.T, admin string) string {
	t.Helper()
	resp, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// The reload loop reloads on SIGHUP (a value on its channel) and, every
// reload_interval, when the file's bytes changed.
func TestReloadLoop(t *testing.T) {
	cfg := gatewayConfig(nil, sim.DefaultOptions())
	cfg.Replicas = []config.Replica{config.NewReplica("sim-0", "http://127.0.0.1:1", cfg.Models[0].Name)}
	path := filepath.Join(t.TempDir(), "inferrail.yaml")
	b, _ := cfg.YAML()
	os.WriteFile(path, b, 0o600)
	loaded, err := config.Load(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := newReloader(path, loaded, nil, nil, nil, nil)
	hup := make(chan os.Signal, 1)
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { defer close(stopped); r.run(ctx, 10*time.Millisecond, hup) }()
	defer func() { cancel(); <-stopped }()
	time.Sleep(50 * time.Millisecond)
	if n := r.unchanged.Get() + r.applied.Get() + r.rejected.Get(); n != 0 {
		t.Fatalf("%d reload attempts on a file left alone, want 0", n)
	}
	hup <- os.Interrupt
	deadline := time.Now().Add(5 * time.Second)
	for r.unchanged.Get() != 1 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if r.unchanged.Get() != 1 {
		t.Fatalf("SIGHUP: unchanged %d, want 1", r.unchanged.Get())
	}
	os.WriteFile(path, []byte("server: {listen: [\n"), 0o600) // not YAML
	for r.rejected.Get() != 1 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if r.rejected.Get() != 1 {
		t.Fatalf("a broken file: rejected %d, want 1", r.rejected.Get())
	}
	time.Sleep(50 * time.Millisecond)
	if r.rejected.Get() != 1 {
		t.Fatalf("a broken file left alone was retried: rejected %d", r.rejected.Get())
	}
}

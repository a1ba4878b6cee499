package main

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/inferrail/inferrail/config"
)

// TestPoolFlags: llm-d's pool flags set the discovery.kubernetes keys,
// over the file, and malformed ones are refused.
func TestPoolFlags(t *testing.T) {
	parse := func(args ...string) ([]string, error) {
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		p := addPoolFlags(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		return p.env()
	}
	env, err := parse("--pool-name", "llama", "--pool-namespace", "inference",
		"--endpoint-selector", "app=vllm, llm-d.ai/role=decode", "--endpoint-target-ports", "8000,8001")
	if err != nil {
		t.Fatal(err)
	}
	doc := "models: [{name: m}]\ndiscovery: {kubernetes: {pool_name: from-file, target_ports: [1]}}\n"
	cfg, err := config.Parse([]byte(doc), env)
	if err != nil {
		t.Fatal(err)
	}
	k := cfg.Discovery.Kubernetes
	if k.PoolName != "llama" || k.PoolNamespace != "inference" || fmt.Sprint(k.EndpointSelector) != "map[app:vllm llm-d.ai/role:decode]" ||
		!slices.Equal(k.TargetPorts, []int{8000, 8001}) {
		t.Fatalf("kubernetes: %+v", k)
	}
	if env, err := parse(); err != nil || len(env) != 0 {
		t.Fatalf("no flags: %v %v", env, err)
	}
	for _, args := range [][]string{
		{"--endpoint-selector", "app"}, {"--endpoint-selector", "=x"}, {"--endpoint-selector", "a=1,a=2"},
		{"--endpoint-target-ports", "8000,x"},
	} {
		if _, err := parse(args...); err == nil {
			t.Errorf("%q accepted", args)
		}
	}
	// Past what the flags can check, config's checks apply.
	env, _ = parse("--endpoint-selector", "app=vllm", "--endpoint-target-ports", "1,2,3,4,5,6,7,8,9")
	if _, err := config.Parse([]byte("models: [{name: m}]\n"), env); err == nil || !strings.Contains(err.Error(), "discovery.kubernetes.target_ports") {
		t.Errorf("nine ports: %v", err)
	}
}

// TestServeFileDiscovery: serve follows discovery.file next to a static
// replica: the file's endpoint joins and gets traffic, a bad rewrite keeps
// it and shows on /admin/replicas and /metrics, and a rewrite without it
// drains it. Stopping serve stops the watcher (TestMain checks for
// goroutines left behind).
func TestServeFileDiscovery(t *testing.T) {
	sims, opts := zeroLatencySims(t, 2)
	cfg := gatewayConfig(sims[:1], opts)
	u, err := url.Parse(sims[1].URL())
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "endpoints.yaml")
	write := func(doc string) {
		t.Helper()
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	write(fmt.Sprintf("endpoints:\n  - {name: file-sim, namespace: default, address: %s, port: %q, labels: {llm-d.ai/role: decode}}\n",
		u.Hostname(), u.Port()))
	cfg.Discovery.File = config.Default().Discovery.File
	cfg.Discovery.File.Path = path
	addr, admin := startGateway(t, cfg)

	type page struct {
		Replicas []struct {
			ID string `json:"id"`
		} `json:"replicas"`
		Discovery []struct {
			Name    string  `json:"name"`
			Members int     `json:"members"`
			Failing *string `json:"failing"`
		} `json:"discovery"`
	}
	read := func() page {
		var p page
		getJSON(t, http.DefaultClient, "http://"+admin+"/admin/replicas", &p)
		return p
	}
	has := func(p page, id string) bool {
		return slices.ContainsFunc(p.Replicas, func(r struct {
			ID string `json:"id"`
		}) bool {
			return r.ID == id
		})
	}
	if p := read(); !has(p, "file-sim") || len(p.Discovery) != 1 || p.Discovery[0].Name != "file" || p.Discovery[0].Members != 1 {
		t.Fatalf("after start: %+v", p)
	}
	got := map[string]bool{}
	for i := range 40 {
		status, replica, _, body := complete(t, addr, fmt.Sprintf("prompt %d", i))
		if status != http.StatusOK {
			t.Fatalf("status %d: %s", status, body)
		}
		got[replica] = true
	}
	if !got["file-sim"] || !got["sim-0"] {
		t.Fatalf("requests went to %v; want the static replica and the file's", got)
	}

	write("endpoints: [{name: file-sim")
	eventually(t, "the bad rewrite shown", 10*time.Second, func() bool {
		p := read()
		return len(p.Discovery) == 1 && p.Discovery[0].Failing != nil && strings.Contains(*p.Discovery[0].Failing, "written with an error")
	})
	if p := read(); !has(p, "file-sim") {
		t.Fatal("the bad rewrite dropped the last good endpoint")
	}
	resp, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), `inferrail_discovery_failing{source="file"} 1`) {
		t.Errorf("metrics lack the failing source:\n%s", b)
	}

	write("endpoints: []\n")
	eventually(t, "the file's endpoint drained", 10*time.Second, func() bool {
		p := read()
		return !has(p, "file-sim") && p.Discovery[0].Failing == nil
	})
	for i := range 10 {
		if status, replica, _, body := complete(t, addr, fmt.Sprintf("after %d", i)); status != http.StatusOK || replica != "sim-0" {
			t.Fatalf("after the drain: %d %s %s", status, replica, body)
		}
	}
}

// TestPoolFlagsSurviveReload: the flags are laid over the file at every
// reload too, so a reload of the unchanged file is unchanged rather than
// refused for a discovery change; and a Kubernetes source without a client
// says so on /admin/replicas while the static replicas serve.
func TestPoolFlagsSurviveReload(t *testing.T) {
	t.Setenv("KUBECONFIG", "")
	sims, opts := zeroLatencySims(t, 1)
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	p := addPoolFlags(fs)
	if err := fs.Parse([]string{"--pool-name", "llama", "--pool-namespace", "inference"}); err != nil {
		t.Fatal(err)
	}
	env, err := p.env()
	if err != nil {
		t.Fatal(err)
	}
	g := serveConfigFileEnv(t, gatewayConfig(sims, opts), env)
	addr, admin := g.addr, g.admin
	if code, out := reloadNow(t, admin); code != http.StatusOK || out["result"] != "unchanged" {
		t.Fatalf("reload: %d %v", code, out)
	}
	var page struct {
		Discovery []struct {
			Name    string  `json:"name"`
			Failing *string `json:"failing"`
		} `json:"discovery"`
	}
	eventually(t, "the kubernetes source failing on /admin/replicas", 5*time.Second, func() bool {
		getJSON(t, http.DefaultClient, "http://"+admin+"/admin/replicas", &page)
		return len(page.Discovery) == 1 && page.Discovery[0].Name == "kubernetes" && page.Discovery[0].Failing != nil &&
			strings.Contains(*page.Discovery[0].Failing, "no Kubernetes client")
	})
	if status, replica, _, body := complete(t, addr, "hello"); status != http.StatusOK || replica != "sim-0" {
		t.Fatalf("%d %s %s", status, replica, body)
	}
}

// TestCheckTakesPoolFlags: check validates the config as serve would run
// it, the pool flags laid over: a config whose only replicas are a pool's
// passes with --pool-name and fails without.
func TestCheckTakesPoolFlags(t *testing.T) {
	path := filepath.Join(t.TempDir(), "inferrail.yaml")
	if err := os.WriteFile(path, []byte("models: [{name: m}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := runCheck(t.Context(), []string{"--config", path, "--pool-name", "llama"}, &out, io.Discard); err != nil {
		t.Fatalf("with --pool-name: %v", err)
	}
	if !strings.Contains(out.String(), "ok") {
		t.Errorf("output %q", out.String())
	}
	if err := runCheck(t.Context(), []string{"--config", path}, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "discovery.kubernetes pool") {
		t.Fatalf("without: %v", err)
	}
	if err := runCheck(t.Context(), []string{"--config", path, "--endpoint-selector", "app"}, io.Discard, io.Discard); err != errUsage {
		t.Fatalf("malformed selector: %v", err)
	}
}

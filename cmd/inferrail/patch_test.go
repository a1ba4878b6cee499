package main

import (
	"bytes"
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

// PATCH /admin/config switches the policy while requests flow and bumps
// the generation, leaving the file alone; the file left alone (polled or
// reloaded) does not revert the patch; a patch of server.listen, an
// unknown key or an invalid value is refused with 422 and counted
// rejected; a body that is not a JSON object is a 400; the file's next
// edit replaces the patch.
func TestPatchConfigEndToEnd(t *testing.T) {
	sims, opts := zeroLatencySims(t, 2)
	cfg := gatewayConfig(sims, opts)
	cfg.Routing.DefaultPolicy = "least_request"
	cfg.Server.ReloadInterval = 10 * time.Millisecond
	g := serveConfigFile(t, cfg)
	path, addr, admin := g.path, g.addr, g.admin
	write := func(c *config.Config) []byte { return g.write(t, c) }
	file, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}

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
	do := func(method, path, ctype string, body []byte) (*http.Response, map[string]any) {
		t.Helper()
		req, err := http.NewRequest(method, "http://"+admin+path, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			t.Fatalf("%s %s: %d, body not JSON: %v", method, path, resp.StatusCode, err)
		}
		return resp, out
	}
	patch := func(body string) (int, map[string]any) {
		t.Helper()
		resp, out := do("PATCH", "/admin/config", "application/merge-patch+json", []byte(body))
		return resp.StatusCode, out
	}
	// errMessage is the message of an answer in the OpenAI error shape.
	errMessage := func(out map[string]any) string {
		e, _ := out["error"].(map[string]any)
		m, _ := e["message"].(string)
		return m
	}
	if p, err := policyOf(); err != nil || p != "least_request" {
		t.Fatalf("policy %q, %v; want least_request", p, err)
	}

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
	grows(t, "requests before the patch", &ok, 4)

	if code, out := patch(`{"routing":{"default_policy":"round_robin"}}`); code != 200 || out["result"] != "applied" ||
		out["generation"] != float64(2) || out["patched"] != true {
		t.Fatalf("patch: %d %v", code, out)
	}
	if p, err := policyOf(); err != nil || p != "round_robin" {
		t.Fatalf("policy after the patch %q, %v; want round_robin", p, err)
	}
	// The same patch again changes nothing; application/json is accepted.
	if resp, out := do("PATCH", "/admin/config", "application/json; charset=utf-8",
		[]byte(`{"routing":{"default_policy":"round_robin"}}`)); resp.StatusCode != 200 || out["result"] != "unchanged" || out["generation"] != float64(2) {
		t.Fatalf("same patch again: %d %v", resp.StatusCode, out)
	}

	// The file left alone: polls skip it, and a reload keeps the patch.
	time.Sleep(100 * time.Millisecond)
	if code, out := reloadNow(t, admin); code != 200 || out["result"] != "unchanged" || out["patched"] != true || out["generation"] != float64(2) {
		t.Fatalf("reload of the file left alone: %d %v", code, out)
	}
	if p, err := policyOf(); err != nil || p != "round_robin" {
		t.Fatalf("policy after a reload of the file left alone %q, %v; want round_robin", p, err)
	}

	// Refused whole, 422 in the shape of POST /admin/reload, counted.
	for _, tc := range []struct{ body, want string }{
		{`{"server":{"listen":"127.0.0.1:1"},"routing":{"default_policy":"random"}}`, "needs a restart, refused whole: server"},
		{`{"routing":{"no_such_key":1}}`, "routing.no_such_key: unknown key"},
		{`{"routing":{"default_policy":"no_such_policy"}}`, "routing.default_policy"},
		{`{"retry":{"backoff":"soon"}}`, "retry.backoff"},
	} {
		code, out := patch(tc.body)
		if e, _ := out["error"].(string); code != 422 || out["result"] != "rejected" || !strings.Contains(e, tc.want) || out["generation"] != float64(2) {
			t.Errorf("patch %s: %d %v; want 422 rejected naming %q", tc.body, code, out, tc.want)
		}
	}
	// Not a patch: 400, 413 or 415 in the OpenAI error shape, not counted.
	for _, tc := range []struct {
		ctype, body string
		code        int
	}{
		{"application/merge-patch+json", `{"routing":`, 400},
		{"application/merge-patch+json", `not json`, 400},
		{"application/merge-patch+json", `["routing"]`, 400},
		{"application/merge-patch+json", `null`, 400},
		{"application/merge-patch+json", `{} {}`, 400},
		{"application/merge-patch+json", `{"a":"` + strings.Repeat("x", config.MaxBytes) + `"}`, 413},
		{"text/plain", `{}`, 415},
		{"", `{}`, 415},
	} {
		resp, out := do("PATCH", "/admin/config", tc.ctype, []byte(tc.body))
		if resp.StatusCode != tc.code || errMessage(out) == "" || out["error"].(map[string]any)["code"] != float64(tc.code) {
			t.Errorf("patch %.40q (%s): %d %v; want %d in the OpenAI error shape", tc.body, tc.ctype, resp.StatusCode, out, tc.code)
		}
	}
	if resp, out := do("PUT", "/admin/config", "application/json", []byte(`{}`)); resp.StatusCode != 405 ||
		resp.Header.Get("Allow") != "GET, HEAD, PATCH" || errMessage(out) == "" {
		t.Errorf("PUT /admin/config: %d Allow %q %v", resp.StatusCode, resp.Header.Get("Allow"), out)
	}
	if b, err := os.ReadFile(path); err != nil || !bytes.Equal(b, file) {
		t.Fatalf("the file changed under the patches (%v)", err)
	}

	resp, out := do("GET", "/admin/config", "", nil)
	if routing, _ := out["config"].(map[string]any)["routing"].(map[string]any); resp.StatusCode != 200 ||
		out["generation"] != float64(2) || routing["default_policy"] != "round_robin" {
		t.Fatalf("GET /admin/config after the patch: %d %v", resp.StatusCode, out)
	}

	// The file's next edit replaces the patch (here through the poll).
	cfg.Routing.DefaultPolicy = "random"
	write(cfg)
	deadline := time.Now().Add(5 * time.Second)
	for {
		if p, err := policyOf(); err == nil && p == "random" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the file's edit did not replace the patch")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if code, out := reloadNow(t, admin); code != 200 || out["result"] != "unchanged" || out["patched"] != nil || out["generation"] != float64(3) {
		t.Fatalf("reload after the file's edit: %d %v", code, out)
	}

	grows(t, "requests after the last change", &ok, 4)
	close(stop)
	wg.Wait()
	t.Logf("%d requests during the patches, %d failed", ok.Load(), failed.Load())
	if failed.Load() > 0 || ok.Load() == 0 {
		t.Fatalf("%d requests failed during the patches (%d succeeded)", failed.Load(), ok.Load())
	}
	body := metricsText(t, admin)
	for _, want := range []string{
		`inferrail_config_reloads_total{result="applied"} 2`,
		`inferrail_config_reloads_total{result="unchanged"} 3`,
		`inferrail_config_reloads_total{result="rejected"} 4`,
		`inferrail_config_generation 3`,
	} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

func reloadNow(t *testing.T, admin string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest("POST", "http://"+admin+"/admin/reload", nil)
	return adminAnswer(t, req)
}

// adminAnswer sends an admin request and returns its status and JSON body.
func adminAnswer(t *testing.T, req *http.Request) (int, map[string]any) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
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

// A patch that changes nothing is unchanged, whatever the config holds:
// an integral float in a free-form value stays a float on its way through
// JSON. A patch that needs a restart is refused before the fleet is
// touched.
func TestPatchRoundTrip(t *testing.T) {
	cfg := gatewayConfig(nil, sim.DefaultOptions())
	cfg.Replicas = []config.Replica{config.NewReplica("sim-0", "http://127.0.0.1:1", cfg.Models[0].Name)}
	cfg.Models[0].ChatTemplateKwargs = map[string]any{"n": 1.0, "big": 1e21, "s": "<&>", "list": []any{2.0, "x"}}
	b, err := cfg.YAML()
	if err != nil {
		t.Fatal(err)
	}
	loaded, err := config.Parse(b, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := newReloader("", loaded, nil, nil, nil, nil)
	for _, p := range []string{`{}`, `{"models":null,"routing":{"cost_model":{}}}`, `{"nope":null}`} {
		var patch map[string]any
		if err := json.Unmarshal([]byte(p), &patch); err != nil {
			t.Fatal(err)
		}
		// Deleting the models would be refused; null for an absent key is nothing.
		got := r.Patch(patch)
		want := "unchanged"
		if strings.Contains(p, "models") {
			want = "rejected"
		}
		if got.Result != want || got.Generation != 1 || got.Patched {
			t.Errorf("patch %s: %+v, want %s at generation 1", p, got, want)
		}
	}
	got := r.Patch(map[string]any{"server": map[string]any{"listen": "127.0.0.1:1"}})
	if got.Result != "rejected" || !strings.Contains(got.Error, "config patch: needs a restart, refused whole: server") {
		t.Errorf("patch of server.listen: %+v", got)
	}
	if r.unchanged.Get() != 2 || r.rejected.Get() != 2 || r.applied.Get() != 0 {
		t.Errorf("counted unchanged %d, rejected %d, applied %d; want 2, 2, 0", r.unchanged.Get(), r.rejected.Get(), r.applied.Get())
	}
}

// While a patch is in effect, a reload (POST /admin/reload, SIGHUP) of the
// file left alone keeps it; one after the file's bytes changed applies the
// file, and with it no patch is in effect any more.
func TestReloadKeepsPatch(t *testing.T) {
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
	r.patched = true // as after an applied patch, which needs a fleet
	if got := r.Reload(); got.Result != "unchanged" || !got.Patched {
		t.Fatalf("reload of the file left alone: %+v, want unchanged, patched", got)
	}
	r.poll()
	if !r.patched || r.unchanged.Get() != 1 {
		t.Fatalf("a poll of the file left alone: patched %v, unchanged %d", r.patched, r.unchanged.Get())
	}
	os.WriteFile(path, append([]byte("# edited\n"), b...), 0o600)
	if got := r.Reload(); got.Result != "unchanged" || got.Patched {
		t.Fatalf("reload of the edited file: %+v, want unchanged, not patched", got)
	}
	if got := r.Reload(); got.Result != "unchanged" || got.Patched || r.unchanged.Get() != 3 {
		t.Fatalf("second reload: %+v, unchanged %d", got, r.unchanged.Get())
	}
}

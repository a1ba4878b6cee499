package main

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// An edit of rate_limits and flow_control applies live through the
// reloader (POST /admin/reload): the next request is held to the new
// limit and carries its headers, and the reload is not refused as
// needing a restart.
func TestReloadLimits(t *testing.T) {
	sims, opts := zeroLatencySims(t, 1)
	cfg := gatewayConfig(sims, opts)
	cfg.Server.ReloadInterval = 0
	g := serveConfigFile(t, cfg)
	post := func() *http.Response {
		t.Helper()
		resp, err := http.Post("http://"+g.addr+"/v1/completions", "application/json",
			strings.NewReader(`{"model":"sim","max_tokens":2,"prompt":"hello there"}`))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	if resp := post(); resp.StatusCode != 200 || resp.Header.Get("X-Ratelimit-Limit-Requests") != "" {
		t.Fatalf("no limits: %d %v", resp.StatusCode, resp.Header)
	}

	next := *cfg
	next.RateLimits.Default.RequestsPerSecond = 1
	next.FlowControl.Enabled = true
	next.FlowControl.Fairness = "round-robin-fairness-policy"
	g.write(t, &next)
	resp, err := http.Post("http://"+g.admin+"/admin/reload", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Result  string   `json:"result"`
		Changed []string `json:"changed"`
		Error   string   `json:"error"`
	}
	json.NewDecoder(resp.Body).Decode(&out)
	resp.Body.Close()
	if out.Result != "applied" || !strings.Contains(strings.Join(out.Changed, ","), "rate_limits") ||
		!strings.Contains(strings.Join(out.Changed, ","), "flow_control") {
		t.Fatalf("reload: %+v", out)
	}
	first, second := post(), post()
	if first.StatusCode != 200 || first.Header.Get("X-Ratelimit-Limit-Requests") != "1" {
		t.Errorf("first after the reload: %d %v", first.StatusCode, first.Header)
	}
	if second.StatusCode != 429 || second.Header.Get("Retry-After") != "1" {
		t.Errorf("second at 1/s: %d %v", second.StatusCode, second.Header)
	}
}

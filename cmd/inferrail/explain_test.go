package main

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/inferrail/inferrail/sim/engine"
)

type explained struct {
	Policy       string  `json:"policy"`
	PromptTokens int     `json:"prompt_tokens"`
	Tokenized    bool    `json:"tokenized"`
	Winner       *string `json:"winner"`
	DecidedBy    *string `json:"decided_by"`
	Replicas     []struct {
		Replica      string  `json:"replica"`
		Offered      bool    `json:"offered"`
		Reason       *string `json:"not_offered_because"`
		CachedTokens int     `json:"cached_tokens"`
		Estimate     *struct {
			TTFT float64 `json:"ttft_secs"`
		} `json:"estimate"`
	} `json:"replicas"`
}

// /admin/explain answers with every replica's prediction and estimate,
// names the replica routing then picks, and sends nothing to any engine.
func TestExplainEndToEnd(t *testing.T) {
	sims, opts := zeroLatencySims(t, 3)
	cfg := gatewayConfig(sims, opts)
	cfg.Routing.DefaultPolicy = "cost_model"
	cfg.Health.Interval, cfg.Health.Timeout, cfg.Health.UnhealthyThreshold = 50*time.Millisecond, 50*time.Millisecond, 1
	addr, admin := startGateway(t, cfg)
	body := `{"model":"sim","max_tokens":2,"prompt":"` + strings.Repeat("abc ", 300) + `"}`
	post := func(url string) (*http.Response, []byte) {
		t.Helper()
		resp, err := http.Post(url, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", url, resp.StatusCode, b)
		}
		return resp, b
	}
	served := func() (n int64) {
		for _, s := range sims {
			s.Inspect(func(e *engine.Engine) { n += e.Stats().PrefixQueries })
		}
		return n
	}

	// Warm one replica, then explain the same prompt.
	resp, _ := post("http://" + addr + "/v1/completions")
	warm := resp.Header.Get("X-Inferrail-Replica")
	before := served()
	var ex explained
	for range 3 { // explaining again and again changes nothing
		_, b := post("http://" + admin + "/admin/explain/v1/completions")
		ex = explained{}
		if err := json.Unmarshal(b, &ex); err != nil {
			t.Fatalf("%v: %s", err, b)
		}
	}
	if served() != before {
		t.Fatal("explaining sent a request to an engine")
	}
	if ex.Policy != "cost_model" || !ex.Tokenized || ex.PromptTokens < 300 || len(ex.Replicas) != 3 {
		t.Fatalf("explanation %+v", ex)
	}
	if ex.Winner == nil || *ex.Winner != warm || ex.DecidedBy == nil || *ex.DecidedBy != "prefill" {
		t.Fatalf("winner %v decided by %v, want %s by prefill", ex.Winner, ex.DecidedBy, warm)
	}
	for _, r := range ex.Replicas {
		if !r.Offered || r.Estimate == nil {
			t.Fatalf("replica %+v not offered or not priced", r)
		}
		if (r.Replica == warm) != (r.CachedTokens > 0) {
			t.Fatalf("replica %s predicted %d cached; only %s holds the prompt", r.Replica, r.CachedTokens, warm)
		}
	}
	resp, _ = post("http://" + addr + "/v1/completions")
	if got := resp.Header.Get("X-Inferrail-Replica"); got != *ex.Winner {
		t.Fatalf("explain named %s, routing picked %s", *ex.Winner, got)
	}

	// A replica that is down is listed, not offered, with the reason.
	sims[1].Kill()
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, b := post("http://" + admin + "/admin/explain/v1/completions")
		ex = explained{}
		if err := json.Unmarshal(b, &ex); err != nil {
			t.Fatal(err)
		}
		r := ex.Replicas[1]
		if r.Replica != "sim-1" {
			t.Fatalf("replicas out of order: %+v", ex.Replicas)
		}
		if !r.Offered && r.Reason != nil && *r.Reason == "unhealthy" && r.Estimate == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sim-1 still %+v after it was killed", r)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

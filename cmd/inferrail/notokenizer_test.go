package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestEventsWithoutTokenizer: a gateway following its engines' KV events
// for a model without a tokenizer (issue 32, case 1). The start-up log says
// no tokenizer is configured, not that one failed to load; every replica
// reports index_mode no_tokenizer, not exact, with the warning
// kv_events_no_tokenizer on /admin/replicas and /metrics and one log line
// per replica, even once events have arrived; a completion whose prompt is
// token ids maps to blocks, and its replica turns exact.
func TestEventsWithoutTokenizer(t *testing.T) {
	_, cfg := eventFleet(t, "vllm", 2048, 4096)
	cfg.Models[0].Tokenizer = ""
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	var logs lockedBuffer
	addr, admin, stop := startGatewayLogging(t, cfg, &logs)
	model := cfg.Models[0].Name
	post := func(path, body string) {
		t.Helper()
		resp, err := http.Post("http://"+addr+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: status %d", path, resp.StatusCode)
		}
	}
	type replicaView struct {
		ID        string `json:"id"`
		IndexMode string `json:"index_mode"`
		Warnings  []struct {
			Code string `json:"code"`
		} `json:"warnings"`
	}
	read := func() []replicaView {
		var p struct {
			Replicas []replicaView `json:"replicas"`
		}
		getJSON(t, http.DefaultClient, "http://"+admin+"/admin/replicas", &p)
		return p.Replicas
	}
	// Text prompts: the engines store blocks and publish them.
	for i := range 6 {
		post("/v1/chat/completions", fmt.Sprintf(`{"model":%q,"max_tokens":2,"messages":[{"role":"user","content":"question %d: %s"}]}`,
			model, i, strings.Repeat("words to fill a block ", 8)))
	}
	eventually(t, "blocks stored from events, every replica no_tokenizer", 10*time.Second, func() bool {
		var page bytes.Buffer
		resp, err := http.Get("http://" + admin + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		_, _ = page.ReadFrom(resp.Body)
		stored := false
		for _, line := range strings.Split(page.String(), "\n") {
			if strings.HasPrefix(line, "inferrail_kv_events_blocks_total{") && strings.Contains(line, `op="stored"`) &&
				!strings.HasSuffix(line, " 0") {
				stored = true
			}
		}
		return stored && strings.Count(page.String(), `,mode="no_tokenizer"} 1`) == len(cfg.Replicas) &&
			strings.Count(page.String(), `warning="kv_events_no_tokenizer"} 1`) == len(cfg.Replicas)
	})
	for _, r := range read() {
		if r.IndexMode != "no_tokenizer" || len(r.Warnings) != 1 || r.Warnings[0].Code != "kv_events_no_tokenizer" {
			t.Errorf("replica %+v: want index_mode no_tokenizer and the warning", r)
		}
	}
	// A prompt of token ids needs no tokenizer: the replica it reaches can
	// be queried.
	ids := make([]int, 40)
	for i := range ids {
		ids[i] = 1000 + i
	}
	prompt, _ := json.Marshal(ids)
	post("/v1/completions", fmt.Sprintf(`{"model":%q,"max_tokens":2,"prompt":%s}`, model, prompt))
	eventually(t, "a replica exact after a prompt of token ids", 10*time.Second, func() bool {
		for _, r := range read() {
			if r.IndexMode == "exact" && len(r.Warnings) == 0 {
				return true
			}
		}
		return false
	})
	stop()
	out := logs.String()
	if strings.Contains(out, "failed to load") {
		t.Errorf("a tokenizer that was never configured is logged as failing to load:\n%s", out)
	}
	if !strings.Contains(out, "no tokenizer configured") {
		t.Errorf("the start-up log does not say no tokenizer is configured:\n%s", out)
	}
	if n := strings.Count(out, "level=WARN msg=\"KV events are configured, but model"); n != len(cfg.Replicas) {
		t.Errorf("%d warning lines, want one per replica:\n%s", n, out)
	}
}

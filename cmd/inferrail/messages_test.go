package main

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestExplainMessages: /admin/explain/v1/messages explains an Anthropic
// Messages request as the gateway routes it: tokenized as vLLM renders
// it, the replica holding its prefix the winner (a later turn, with
// another billing header, included).
func TestExplainMessages(t *testing.T) {
	sims, opts := zeroLatencySims(t, 3)
	cfg := gatewayConfig(sims, opts)
	cfg.Routing.DefaultPolicy = "cost_model"
	addr, admin := startGateway(t, cfg)
	turn := func(header string) string {
		return `{"model":"sim","max_tokens":2,"system":[{"type":"text","text":"x-anthropic-billing-header: cch=` + header + `;"},` +
			`{"type":"text","text":"` + strings.Repeat("You are a careful agent. ", 40) + `"}],"messages":[{"role":"user","content":"hi"}]}`
	}
	post := func(url, body string) (*http.Response, []byte) {
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
	resp, _ := post("http://"+addr+"/v1/messages?beta=true", turn("a1"))
	warm := resp.Header.Get("X-Inferrail-Replica")
	_, b := post("http://"+admin+"/admin/explain/v1/messages", turn("b2"))
	var ex explained
	if err := json.Unmarshal(b, &ex); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	if !ex.Tokenized || ex.PromptTokens < 200 || ex.Winner == nil || *ex.Winner != warm {
		t.Fatalf("explanation %s; want %s, tokenized", b, warm)
	}
}

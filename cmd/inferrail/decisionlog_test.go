package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/inferrail/inferrail/config"
)

// With observability.decision_log at full sampling, every routed request
// leaves one line per attempt, naming the replica that served it, with
// every replica's state and prediction and no prompt text; at half
// sampling about half the requests do, with all of their attempts.
func TestDecisionLogEndToEnd(t *testing.T) {
	sims, opts := zeroLatencySims(t, 3)
	type line struct {
		RequestID    string  `json:"request_id"`
		Model        string  `json:"model"`
		Attempt      int     `json:"attempt"`
		PromptTokens int     `json:"prompt_tokens"`
		Tokenized    bool    `json:"tokenized"`
		Policy       string  `json:"policy"`
		Winner       *string `json:"winner"`
		Predicted    *int    `json:"predicted_cached_tokens"`
		Replicas     []struct {
			Replica      string `json:"replica"`
			Offered      bool   `json:"offered"`
			CachedTokens int    `json:"cached_tokens"`
		} `json:"replicas"`
	}
	secret := "the-prompt-must-not-be-logged "
	run := func(rate float64, n int) (lines []line, raw string, served map[string]string) {
		t.Helper()
		path := filepath.Join(t.TempDir(), "decisions.jsonl")
		cfg := gatewayConfig(sims, opts)
		cfg.Routing.DefaultPolicy = "cost_model"
		cfg.Observability.DecisionLog = config.DecisionLog{Path: path, SampleRate: rate}
		addr, _, stop := startGatewayStoppable(t, cfg)
		served = map[string]string{}
		for i := range n {
			body := `{"model":"sim","max_tokens":2,"prompt":"` + secret + strings.Repeat("w"+strconv.Itoa(i%4)+" ", 200) + `"}`
			req, _ := http.NewRequest("POST", "http://"+addr+"/v1/completions", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("X-Request-Id", "req-"+strconv.Itoa(i))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("request %d: %d", i, resp.StatusCode)
			}
			served["req-"+strconv.Itoa(i)] = resp.Header.Get("X-Inferrail-Replica")
		}
		stop() // the log is complete once serve returns
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(strings.NewReader(string(b)))
		for sc.Scan() {
			var l line
			if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
				t.Fatalf("%v: %s", err, sc.Text())
			}
			lines = append(lines, l)
		}
		return lines, string(b), served
	}

	lines, raw, served := run(1, 40)
	if strings.Contains(raw, "must-not-be-logged") {
		t.Fatal("the decision log holds prompt text")
	}
	if len(lines) != 40 {
		t.Fatalf("%d lines for 40 requests at full sampling", len(lines))
	}
	for _, l := range lines {
		if l.Winner == nil || *l.Winner != served[l.RequestID] || l.Attempt != 1 || l.Model != opts.Model ||
			l.Policy != "cost_model" || !l.Tokenized || l.PromptTokens < 200 || len(l.Replicas) != 3 || l.Predicted == nil {
			t.Fatalf("line %+v; the request was served by %s", l, served[l.RequestID])
		}
		for _, r := range l.Replicas {
			if r.Replica == *l.Winner && r.CachedTokens != *l.Predicted {
				t.Fatalf("line %+v: the winner's prediction differs from the decision's", l)
			}
		}
	}
	// After the first round, each of the four prompts is predicted cached
	// on the replica that served it.
	if last := lines[len(lines)-1]; *last.Predicted == 0 {
		t.Fatalf("the last request was predicted no cache: %+v", last)
	}

	lines, _, _ = run(0.5, 200)
	if len(lines) < 60 || len(lines) > 140 {
		t.Fatalf("%d of 200 requests logged at half sampling", len(lines))
	}
}

// startGatewayStoppable is startGateway with a stop that returns once
// serve has, so that what it writes on the way out can be read.
func startGatewayStoppable(t *testing.T, cfg *config.Config) (addr, admin string, stop func()) {
	t.Helper()
	return startGatewayLogging(t, cfg, io.Discard)
}

// startGatewayLogging is startGatewayStoppable with the gateway's log
// written to logs.
func startGatewayLogging(t *testing.T, cfg *config.Config, logs io.Writer) (addr, admin string, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan [2]string, 1)
	done := make(chan error, 1)
	go func() {
		done <- serve(ctx, cfg, io.Discard, logs, func(a, b string) { ready <- [2]string{a, b} })
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("serve: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	select {
	case a := <-ready:
		return a[0], a[1], stop
	case err := <-done:
		t.Fatalf("serve: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("gateway did not start")
	}
	return "", "", stop
}

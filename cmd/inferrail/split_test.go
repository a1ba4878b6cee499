package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/inferrail/inferrail/config"
	"github.com/inferrail/inferrail/model/policy"
)

// With routing.split each conversation (x-session-id) is served by one
// policy, named in x-inferrail-policy, both policies serve, the decision
// log names the arm of each decision, /admin/explain explains either arm
// on request and /metrics reports the shares.
func TestSplitEndToEnd(t *testing.T) {
	sims, opts := zeroLatencySims(t, 3)
	path := filepath.Join(t.TempDir(), "decisions.jsonl")
	cfg := gatewayConfig(sims, opts)
	cfg.Routing.Split = map[string]int{"cost_model": 75, "round_robin": 25}
	cfg.Observability.DecisionLog = config.DecisionLog{Path: path, SampleRate: 1}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	addr, admin, stop := startGatewayStoppable(t, cfg)
	split, err := policy.NewSplit(cfg.Routing.Split)
	if err != nil {
		t.Fatal(err)
	}
	post := func(url, session, id string) (*http.Response, []byte) {
		t.Helper()
		body := `{"model":"sim","max_tokens":2,"prompt":"` + strings.Repeat(session+" ", 100) + `"}`
		req, _ := http.NewRequest("POST", url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if session != "" {
			req.Header.Set("X-Session-Id", session)
		}
		if id != "" {
			req.Header.Set("X-Request-Id", id)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}

	const sessions, turns = 30, 3
	arm := map[string]string{}  // session → policy
	byID := map[string]string{} // request id → policy
	perArm := map[string]int{}  // requests per policy
	for turn := range turns {
		for s := range sessions {
			session := fmt.Sprint("conversation-", s)
			id := fmt.Sprint("req-", s, "-", turn)
			resp, b := post("http://"+addr+"/v1/completions", session, id)
			if resp.StatusCode != 200 {
				t.Fatalf("%s: %d %s", id, resp.StatusCode, b)
			}
			p := resp.Header.Get("X-Inferrail-Policy")
			if want := split.Arms()[split.Arm(policy.Key(session))].Policy; p != want {
				t.Fatalf("%s: policy %q, want %q", id, p, want)
			}
			if turn > 0 && arm[session] != p {
				t.Fatalf("%s moved from %s to %s", session, arm[session], p)
			}
			arm[session], byID[id] = p, p
			perArm[p]++
		}
	}
	t.Logf("requests per policy %v", perArm)
	if perArm["cost_model"] == 0 || perArm["round_robin"] == 0 {
		t.Fatalf("an arm served nothing: %v", perArm)
	}

	// /admin/explain explains the session's arm, or the arm named.
	var inArm = map[string]string{} // policy → a session in its arm
	for s, p := range arm {
		inArm[p] = s
	}
	explain := "http://" + admin + "/admin/explain/v1/completions"
	for p, session := range inArm {
		for _, url := range []string{explain, explain + "?policy=" + p} {
			resp, b := post(url, session, "")
			var ex explained
			if err := json.Unmarshal(b, &ex); err != nil || resp.StatusCode != 200 {
				t.Fatalf("%s: %d %v %s", url, resp.StatusCode, err, b)
			}
			if ex.Policy != p {
				t.Fatalf("%s for %s explained %s, want %s", url, session, ex.Policy, p)
			}
		}
		other := "cost_model"
		if p == other {
			other = "round_robin"
		}
		// Any arm on request, whatever the session's.
		resp, b := post(explain+"?policy="+other, session, "")
		var ex explained
		if err := json.Unmarshal(b, &ex); err != nil || resp.StatusCode != 200 || ex.Policy != other {
			t.Fatalf("?policy=%s for %s: %d %s", other, session, resp.StatusCode, b)
		}
	}
	resp, b := post(explain+"?policy=p2c", "", "")
	var oe struct {
		Error struct {
			Message string `json:"message"`
			Type    string `json:"type"`
			Code    int    `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(b, &oe); err != nil || resp.StatusCode != 400 || oe.Error.Code != 400 ||
		oe.Error.Type != "BadRequestError" || !strings.Contains(oe.Error.Message, "p2c") {
		t.Fatalf("?policy=p2c: %d %s", resp.StatusCode, b)
	}

	// The shares on the metrics page.
	mresp, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(mresp.Body)
	mresp.Body.Close()
	for p, pct := range cfg.Routing.Split {
		want := `inferrail_model_policy_percent{model="` + opts.Model + `",policy="` + p + `"} ` + strconv.Itoa(pct) + "\n"
		if !strings.Contains(string(page), want) {
			t.Fatalf("metrics lack %s", want)
		}
	}
	if !strings.Contains(string(page), `policy="round_robin"`) || !strings.Contains(string(page), `inferrail_estimated_ttft_seconds_count{model="`+opts.Model+`",policy="cost_model"}`) {
		t.Fatal("metrics lack the arms' own series")
	}

	// Each decision logged names its request's arm.
	stop()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	for sc := bufio.NewScanner(f); sc.Scan(); n++ {
		var l struct {
			RequestID string `json:"request_id"`
			Policy    string `json:"policy"`
		}
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatal(err)
		}
		if l.Policy != byID[l.RequestID] {
			t.Fatalf("%s logged as %s's, served by %s", l.RequestID, l.Policy, byID[l.RequestID])
		}
	}
	if n != sessions*turns {
		t.Fatalf("%d decisions logged, want %d", n, sessions*turns)
	}
}

// FuzzParseSplit reads arbitrary --split values: an error, or percents by
// policy name that the config then validates; never a panic.
func FuzzParseSplit(f *testing.F) {
	for _, s := range []string{"cost_model=75,round_robin=25", "a=1", "=", ",,", "x=1,x=2", "p2c=-5"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sp, err := parseSplit(s)
		if err != nil {
			return
		}
		for name := range sp {
			if name == "" {
				t.Fatalf("%q: an empty policy name", s)
			}
		}
	})
}

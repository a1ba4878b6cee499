package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/inferrail/inferrail/model/policy"
	"github.com/inferrail/inferrail/sim"
	"github.com/inferrail/inferrail/transport/requestlog"
)

// Through a gateway in front of simulators, every generation request,
// unary and streamed, on each of the four generation APIs, leaves one line
// with its prompt and output lengths, its conversation key, the replica
// that served it, the decision's and the engine's cached tokens and its
// times; prompts with a common prefix share hash ids, a new prompt gets
// new ones; and no prompt word, no token id and no session header is in
// the file.
func TestRequestLogEndToEnd(t *testing.T) {
	opts := sim.DefaultOptions()
	opts.Port, opts.Engine.Latency.Zero, opts.EnablePromptTokensDetails = 0, true, true
	sims, err := sim.StartN(2, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, s := range sims {
			s.Close()
		}
	})
	path := filepath.Join(t.TempDir(), "requests.jsonl")
	cfg := gatewayConfig(sims, opts)
	cfg.Routing.DefaultPolicy = "cost_model"
	cfg.Observability.RequestLog.Path = path
	cfg.Observability.RequestLog.BlockSize = 64
	addr, _, stop := startGatewayStoppable(t, cfg)

	type sent struct {
		replica string
		usage   struct {
			Prompt     int `json:"prompt_tokens"`
			Completion int `json:"completion_tokens"`
			// Anthropic's and the Responses API's names.
			Input  int `json:"input_tokens"`
			Output int `json:"output_tokens"`
		}
	}
	post := func(api, body, session string) sent {
		t.Helper()
		req, _ := http.NewRequest("POST", "http://"+addr+api, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if session != "" {
			req.Header.Set("X-Session-Id", session)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", api, resp.StatusCode, b)
		}
		s := sent{replica: resp.Header.Get("X-Inferrail-Replica")}
		var u struct {
			Usage json.RawMessage `json:"usage"`
		}
		if bytes.HasPrefix(b, []byte("data: ")) { // a stream: its usage chunk
			for _, l := range strings.Split(string(b), "\n") {
				if js, ok := strings.CutPrefix(l, "data: "); ok && strings.Contains(js, `"usage":{`) {
					json.Unmarshal([]byte(js), &u)
				}
			}
		} else {
			json.Unmarshal(b, &u)
		}
		json.Unmarshal(u.Usage, &s.usage)
		s.usage.Prompt += s.usage.Input
		s.usage.Completion += s.usage.Output
		return s
	}
	words := func(w string, n int) string { return strings.TrimSpace(strings.Repeat(w+" ", n)) }
	shared := words("zanzibar", 300) + " " + words("quokka", 300)
	var got []sent
	// 0, 1: a common prefix; 2: another prompt; 3: the first again.
	got = append(got, post("/v1/completions", `{"model":"sim","max_tokens":3,"prompt":"`+shared+` xylophone tail"}`, ""))
	got = append(got, post("/v1/completions", `{"model":"sim","max_tokens":3,"prompt":"`+shared+` marmalade other tail words"}`, ""))
	got = append(got, post("/v1/completions", `{"model":"sim","max_tokens":3,"prompt":"`+words("pangolin", 500)+`"}`, ""))
	got = append(got, post("/v1/completions", `{"model":"sim","max_tokens":3,"prompt":"`+shared+` xylophone tail"}`, ""))
	// 4: streamed chat in a conversation.
	got = append(got, post("/v1/chat/completions", `{"model":"sim","max_tokens":4,"stream":true,"stream_options":{"include_usage":true},`+
		`"messages":[{"role":"user","content":"`+words("narwhal", 200)+`"}]}`, "conversation-secret-7"))
	// 5: a prompt of token ids.
	ids := make([]string, 300)
	for i := range ids {
		ids[i] = strconv.Itoa(29417 + i%3*717)
	}
	got = append(got, post("/v1/completions", `{"model":"sim","max_tokens":2,"prompt":[`+strings.Join(ids, ",")+`]}`, ""))
	// 6, 7: Anthropic Messages and OpenAI Responses.
	got = append(got, post("/v1/messages", `{"model":"sim","max_tokens":2,"messages":[{"role":"user","content":"`+words("axolotl", 100)+`"}]}`, ""))
	got = append(got, post("/v1/responses", `{"model":"sim","max_output_tokens":2,"input":"`+words("capybara", 100)+`"}`, ""))
	stop()

	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"zanzibar", "quokka", "xylophone", "marmalade", "pangolin", "narwhal", "axolotl", "capybara",
		"conversation-secret", "29417", "30134", "30851"} {
		if bytes.Contains(raw, []byte(secret)) {
			t.Fatalf("the request log holds %q", secret)
		}
	}
	lines, err := requestlog.ReadLines(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) != len(got) {
		t.Fatalf("%d lines for %d requests:\n%s", len(lines), len(got), raw)
	}
	// Every hash id is a small number of this file: never a token id, and
	// numbered in order of first appearance.
	next := int64(0)
	for i, l := range lines {
		s := got[i]
		if l.Model != opts.Model || l.Adapter != "" || l.Policy != "cost_model" || l.Replica != s.replica || l.Status != 200 ||
			l.BlockSize == nil || *l.BlockSize != 64 || l.Predicted == nil || l.Cached == nil || l.TTFT == nil || l.E2E == nil || *l.E2E < *l.TTFT ||
			l.OutputLength != s.usage.Completion || l.OutputLength == 0 {
			t.Errorf("line %d %+v; the response: %+v", i, l, s)
		}
		if l.InputLength != s.usage.Prompt {
			t.Errorf("line %d: input_length %d, the engine counted %d", i, l.InputLength, s.usage.Prompt)
		}
		if want := (l.InputLength + 63) / 64; len(l.HashIDs) != want {
			t.Errorf("line %d: %d ids for %d tokens", i, len(l.HashIDs), l.InputLength)
		}
		for _, id := range l.HashIDs {
			if id > next {
				t.Fatalf("line %d: id %d before %d: %v", i, id, next, l.HashIDs)
			}
			if id == next {
				next++
			}
		}
	}
	a, b, c, again := lines[0].HashIDs, lines[1].HashIDs, lines[2].HashIDs, lines[3].HashIDs
	common := 0
	for common < min(len(a), len(b)) && a[common] == b[common] {
		common++
	}
	// 600 shared words are at least 600 tokens: 9 whole blocks of 64.
	if common < 9 || common == len(a) || fmt.Sprint(a) != fmt.Sprint(again) || c[0] <= max(slicesMax(a), slicesMax(b)) {
		t.Fatalf("ids %v, %v share %d; %v fresh?; %v again", a, b, common, c, again)
	}
	if want := fmt.Sprintf("%016x", max(policy.Key("conversation-secret-7"), 1)); lines[4].Session == nil || *lines[4].Session != want ||
		lines[0].Session == nil || *lines[0].Session != "" {
		t.Fatalf("sessions %v and %v, want %q and none", lines[4].Session, lines[0].Session, want)
	}
	if !regexp.MustCompile(`^\{"timestamp":0,"input_length":\d+,"output_length":3,"hash_ids":\[0,1,`).Match(raw) {
		t.Fatalf("the file does not start as a Mooncake trace: %.120s", raw)
	}
}

func slicesMax(s []int64) int64 {
	m := int64(-1)
	for _, v := range s {
		m = max(m, v)
	}
	return m
}

// A request log the gateway cannot write stops it at start, and fails
// inferrail check, naming the key.
func TestRequestLogUnwritable(t *testing.T) {
	sims, opts := zeroLatencySims(t, 1)
	cfg := gatewayConfig(sims, opts)
	cfg.Observability.RequestLog.Path = filepath.Join(t.TempDir(), "missing", "requests.jsonl")
	err := serve(t.Context(), cfg, io.Discard, io.Discard, nil)
	if err == nil || !strings.Contains(err.Error(), "observability.request_log.path") {
		t.Fatalf("serve: %v", err)
	}

	dir := t.TempDir()
	file := filepath.Join(dir, "inferrail.yaml")
	os.WriteFile(file, []byte("models: [{name: m}]\nreplicas: [{id: r, url: \"http://127.0.0.1:1\", models: [m]}]\n"+
		"observability: {request_log: {path: "+filepath.Join(dir, "missing", "r.jsonl")+"}}\n"), 0o644)
	var out, errOut bytes.Buffer
	if code := run([]string{"check", "--config", file}, &out, &errOut); code == 0 ||
		!strings.Contains(errOut.String(), "observability.request_log.path") {
		t.Fatalf("check: exit %d, %s%s", code, out.String(), errOut.String())
	}
}

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// check says which tokenizers load, and a tokenizer that does not load
// does not fail the config: its model routes without predictions.
func TestCheckReportsTokenizers(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "gw.yaml")
	cfg := `models:
  - name: inferrail/sim-8b
    tokenizer: builtin:sim
  - name: broken
    tokenizer: ` + filepath.Join(dir, "no-such-model") + `
  - name: plain
replicas:
  - {id: a, url: "http://127.0.0.1:8001", models: [inferrail/sim-8b, broken, plain]}
`
	got := checkConfig(t, path, cfg)
	for _, want := range []string{
		"gw.yaml: ok",
		"model inferrail/sim-8b: tokenizer loaded (builtin:sim",
		"model broken: ",
		"model plain: no tokenizer configured",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("check output lacks %q:\n%s", want, got)
		}
	}
	if line := lineWith(got, "model broken: "); !strings.Contains(line, "no-such-model") {
		t.Errorf("the broken tokenizer's line does not say what failed: %q", line)
	}
	t.Logf("\n%s", got)
}

// checkConfig writes cfg to path and returns what check prints for it.
func checkConfig(t *testing.T, path, cfg string) string {
	t.Helper()
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if err := runCheck(t.Context(), []string{"--config", path}, &out, &errb); err != nil {
		t.Fatalf("check: %v\n%s", err, errb.String())
	}
	return out.String()
}

func lineWith(s, sub string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return ""
}

// check --url against the simulator: its own tokenizer (builtin:sim)
// agrees on every prompt; a real model's tokenizer under the same name
// disagrees and fails the check with both counts; a model the engine does
// not serve is skipped.
func TestCheckURL(t *testing.T) {
	sims, opts := zeroLatencySims(t, 1)
	dir := t.TempDir()
	write := func(name, tokenizer string) string {
		path := filepath.Join(dir, name)
		cfg := "models:\n  - name: " + opts.Model + "\n    tokenizer: " + tokenizer + "\n  - name: elsewhere\n    tokenizer: builtin:sim\n" +
			"replicas:\n  - {id: a, url: \"" + sims[0].URL() + "\", models: [" + opts.Model + ", elsewhere]}\n"
		if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	var out, errb bytes.Buffer
	err := runCheck(t.Context(), []string{"--config", write("sim.yaml", "builtin:sim"), "--url", sims[0].URL()}, &out, &errb)
	if err != nil {
		t.Fatalf("builtin:sim against the simulator: %v\n%s%s", err, out.String(), errb.String())
	}
	for _, want := range []string{"model " + opts.Model + ": agrees with the engine on 6 of 6 prompts", "model elsewhere: not served by the engine"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	t.Logf("\n%s", out.String())

	out.Reset()
	errb.Reset()
	if code := run([]string{"check", "--config", write("qwen.yaml", "../../model/token/hf/testdata/qwen3"), "--url", sims[0].URL()}, &out, &errb); code != 1 {
		t.Errorf("check exits %d on a disagreement, want 1", code)
	}
	if !strings.Contains(errb.String(), errTokenizerCheck.Error()) {
		t.Errorf("stderr %q", errb.String())
	}
	line := lineWith(out.String(), "DISAGREES")
	if !strings.HasPrefix(strings.TrimSpace(line), "model "+opts.Model+": DISAGREES with the engine") ||
		!strings.Contains(line, "engine ") || !strings.Contains(line, "gateway ") {
		t.Errorf("the disagreement does not give both counts: %q", line)
	}
	t.Logf("\n%s", out.String())
}

// check --kv-events-config: issue 17's first try, an engine and a gateway
// both given tcp://127.0.0.1:PORT, both connect and check says so; the
// engine binding tcp://*:PORT meets it; an SGLang engine on 0.0.0.0 binds
// (vLLM's would connect); a DNS group's port and replay port are compared;
// without the engines' config only an ipc stream the gateway binds is
// flagged. Warnings do not fail the check.
func TestCheckEventEndpoints(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "gw.yaml")
	cfg := `models: [{name: m}]
replicas:
  - {id: a, url: "http://127.0.0.1:8001", models: [m], kv_events: "tcp://127.0.0.1:5557"}
  - {id: b, url: "http://127.0.0.1:8002", models: [m], kv_events: "tcp://10.0.0.2:5557", engine_type: sglang}
  - {id: c, url: "http://127.0.0.1:8003", models: [m], kv_events: "ipc:///tmp/kv-c", kv_events_bind: true}
discovery:
  dns:
    - {name: pool, url: "http://pool.svc:8000", models: [m], kv_events_port: 5557, kv_events_replay_port: 5558}
`
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) string {
		t.Helper()
		var out, errb bytes.Buffer
		if err := runCheck(t.Context(), append([]string{"--config", path}, args...), &out, &errb); err != nil {
			t.Fatalf("check %v: %v\n%s", args, err, errb.String())
		}
		return out.String()
	}
	got := run()
	if !strings.Contains(lineWith(got, "replica c:"), "both sides bind") || strings.Contains(got, "replica a:") {
		t.Errorf("without the engines' config:\n%s", got)
	}
	got = run("--kv-events-config", `{"enable_kv_cache_events": true, "endpoint": "tcp://127.0.0.1:5557", "replay_endpoint": "tcp://*:5559"}`,
		"--kv-events-config", `b={"publisher": "zmq", "endpoint": "tcp://0.0.0.0:5557"}`)
	for who, want := range map[string]string{
		"replica a:":           "both sides connect",
		"replica b:":           "can meet",
		"discovery.dns pool:":  "both sides connect",
		"replay: the engine l": "port 5559",
	} {
		if !strings.Contains(lineWith(got, who), want) {
			t.Errorf("%s: want %q:\n%s", who, want, got)
		}
	}
	got = run("--kv-events-config", `{"enable_kv_cache_events": true, "endpoint": "tcp://*:5557", "replay_endpoint": "tcp://*:5558"}`,
		"--kv-events-config", `b={"publisher": "zmq"}`)
	if !strings.Contains(lineWith(got, "discovery.dns pool:"), "can meet") || !strings.Contains(lineWith(got, "replica a:"), "can meet") {
		t.Errorf("an engine that binds:\n%s", got)
	}
	// b is SGLang: vLLM's enable_kv_cache_events is not its key.
	var out, errb bytes.Buffer
	err := runCheck(t.Context(), []string{"--config", path, "--kv-events-config", `b={"enable_kv_cache_events": true}`}, &out, &errb)
	if err == nil || !strings.Contains(err.Error(), "enable_kv_cache_events: unknown key") {
		t.Errorf("SGLang's config with vLLM's key: %v", err)
	}
	t.Logf("\n%s", got)
}

// check warns about a model whose replicas follow KV events but which has
// no tokenizer: its text prompts never query the index (issue 32, case 1).
// A model with one, or without events, is not warned about.
func TestCheckEventsWithoutTokenizer(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "gw.yaml")
	cfg := `models:
  - {name: blind}
  - {name: seeing, tokenizer: "builtin:sim"}
  - {name: quiet}
replicas:
  - {id: a, url: "http://127.0.0.1:8001", models: [blind], kv_events: "tcp://127.0.0.1:5557"}
  - {id: b, url: "http://127.0.0.1:8002", models: [seeing], kv_events: "tcp://127.0.0.1:5558"}
  - {id: c, url: "http://127.0.0.1:8003", models: [quiet]}
`
	got := checkConfig(t, path, cfg)
	line := lineWith(got, "model blind: KV events: WARNING")
	if !strings.Contains(line, "replica a follow") || !strings.Contains(line, "models[].tokenizer") ||
		!strings.Contains(line, "kv_events_no_tokenizer") {
		t.Errorf("no warning for the model without a tokenizer:\n%s", got)
	}
	if strings.Contains(got, "model seeing: KV events") || strings.Contains(got, "model quiet: KV events") {
		t.Errorf("warned about a model with a tokenizer or without events:\n%s", got)
	}
}

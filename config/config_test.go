package config

import (
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// base is the smallest valid config; tests add sections to it.
const base = `
models:
  - name: m
replicas:
  - id: r0
    url: http://127.0.0.1:8001
    models: [m]
`

// keys returns the key of every *KeyError in err, in order, and fails the
// test on an error that is not one.
func keys(t *testing.T, err error) []string {
	t.Helper()
	var out []string
	for _, e := range unjoin(err) {
		var ke *KeyError
		if !errors.As(e, &ke) {
			t.Fatalf("not a *KeyError: %v", e)
		}
		out = append(out, ke.Key)
	}
	return out
}

func mustParse(t *testing.T, doc string, env ...string) *Config {
	t.Helper()
	c, err := Parse([]byte(doc), env)
	if err != nil {
		t.Fatalf("Parse: %v\ndoc:\n%s", err, doc)
	}
	return c
}

// withDefaults returns the defaults plus base's model and replica.
func withDefaults() *Config {
	c := Default()
	m := defaultModel()
	m.Name = "m"
	r := defaultReplica()
	r.ID, r.URL, r.Models = "r0", "http://127.0.0.1:8001", []string{"m"}
	c.Models, c.Replicas = []Model{m}, []Replica{r}
	return c
}

func TestDefaults(t *testing.T) {
	got := mustParse(t, base)
	if want := withDefaults(); !reflect.DeepEqual(got, want) {
		t.Errorf("base config:\n got %+v\nwant %+v", got, want)
	}
	// The reference's stated defaults.
	d := Default()
	for _, c := range []struct {
		name      string
		got, want any
	}{
		{"server.listen", d.Server.Listen, "127.0.0.1:8080"},
		{"server.admin_listen", d.Server.AdminListen, "127.0.0.1:9090"},
		{"server.reload_interval", d.Server.ReloadInterval, 2 * time.Second},
		{"health.max_ejection_percent", d.Health.MaxEjectionPercent, 50},
		{"load.scrape_interval", d.Load.ScrapeInterval, 100 * time.Millisecond},
		{"load.max_age", d.Load.MaxAge, 250 * time.Millisecond},
		{"routing.epsilon", d.Routing.Epsilon, 1.0},
		{"routing.kappa", d.Routing.Kappa, 0.92},
		{"routing.short_prompt_tokens", d.Routing.ShortPromptTokens, 256},
		{"routing.recompute_weight", d.Routing.RecomputeWeight, 2.0},
		{"routing.slo_admission", d.Routing.SLOAdmission, true},
		{"routing.slo_admission_wait_factor", d.Routing.SLOAdmissionWaitFactor, 3.0},
		{"routing.estimate_deadline", d.Routing.EstimateDeadline, 2 * time.Millisecond},
		{"routing.cost_model.prefill_token_secs", d.Routing.CostModel.PrefillTokenSecs, 0.0001},
		{"routing.cost_model.prefill_pair_secs", d.Routing.CostModel.PrefillPairSecs, 3.3e-9},
		{"routing.cost_model.prefill_fixed_secs", d.Routing.CostModel.PrefillFixedSecs, 0.005},
		{"routing.cost_model.decode_token_secs", d.Routing.CostModel.DecodeTokenSecs, 0.02},
		{"models[].block_size", defaultModel().BlockSize, 16},
		{"flow_control", d.FlowControl, FlowControl{MaxQueued: 1024, MaxWait: 5 * time.Second,
			Fairness: "global-strict-fairness-policy", Ordering: "fcfs-ordering-policy",
			SaturationDetector: SaturationDetector{Type: "utilization-detector", QueueDepthThreshold: 5,
				KVCacheUtilThreshold: 0.8, MetricsStalenessThreshold: 200 * time.Millisecond, MaxConcurrency: 100}}},
	} {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
}

// TestExampleIsDefaults checks that deploy/inferrail.example.yaml sets every
// key to its default: parsed, it equals Default() with its list entries, and
// it mentions every key of the schema.
func TestExampleIsDefaults(t *testing.T) {
	const path = "../deploy/inferrail.example.yaml"
	got, err := Load(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := Default()
	m := defaultModel()
	m.Name, m.Aliases = "meta-llama/Llama-3.1-8B-Instruct", []string{"llama-8b"}
	want.Models = []Model{m}
	r := defaultReplica()
	r.ID, r.URL, r.Models = "gpu-0", "http://10.0.0.10:8000", []string{m.Name}
	want.Replicas = []Replica{r}
	g := defaultDNSGroup()
	g.Name, g.URL, g.Models = "llama-pool", "http://vllm.inference.svc.cluster.local:8000", []string{m.Name}
	want.Discovery.DNS = []DNSGroup{g}
	if !reflect.DeepEqual(got, want) {
		a, _ := got.YAML()
		b, _ := want.YAML()
		t.Errorf("example differs from the defaults:\n got:\n%s\nwant:\n%s", a, b)
	}

	// Every key is written out, so the example documents it: a key of the
	// schema missing from the file (or only in a comment) fails here.
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := parseYAML(raw)
	if err != nil {
		t.Fatal(err)
	}
	var missing []string
	var walk func(path string, v any, typ reflect.Type)
	walk = func(path string, v any, typ reflect.Type) {
		typ = deref(typ)
		switch {
		case typ == durationType || typ.Kind() != reflect.Struct && typ.Kind() != reflect.Slice:
			return
		case typ.Kind() == reflect.Slice:
			if l, ok := v.([]any); ok && len(l) > 0 && typ.Elem().Kind() == reflect.Struct {
				walk(path+"[0]", l[0], typ.Elem())
			}
			return
		}
		m, _ := v.(map[string]any)
		for name, f := range fieldsOf(typ) {
			if optional := typ == modelType && (name == "policy" || name == "scheduler" || name == "split" || name == "shadow" || name == "cost_model"); optional {
				continue // inherited from routing; shown in comments
			}
			x, ok := m[name]
			if !ok {
				missing = append(missing, keyPath(path, name))
				continue
			}
			walk(keyPath(path, name), x, f.Type)
		}
	}
	walk("", doc, configType)
	slices.Sort(missing)
	if len(missing) > 0 {
		t.Errorf("example does not set %s", strings.Join(missing, ", "))
	}
}

func TestKVEvents(t *testing.T) {
	c := mustParse(t, `
models: [{name: m}]
replicas:
  - {id: a, url: "http://a", models: [m], kv_events: "tcp://10.0.0.10:5557", kv_events_replay: "tcp://10.0.0.10:5558"}
  - {id: b, url: "http://b", models: [m], kv_events: "tcp://*:5600", kv_events_bind: true}
  - {id: c, url: "http://c", models: [m], kv_events: "ipc:///tmp/kv.sock"}
  - {id: d, url: "http://d", models: [m]}
`)
	got := make([][3]any, len(c.Replicas))
	for i, r := range c.Replicas {
		got[i] = [3]any{r.KVEvents, r.KVEventsReplay, r.KVEventsBind}
	}
	want := [][3]any{
		{"tcp://10.0.0.10:5557", "tcp://10.0.0.10:5558", false},
		{"tcp://*:5600", "", true},
		{"ipc:///tmp/kv.sock", "", false},
		{"", "", false},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("kv_events, kv_events_replay, kv_events_bind = %v, want %v", got, want)
	}
}

// engine_type is vllm unless set, takes vllm or sglang, and kv_events'
// durations are checked: every problem at once, each naming its key.
func TestEngineType(t *testing.T) {
	c := mustParse(t, `
models: [{name: m}]
replicas:
  - {id: a, url: "http://a", models: [m]}
  - {id: b, url: "http://b", models: [m], engine_type: sglang}
discovery: {dns: [{name: g, url: "http://g", models: [m], engine_type: sglang}]}
`)
	if c.Replicas[0].EngineType != "vllm" || c.Replicas[1].EngineType != "sglang" || c.Discovery.DNS[0].EngineType != "sglang" {
		t.Errorf("engine_type: %q, %q, %q", c.Replicas[0].EngineType, c.Replicas[1].EngineType, c.Discovery.DNS[0].EngineType)
	}
	if c.KVEvents.SpeculativeTTL != 2*time.Second || c.KVEvents.MaxSilence != 2*time.Second {
		t.Errorf("kv_events defaults %+v", c.KVEvents)
	}
	_, err := Parse([]byte(`
models: [{name: m}]
replicas: [{id: a, url: "http://a", models: [m], engine_type: trt}]
discovery: {dns: [{name: g, url: "http://g", models: [m], engine_type: VLLM}]}
kv_events: {speculative_ttl: -1s, max_silence: 0s}
`), nil)
	got := keys(t, err)
	want := []string{"discovery.dns[0].engine_type", "kv_events.max_silence", "kv_events.speculative_ttl", "replicas[0].engine_type"}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("keys %v, want %v (%v)", got, want, err)
	}
}

func TestLocalFleet(t *testing.T) {
	c, err := Load("../deploy/local.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	m, ok := c.Model("sim")
	if !ok || m.Name != "inferrail/sim-8b" || m.Tokenizer != "builtin:sim" {
		t.Fatalf(`Model("sim") = %+v, %v`, m, ok)
	}
	var urls []string
	for _, r := range c.Replicas {
		if !slices.Equal(r.Models, []string{"inferrail/sim-8b"}) {
			t.Errorf("replica %s serves %v", r.ID, r.Models)
		}
		urls = append(urls, r.URL)
	}
	want := []string{"http://127.0.0.1:8001", "http://127.0.0.1:8002", "http://127.0.0.1:8003"}
	if !slices.Equal(urls, want) {
		t.Errorf("urls = %v, want %v", urls, want)
	}
	if c.Server.Listen != "127.0.0.1:8080" || c.Server.ReloadInterval != 2*time.Second {
		t.Errorf("server = %+v", c.Server)
	}
}

// full sets every key to something other than its default, with values
// that are easy to get wrong when written out and read back.
const full = `
server:
  listen: ":0"
  admin_listen: "[::1]:0"
  request_timeout: 1h30m
  header_read_timeout: 1.5s
  shutdown_timeout: 1ns
  reload_interval: 0s
  max_body_bytes: 9223372036854775807
upstream: {dial_timeout: 3s}
models:
  - name: "true"
    aliases: ["null", "0x10", "~", "1e3", "- x", "ü: é", "yes"]
    policy: cost_model
    split: {kv_aware: 1, cost_model: 99}
    shadow: []
    cost_model: {prefill_pair_secs: 1.0e-12}
    tokenizer: builtin:sim
    chat_template: |
      {% for m in messages %}{{ m.content }}
      {% endfor %}
    chat_template_content_format: openai
    chat_template_kwargs:
      enable_thinking: false
      n: 1.0
      i: 2
      big: 18446744073709551615
      s: "1"
      nothing: null
      list: [1, "two", [3.5], {four: 4}]
      date: 2024-01-01
    block_size: 32
  - name: second
    shadow: [p2c, random]
replicas:
  - id: a-1.b_2
    url: https://host.example:8443/prefix/v1
    models: ["true", second]
    max_concurrency: 7
    max_pending: 7
    kv_capacity_blocks: 100
    engine_type: sglang
discovery:
  dns:
    - name: pool
      url: http://pool.local
      models: [second]
      refresh: 250ms
      max_concurrency: 3
      max_pending: 1
      kv_capacity_blocks: 5
      engine_type: sglang
routing:
  default_policy: p2c
  split: {round_robin: 50, random: 50}
  shadow: [least_request, prefix_hash, kv_aware]
  seed: 18446744073709551615
  estimate_deadline: 500us
  epsilon: 0
  kappa: 1
  short_prompt_tokens: 0
  session_affinity: true
  cost_model:
    prefill_token_secs: 0.00012
    prefill_pair_secs: 0.0000000041
    prefill_fixed_secs: 0
    decode_interference_secs: 1e-3
    decode_token_secs: 0.03
  prefix_hash: {blocks: 1}
  kv_aware: {cache_weight: 0, load_weight: 2.5}
  hot_prefix: {enabled: false, blocks: 2, window: 1m, utilization: 1}
health:
  interval: 2s
  timeout: 2s
  unhealthy_threshold: 1
  ejection_backoff: 1s
  max_ejection_backoff: 1s
  max_ejection_percent: 0
retry: {max_attempts: 1, backoff: 0s}
flow_control: {enabled: true, max_queued: 8, max_wait: 250ms, fairness: round-robin-fairness-policy}
load: {scrape_interval: 1s, scrape_timeout: 5s, max_age: 1001ms}
tokenizer: {workers: 8, max_wait: 1ms, cache_tokens: 0}
index: {default_capacity_blocks: 1}
kv_events: {speculative_ttl: 0s, max_silence: 1ms}
observability:
  otlp_endpoint: http://collector:4318
  trace_sample_ratio: 0
  decision_log: {path: /tmp/d.jsonl, sample_rate: 1}
  shadow_log: /tmp/s.jsonl
logging: {level: debug, format: json, log_prompts: true}
`

func TestRoundTrip(t *testing.T) {
	// JSON writes 1.0 as 1, which reads back as an integer: keep integral
	// floats out of the free-form values for the JSON case.
	fullJSON := strings.Replace(full, "n: 1.0", "n: 1.25", 1)
	for name, doc := range map[string]string{"base": base, "full": full, "full for JSON": fullJSON, "auth": authDoc} {
		t.Run(name, func(t *testing.T) {
			c := mustParse(t, doc)
			y, err := c.YAML()
			if err != nil {
				t.Fatal(err)
			}
			if back := mustParse(t, string(y)); !reflect.DeepEqual(back, c) {
				t.Errorf("YAML round trip differs:\n%s", y)
			}
			m, err := c.Map()
			if err != nil {
				t.Fatal(err)
			}
			j, err := json.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			if back := mustParse(t, string(j)); !reflect.DeepEqual(back, c) && doc != full {
				t.Errorf("JSON round trip differs:\n%s", j)
			}
			if d := Diff(c, mustParse(t, string(y))); len(d) > 0 {
				t.Errorf("Diff after round trip = %v", d)
			}
		})
	}
}

func TestFullValues(t *testing.T) {
	c := mustParse(t, full)
	m := c.Models[0]
	if m.Shadow == nil || len(m.Shadow) != 0 {
		t.Errorf("models[0].shadow = %#v, want an empty list", m.Shadow)
	}
	if c.Models[1].Shadow == nil {
		t.Errorf("models[1].shadow lost")
	}
	// A model's cost_model takes the keys it leaves out from routing.
	want := CostModel{PrefillTokenSecs: 0.00012, PrefillPairSecs: 1e-12, PrefillFixedSecs: 0, DecodeInterferenceSecs: 1e-3, DecodeTokenSecs: 0.03}
	if *m.CostModel != want {
		t.Errorf("models[0].cost_model = %+v, want %+v", *m.CostModel, want)
	}
	kw := m.ChatTemplateKwargs
	if kw["enable_thinking"] != false || kw["n"] != 1.0 || kw["i"] != 2 || kw["s"] != "1" ||
		kw["big"] != uint64(18446744073709551615) || kw["date"] != "2024-01-01" {
		t.Errorf("kwargs = %#v", kw)
	}
	if v, ok := kw["nothing"]; !ok || v != nil {
		t.Errorf("kwargs.nothing = %#v, %v; want a null kept", v, ok)
	}
	if c.Server.RequestTimeout != 90*time.Minute || c.Routing.EstimateDeadline != 500*time.Microsecond {
		t.Errorf("durations: %v %v", c.Server.RequestTimeout, c.Routing.EstimateDeadline)
	}
	if c.Routing.Seed != 18446744073709551615 || c.Server.MaxBodyBytes != 9223372036854775807 {
		t.Errorf("large integers: %d %d", c.Routing.Seed, c.Server.MaxBodyBytes)
	}
}

func TestRoutingFor(t *testing.T) {
	c := mustParse(t, `
models:
  - name: plain
  - name: own-policy
    policy: kv_aware
  - name: own-split
    policy: random
    split: {p2c: 30, cost_model: 70}
    shadow: []
    cost_model: {prefill_fixed_secs: 1}
replicas:
  - {id: r, url: "http://h:1", models: [plain, own-policy, own-split]}
routing:
  default_policy: round_robin
  shadow: [least_request]
`)
	r := c.RoutingFor(&c.Models[0])
	if !reflect.DeepEqual(r.Split, map[string]int{"round_robin": 100}) || !slices.Equal(r.Shadow, []string{"least_request"}) || r.CostModel != c.Routing.CostModel {
		t.Errorf("plain: %+v", r)
	}
	if r := c.RoutingFor(&c.Models[1]); !reflect.DeepEqual(r.Split, map[string]int{"kv_aware": 100}) {
		t.Errorf("own-policy: %+v", r)
	}
	r = c.RoutingFor(&c.Models[2])
	if !reflect.DeepEqual(r.Split, map[string]int{"p2c": 30, "cost_model": 70}) || len(r.Shadow) != 0 || r.CostModel.PrefillFixedSecs != 1 ||
		r.CostModel.PrefillTokenSecs != c.Routing.CostModel.PrefillTokenSecs {
		t.Errorf("own-split: %+v", r)
	}
	// A routing split applies to models without their own policy.
	c = mustParse(t, base+"routing: {split: {kv_aware: 10, cost_model: 90}}\n")
	if r := c.RoutingFor(&c.Models[0]); !reflect.DeepEqual(r.Split, map[string]int{"kv_aware": 10, "cost_model": 90}) {
		t.Errorf("routing split: %+v", r)
	}
}

func TestModelLookup(t *testing.T) {
	c := mustParse(t, `
models:
  - {name: a, aliases: [x]}
  - {name: b, aliases: [y, z]}
replicas: [{id: r, url: "http://h", models: [a, b]}]
`)
	for name, want := range map[string]string{"a": "a", "x": "a", "b": "b", "z": "b"} {
		if m, ok := c.Model(name); !ok || m.Name != want {
			t.Errorf("Model(%q) = %v, %v; want %s", name, m, ok, want)
		}
	}
	if m, ok := c.Model("nope"); ok {
		t.Errorf("Model(nope) = %v", m)
	}
}

func TestDiff(t *testing.T) {
	old := mustParse(t, base)
	f := func(doc string, env []string, diff, restart []string) {
		t.Helper()
		next := mustParse(t, doc, env...)
		if got := Diff(old, next); !slices.Equal(got, diff) {
			t.Errorf("Diff = %v, want %v", got, diff)
		}
		if got := RestartOnly(old, next); !slices.Equal(got, restart) {
			t.Errorf("RestartOnly = %v, want %v", got, restart)
		}
	}
	f(base, nil, nil, nil)
	f(base, []string{"INFERRAIL_ROUTING__DEFAULT_POLICY=p2c", "INFERRAIL_RETRY__MAX_ATTEMPTS=2"}, []string{"routing", "retry"}, nil)
	f(base, []string{"INFERRAIL_LOGGING__LOG_PROMPTS=true"}, []string{"logging"}, nil)
	f(base, []string{"INFERRAIL_LOGGING__LEVEL=debug"}, []string{"logging"}, []string{"logging.level"})
	f(base, []string{"INFERRAIL_SERVER__LISTEN=:1", "INFERRAIL_INDEX__DEFAULT_CAPACITY_BLOCKS=1"},
		[]string{"server", "index"}, []string{"server", "index"})
	// Live model fields.
	f(`
models: [{name: m, aliases: [x], policy: p2c, shadow: [random], cost_model: {prefill_fixed_secs: 1}}]
replicas: [{id: r1, url: "http://h", models: [m]}, {id: r2, url: "http://h", models: [m]}]
`, nil, []string{"models", "replicas"}, nil)
	// Restart-only model fields, and the model list.
	f(`
models: [{name: m, tokenizer: builtin:sim, block_size: 8}]
replicas: [{id: r0, url: "http://127.0.0.1:8001", models: [m]}]
`, nil, []string{"models"}, []string{"models[0].tokenizer", "models[0].block_size"})
	f(`
models: [{name: m}, {name: n}]
replicas: [{id: r0, url: "http://127.0.0.1:8001", models: [m]}]
`, nil, []string{"models"}, []string{"models"})

	if got := Diff(nil, old); len(got) != reflect.TypeOf(Config{}).NumField() {
		t.Errorf("Diff(nil, c) = %v, want every section", got)
	}
	if got := RestartOnly(nil, old); got != nil {
		t.Errorf("RestartOnly(nil, c) = %v", got)
	}
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := Load(dir+"/missing.yaml", nil); err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	big := dir + "/big.yaml"
	if err := os.WriteFile(big, []byte("# "+strings.Repeat("x", MaxBytes)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(big, nil); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("big file: %v", err)
	}
	bad := dir + "/bad.yaml"
	if err := os.WriteFile(bad, []byte("models: []\nreplicas: []\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Load(bad, nil)
	if err == nil || !strings.HasPrefix(err.Error(), "config "+bad+": 2 problems:\nmodels: ") {
		t.Errorf("invalid file: %v", err)
	}
	if got := keys(t, errors.Unwrap(err)); !slices.Equal(got, []string{"models", "replicas"}) {
		t.Errorf("keys = %v", got)
	}
	good := dir + "/good.yaml"
	if err := os.WriteFile(good, []byte(base), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(good, []string{"INFERRAIL_SERVER__LISTEN=:9999"})
	if err != nil || c.Server.Listen != ":9999" {
		t.Errorf("Load with env = %v, %v", c, err)
	}
}

package config

import (
	"errors"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseValid(t *testing.T) {
	for _, c := range []struct {
		name  string
		doc   string
		check func(*Config) bool
	}{
		{"reference example", referenceExample, func(c *Config) bool {
			return c.Routing.Split["cost_model"] == 90 && c.Models[0].ChatTemplateKwargs["enable_thinking"] == false &&
				c.Replicas[0].KVCapacityBlocks == 18000 && c.Discovery.DNS[0].Refresh == 2*time.Second &&
				c.Observability.DecisionLog.SampleRate == 0.01 && c.Routing.CostModel.PrefillPairSecs == 0.0000000033
		}},
		{"dns group only", `
models: [{name: m}]
discovery: {dns: [{name: g, url: "http://svc:8000", models: [m]}]}
`, func(c *Config) bool {
			return c.Discovery.DNS[0].Refresh == 5*time.Second && c.Discovery.DNS[0].MaxConcurrency == 1024
		}},
		{"kubernetes pool only", "models: [{name: m}]\ndiscovery: {kubernetes: {pool_name: vllm-llama}}\n", func(c *Config) bool {
			k := c.Discovery.Kubernetes
			return k.On() && k.Scheme == "http" && k.MaxConcurrency == 1024 && k.EngineType == "vllm" && len(k.Models) == 0
		}},
		{"kubernetes selector only", "models: [{name: m}]\ndiscovery: {kubernetes: {endpoint_selector: {llm-d.ai/role: decode}, target_ports: [8000, 8001]}}\n",
			func(c *Config) bool {
				return c.Discovery.Kubernetes.On() && len(c.Discovery.Kubernetes.TargetPorts) == 2
			}},
		{"endpoint file only", "models: [{name: m}]\ndiscovery: {file: {path: /etc/eps.yaml, models: [m]}}\n", func(c *Config) bool {
			return c.Discovery.File.Watch && c.Discovery.File.Path == "/etc/eps.yaml"
		}},
		{"empty values keep defaults", base + "server:\nhealth: ~\nrouting: {cost_model: }\n", func(c *Config) bool {
			return c.Server.Listen == "127.0.0.1:8080" && c.Health.Interval == time.Second
		}},
		{"sections merge with defaults", base + "server: {listen: ':80'}\n", func(c *Config) bool {
			return c.Server.Listen == ":80" && c.Server.AdminListen == "127.0.0.1:9090"
		}},
		{"JSON", `{"models": [{"name": "m"}], "replicas": [{"id": "r", "url": "http://h", "models": ["m"]}]}`, func(c *Config) bool {
			return c.Replicas[0].ID == "r"
		}},
		{"ipv6 and ports", `
server: {listen: "[::]:8080", admin_listen: "localhost:0"}
models: [{name: m}]
replicas: [{id: r, url: "http://[fe80::1]:8000", models: [m]}]
observability: {otlp_endpoint: "https://collector.example/v1/traces"}
`, nil},
		{"split of one policy", base + "routing: {split: {kv_aware: 100}}\n", nil},
		{"zero-valued bare duration", base + "server: {reload_interval: 0}\n", func(c *Config) bool { return c.Server.ReloadInterval == 0 }},
		{"integral float for an integer", base + "retry: {max_attempts: 3.0}\n", func(c *Config) bool { return c.Retry.MaxAttempts == 3 }},
		{"integer for a float", base + "routing: {epsilon: 2}\n", func(c *Config) bool { return c.Routing.Epsilon == 2 }},
		{"model slo", "models: [{name: m, slo: {ttft: 2s, tpot: 50ms}}]\nreplicas: [{id: r, url: \"http://h\", models: [m]}]\n", func(c *Config) bool {
			return c.Models[0].SLO == SLO{TTFT: 2 * time.Second, TPOT: 50 * time.Millisecond}
		}},
		{"comments only", "# nothing\n" + base, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := mustParse(t, c.doc)
			if c.check != nil && !c.check(cfg) {
				y, _ := cfg.YAML()
				t.Errorf("unexpected config:\n%s", y)
			}
		})
	}
}

// referenceExample is the configuration example of the reference.
const referenceExample = `
server:
  reload_interval: 2s
models:
  - name: meta-llama/Llama-3.1-8B-Instruct
    aliases: [llama-8b]
    policy: least_request
    tokenizer: /models/Llama-3.1-8B-Instruct
    chat_template_kwargs:
      enable_thinking: false
replicas:
  - id: gpu-0
    url: http://10.0.0.10:8000
    models: [meta-llama/Llama-3.1-8B-Instruct]
    max_concurrency: 256
    max_pending: 32
    kv_capacity_blocks: 18000
discovery:
  dns:
    - name: llama-pool
      url: http://vllm.inference.svc.cluster.local:8000
      models: [meta-llama/Llama-3.1-8B-Instruct]
      refresh: 2s
routing:
  default_policy: cost_model
  split: {cost_model: 90, kv_aware: 10}
  shadow: [least_request]
  epsilon: 1.0
  kappa: 0.92
  session_affinity: true
  seed: 42
  cost_model:
    prefill_token_secs: 0.0001
    prefill_pair_secs: 0.0000000033
    prefill_fixed_secs: 0.005
health:
  interval: 1s
  timeout: 500ms
  unhealthy_threshold: 3
  ejection_backoff: 5s
retry:
  max_attempts: 3
  backoff: 25ms
load:
  scrape_interval: 100ms
  max_age: 250ms
tokenizer:
  workers: 4
  max_wait: 50ms
index:
  default_capacity_blocks: 16384
observability:
  otlp_endpoint: http://localhost:4318/v1/traces
  trace_sample_ratio: 0.1
  decision_log:
    path: /var/log/inferrail/decisions.jsonl
    sample_rate: 0.01
  shadow_log: /var/log/inferrail/shadow.jsonl
`

// TestMergeKeys checks YAML merge keys: explicit keys win over merged ones,
// and of several merged mappings the earlier wins.
func TestMergeKeys(t *testing.T) {
	_, err := Parse([]byte(`
models: [{name: m}]
x: &r {models: [m], max_concurrency: 8, kv_capacity_blocks: 100}
`), nil)
	// Anchors have to live somewhere, and top-level keys are checked.
	if got := keys(t, err); !slices.Equal(got, []string{"x", "replicas"}) {
		t.Errorf("keys = %v", got)
	}
	c := mustParse(t, `
models:
  - name: m
    chat_template_kwargs:
      r: &r {models: [m], max_concurrency: 8, kv_capacity_blocks: 100}
      s: &s {kv_capacity_blocks: 200, max_pending: 2}
replicas:
  - {<<: [*r, *s], id: b, url: "http://b", max_concurrency: 9}
  - {<<: *s, id: c, url: "http://c", models: [m]}
`)
	want := Replica{ID: "b", URL: "http://b", Models: []string{"m"}, MaxConcurrency: 9, MaxPending: 2, KVCapacityBlocks: 100,
		EngineType: "vllm"}
	if !reflect.DeepEqual(c.Replicas[0], want) {
		t.Errorf("replicas[0] = %+v, want %+v", c.Replicas[0], want)
	}
	if r := c.Replicas[1]; r.KVCapacityBlocks != 200 || r.MaxConcurrency != 1024 {
		t.Errorf("replicas[1] = %+v", r)
	}
}

func TestParseInvalid(t *testing.T) {
	// replica builds a one-model config whose only replica has the given
	// extra keys.
	replica := func(extra string) string {
		return "models: [{name: m}]\nreplicas: [{id: r, url: \"http://h\", models: [m], " + extra + "}]\n"
	}
	rep := func(fields string) string {
		return "models: [{name: m}]\nreplicas: [{" + fields + "}]\n"
	}
	model := func(extra string) string {
		return "models: [{name: m, " + extra + "}]\nreplicas: [{id: r, url: \"http://h\", models: [m]}]\n"
	}
	for _, c := range []struct {
		name string
		doc  string
		env  []string
		keys []string
		msg  string // a part of the first message, when given
	}{
		{"empty", "", nil, []string{"models", "replicas"}, "at least one model"},
		{"empty lists", "models: []\nreplicas: []\ndiscovery: {dns: []}", nil, []string{"models", "replicas"}, ""},

		// Models.
		{"model without name", "models: [{aliases: [a]}]\nreplicas: [{id: r, url: \"http://h\", models: [a]}]",
			nil, []string{"models[0].name", "replicas[0].models[0]"}, "required"},
		{"duplicate model", "models: [{name: m}, {name: m}]\nreplicas: [{id: r, url: \"http://h\", models: [m]}]",
			nil, []string{"models[1].name"}, `"m" is already models[0].name`},
		{"alias clashes with a name", "models: [{name: m}, {name: n, aliases: [m]}]\nreplicas: [{id: r, url: \"http://h\", models: [m]}]",
			nil, []string{"models[1].aliases[0]"}, `"m" is already models[0].name`},
		{"alias clashes with an alias", "models: [{name: m, aliases: [x]}, {name: n, aliases: [y, x]}]\nreplicas: [{id: r, url: \"http://h\", models: [m]}]",
			nil, []string{"models[1].aliases[1]"}, `"x" is already models[0].aliases[0]`},
		{"alias is its own name", model("aliases: [m]"), nil, []string{"models[0].aliases[0]"}, ""},
		{"empty alias", model("aliases: ['']"), nil, []string{"models[0].aliases[0]"}, ""},
		{"unknown model policy", model("policy: fastest"), nil, []string{"models[0].policy"}, `unknown policy "fastest"; want one of round_robin, random, least_request, p2c, prefix_hash, kv_aware, cost_model`},
		{"model split", model("split: {kv_aware: 60, cost_model: 50}"), nil, []string{"models[0].split"}, "percents sum to 110, want 100"},
		{"model shadow", model("shadow: [p2c, p2c, nope]"), nil, []string{"models[0].shadow[1]", "models[0].shadow[2]"}, ""},
		{"model cost model", model("cost_model: {prefill_token_secs: -1}"), nil, []string{"models[0].cost_model.prefill_token_secs"}, ""},
		{"builtin tokenizer", model("tokenizer: builtin:gpt"), nil, []string{"models[0].tokenizer"}, ""},
		{"content format", model("chat_template_content_format: xml"), nil, []string{"models[0].chat_template_content_format"}, ""},
		{"inline system", model("anthropic_inline_system: hoist"), nil, []string{"models[0].anthropic_inline_system"}, ""},
		{"block size", model("block_size: 0"), nil, []string{"models[0].block_size"}, "must be at least 1, got 0"},
		{"kwargs value", model("chat_template_kwargs: {x: .nan}"), nil, []string{"models[0].chat_template_kwargs.x"}, "finite"},
		{"slo", model("slo: {ttft: -1s, tpot: 2h}"), nil, []string{"models[0].slo.ttft", "models[0].slo.tpot"}, "must be at most 1h0m0s, got 2h0m0s"},

		// Replicas.
		{"duplicate replica id", "models: [{name: m}]\nreplicas: [{id: r, url: \"http://a\", models: [m]}, {id: r, url: \"http://b\", models: [m]}]",
			nil, []string{"replicas[1].id"}, `"r" is already replicas[0].id`},
		{"empty replica id", "models: [{name: m}]\nreplicas: [{url: \"http://a\", models: [m]}]", nil, []string{"replicas[0].id"}, "required"},
		{"replica id characters", "models: [{name: m}]\nreplicas: [{id: gpu 0, url: \"http://a\", models: [m]}]", nil, []string{"replicas[0].id"}, ""},
		{"ftp url", rep("id: r, url: ftp://h, models: [m]"), nil, []string{"replicas[0].url"}, "want an http or https URL"},
		{"url without host", rep("id: r, url: 'http://:80', models: [m]"), nil, []string{"replicas[0].url"}, "has no host"},
		{"url without scheme", rep("id: r, url: '10.0.0.1:8000', models: [m]"), nil, []string{"replicas[0].url"}, ""},
		{"url with query", rep("id: r, url: 'http://h/?a=1', models: [m]"), nil, []string{"replicas[0].url"}, "query"},
		{"url with credentials", rep("id: r, url: 'http://u:p@h', models: [m]"), nil, []string{"replicas[0].url"}, "credentials"},
		{"url unparsable", rep("id: r, url: 'http://[::1', models: [m]"), nil, []string{"replicas[0].url"}, "invalid URL"},
		{"missing url", "models: [{name: m}]\nreplicas: [{id: r, models: [m]}]", nil, []string{"replicas[0].url"}, "required"},
		{"unknown replica model", rep("id: r, url: 'http://h', models: [m, n]"), nil, []string{"replicas[0].models[1]"}, `"n" is not a configured model`},
		{"replica lists an alias", "models: [{name: m, aliases: [a]}]\nreplicas: [{id: r, url: \"http://h\", models: [a]}]",
			nil, []string{"replicas[0].models[0]"}, `"a" is an alias; list the model's name, "m"`},
		{"replica without models", "models: [{name: m}]\nreplicas: [{id: r, url: \"http://h\"}]", nil, []string{"replicas[0].models"}, ""},
		{"replica limits", replica("max_concurrency: 0, max_pending: -1, kv_capacity_blocks: -5"), nil,
			[]string{"replicas[0].max_concurrency", "replicas[0].max_pending", "replicas[0].kv_capacity_blocks"}, ""},
		{"pending over concurrency", replica("max_concurrency: 4, max_pending: 5"), nil, []string{"replicas[0].max_pending"}, "more than max_concurrency (4)"},
		{"kv events scheme", replica("kv_events: 'http://h:5557'"), nil, []string{"replicas[0].kv_events"}, "want tcp://host:port or ipc://path"},
		{"kv events port", replica("kv_events: 'tcp://h:0', kv_events_replay: 'tcp://h'"), nil,
			[]string{"replicas[0].kv_events", "replicas[0].kv_events_replay"}, "port must be a number from 1 to 65535"},
		{"kv events wildcard", replica("kv_events: 'tcp://*:5557'"), nil, []string{"replicas[0].kv_events"}, `"*" is for listening`},
		{"kv events empty ipc", replica("kv_events: 'ipc://'"), nil, []string{"replicas[0].kv_events"}, "ipc path is empty"},
		{"kv events options alone", replica("kv_events_replay: 'tcp://h:5558', kv_events_bind: true"), nil,
			[]string{"replicas[0].kv_events_replay", "replicas[0].kv_events_bind"}, "needs kv_events"},
		{"kv events twice", "models: [{name: m}]\nreplicas: [{id: a, url: \"http://a\", models: [m], kv_events: 'tcp://e:1'}, {id: b, url: \"http://b\", models: [m], kv_events: 'tcp://e:1'}]",
			nil, []string{"replicas[1].kv_events"}, `"tcp://e:1" is already replicas[0].kv_events`},

		// DNS groups.
		{"dns group", "models: [{name: m}]\ndiscovery: {dns: [{url: 'http://s', models: [x], refresh: 0s}, {name: g, url: 's:80', models: [m]}]}",
			nil, []string{"discovery.dns[0].name", "discovery.dns[0].models[0]", "discovery.dns[0].refresh", "discovery.dns[1].url"}, ""},
		{"duplicate dns group", "models: [{name: m}]\ndiscovery: {dns: [{name: g, url: 'http://s', models: [m]}, {name: g, url: 'http://t', models: [m]}]}",
			nil, []string{"discovery.dns[1].name"}, ""},
		{"dns kv event ports", "models: [{name: m}]\ndiscovery: {dns: [{name: g, url: 'http://s', models: [m], kv_events_port: 70000}, {name: h, url: 'http://t', models: [m], kv_events_replay_port: 5558}]}",
			nil, []string{"discovery.dns[0].kv_events_port", "discovery.dns[1].kv_events_replay_port"}, ""},
		{"kubernetes pool", "models: [{name: m}]\ndiscovery: {kubernetes: {pool_name: My_Pool, pool_namespace: a.b, target_ports: [8000], models: [x], scheme: grpc, kv_events_replay_port: 5558}}",
			nil, []string{"discovery.kubernetes.pool_name", "discovery.kubernetes.pool_namespace", "discovery.kubernetes.target_ports",
				"discovery.kubernetes.scheme", "discovery.kubernetes.models[0]", "discovery.kubernetes.kv_events_replay_port"}, ""},
		{"kubernetes selector ports", "models: [{name: m}]\ndiscovery: {kubernetes: {endpoint_selector: {'-bad': x}, target_ports: [8000, 8000, 0]}}",
			nil, []string{"discovery.kubernetes.endpoint_selector.-bad", "discovery.kubernetes.target_ports[1]", "discovery.kubernetes.target_ports[2]"}, ""},
		{"kubernetes selector without ports", "models: [{name: m}]\ndiscovery: {kubernetes: {endpoint_selector: {app: vllm}}}",
			nil, []string{"discovery.kubernetes.target_ports"}, "needs 1 to 8 target ports"},
		{"kubernetes nine ports", "models: [{name: m}]\ndiscovery: {kubernetes: {endpoint_selector: {app: vllm}, target_ports: [1, 2, 3, 4, 5, 6, 7, 8, 9]}}",
			nil, []string{"discovery.kubernetes.target_ports"}, ""},
		{"kubernetes off with keys", base + "discovery: {kubernetes: {target_ports: [8000]}}", nil, []string{"discovery.kubernetes"}, "set pool_name or endpoint_selector"},
		{"endpoint file", "models: [{name: m}]\ndiscovery: {file: {path: eps.yaml, models: [m, m], max_concurrency: 0, engine_type: tgi}}",
			nil, []string{"discovery.file.models[1]", "discovery.file.max_concurrency", "discovery.file.engine_type"}, ""},
		{"endpoint file off with keys", base + "discovery: {file: {models: [m]}}", nil, []string{"discovery.file"}, "set path"},

		// Sections.
		{"listen", base + "server: {listen: localhost, admin_listen: ':99999'}", nil, []string{"server.listen", "server.admin_listen"}, "want host:port"},
		{"same listeners", base + "server: {listen: ':80', admin_listen: ':80'}", nil, []string{"server.admin_listen"}, "must differ"},
		{"server limits", base + "server: {request_timeout: 0s, shutdown_timeout: -1s, reload_interval: -1s, max_body_bytes: 0}", nil,
			[]string{"server.request_timeout", "server.shutdown_timeout", "server.reload_interval", "server.max_body_bytes"}, "must be longer than 0, got 0s"},
		{"default policy", base + "routing: {default_policy: ''}", nil, []string{"routing.default_policy"}, ""},
		{"split percents", base + "routing: {split: {kv_aware: 120, p2c: -20, fast: 0}}", nil,
			[]string{"routing.split.fast", "routing.split.kv_aware", "routing.split.p2c"}, ""},
		{"split sum", base + "routing: {split: {kv_aware: 10, cost_model: 85}}", nil, []string{"routing.split"}, "percents sum to 95, want 100"},
		{"routing numbers", base + "routing: {epsilon: -0.5, kappa: 0, short_prompt_tokens: -1, recompute_weight: -1, slo_admission_wait_factor: 0.5, estimate_deadline: 0s}", nil,
			[]string{"routing.estimate_deadline", "routing.epsilon", "routing.kappa", "routing.short_prompt_tokens", "routing.recompute_weight", "routing.slo_admission_wait_factor"}, ""},
		{"kappa above one", base + "routing: {kappa: 1.5}", nil, []string{"routing.kappa"}, "must be above 0 and at most 1, got 1.5"},
		{"routing subsections", base + "routing: {prefix_hash: {blocks: 0}, kv_aware: {cache_weight: 0, load_weight: 0}, hot_prefix: {blocks: 0, window: 0s, utilization: 2}}", nil,
			[]string{"routing.prefix_hash.blocks", "routing.kv_aware", "routing.hot_prefix.blocks", "routing.hot_prefix.window", "routing.hot_prefix.utilization"}, ""},
		{"negative seed", base + "routing: {seed: -1}", nil, []string{"routing.seed"}, "must not be negative"},
		{"health", base + "health: {interval: 1s, timeout: 2s, unhealthy_threshold: 0, ejection_backoff: 10s, max_ejection_backoff: 5s, max_ejection_percent: 101}", nil,
			[]string{"health.timeout", "health.unhealthy_threshold", "health.max_ejection_backoff", "health.max_ejection_percent"}, ""},
		{"negative ejection percent", base + "health: {max_ejection_percent: -1}", nil, []string{"health.max_ejection_percent"}, "must be from 0 to 100, got -1"},
		{"retry", base + "retry: {max_attempts: 0, backoff: -1ms}", nil, []string{"retry.max_attempts", "retry.backoff"}, ""},
		{"flow control", base + "flow_control: {enabled: true, max_queued: 0, max_wait: 0s}", nil, []string{"flow_control.max_queued", "flow_control.max_wait"}, ""},
		{"load", base + "load: {scrape_interval: 100ms, scrape_timeout: 0s, max_age: 100ms}", nil, []string{"load.scrape_timeout", "load.max_age"}, ""},
		{"tokenizer", base + "tokenizer: {workers: -1, max_wait: 0s, cache_tokens: -1}", nil, []string{"tokenizer.workers", "tokenizer.max_wait", "tokenizer.cache_tokens"}, ""},
		{"index", base + "index: {default_capacity_blocks: 0}", nil, []string{"index.default_capacity_blocks"}, ""},
		{"observability", base + "observability: {otlp_endpoint: 'collector:4318', trace_sample_ratio: 1.1, decision_log: {sample_rate: 0.5}}", nil,
			[]string{"observability.otlp_endpoint", "observability.trace_sample_ratio", "observability.decision_log.path"}, ""},
		{"shared log file", base + "observability: {decision_log: {path: /x, sample_rate: 1}, shadow_log: /x}", nil, []string{"observability.shadow_log"}, ""},
		{"request log", base + "observability: {request_log: {path: /r, sample_rate: 1.5, block_size: 0, max_bytes: -1, max_files: 0}}", nil,
			[]string{"observability.request_log.sample_rate", "observability.request_log.block_size", "observability.request_log.max_bytes", "observability.request_log.max_files"}, ""},
		{"request log block size", base + "observability: {request_log: {path: /r, block_size: 500}}", nil,
			[]string{"observability.request_log.block_size"}, "500 is not a multiple of model m's block_size 16"},
		{"request log shares a file", base + "observability: {decision_log: {path: /x, sample_rate: 1}, request_log: {path: /x}}", nil,
			[]string{"observability.request_log.path"}, "must differ from observability.decision_log.path"},
		{"logging", base + "logging: {level: verbose, format: xml}", nil, []string{"logging.level", "logging.format"}, ""},

		// Types.
		{"string for an integer", replica("max_concurrency: lots"), nil, []string{"replicas[0].max_concurrency"}, `expected a whole number, got the string "lots"`},
		{"fraction for an integer", base + "retry: {max_attempts: 2.5}", nil, []string{"retry.max_attempts"}, "expected a whole number, got 2.5"},
		{"huge integer", replica("max_concurrency: 99999999999999999999"), nil, []string{"replicas[0].max_concurrency"}, ""},
		{"yes is not a bool", base + "routing: {session_affinity: yes}", nil, []string{"routing.session_affinity"}, `expected true or false, got the string "yes"`},
		{"number for a string", "models: [{name: 1.5}]\nreplicas: [{id: r, url: \"http://h\", models: [m]}]", nil,
			[]string{"models[0].name", "replicas[0].models[0]"}, "expected a string, got the number 1.5"},
		{"models not a list", "models: m\nreplicas: [{id: r, url: \"http://h\", models: [m]}]", nil, []string{"models", "replicas[0].models[0]"}, "expected a list, got the string"},
		{"model not a mapping", "models: [m]\nreplicas: [{id: r, url: \"http://h\", models: [m]}]", nil, []string{"models[0]", "replicas[0].models[0]"}, "expected a mapping"},
		{"null list entry", "models: [{name: m}, null]\nreplicas: [{id: r, url: \"http://h\", models: [m]}]", nil, []string{"models[1]"}, "got nothing"},
		{"section not a mapping", base + "server: [1]", nil, []string{"server"}, "expected a mapping, got a list"},
		{"alias not a string", model("aliases: [1]"), nil, []string{"models[0].aliases[0]"}, ""},
		{"split value", base + "routing: {split: {kv_aware: many, cost_model: 100}}", nil, []string{"routing.split.kv_aware"}, ""},
		{"infinite float", base + "routing: {epsilon: .inf}", nil, []string{"routing.epsilon"}, "finite"},

		// One config, five problems.
		{"five problems", `
models:
  - name: m
    policy: fastest
replicas:
  - id: r
    url: ftp://h
    models: [m, n]
health: {max_ejection_percent: 200}
retry: {backoff: 5}
`, nil, []string{"retry.backoff", "models[0].policy", "replicas[0].url", "replicas[0].models[1]", "health.max_ejection_percent"}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(c.doc), c.env)
			if err == nil {
				t.Fatalf("no error; want problems with %v", c.keys)
			}
			if got := keys(t, err); !slices.Equal(got, c.keys) {
				t.Errorf("keys = %q, want %q\nerror:\n%v", got, c.keys, err)
			}
			if c.msg != "" && !strings.Contains(err.Error(), c.msg) {
				t.Errorf("error does not mention %q:\n%v", c.msg, err)
			}
			for _, line := range strings.Split(err.Error(), "\n") {
				if !strings.Contains(line, ": ") {
					t.Errorf("line %q does not name its key", line)
				}
			}
		})
	}
}

func TestParseNotAConfig(t *testing.T) {
	for _, doc := range []string{
		"- a\n- b\n",
		"just a string",
		"a: 1\n---\nb: 2\n",
		"a: [1\n",
		"a: 1\na: 2\n",
		"a: *nowhere\n",
		"? [1]\n: x\n",
		"a: &x [*x]\n",
		"models: [{name: m, chat_template_kwargs: {a: " + strings.Repeat("[", 40) + strings.Repeat("]", 40) + "}}]",
		strings.Repeat("x", MaxBytes+1),
	} {
		_, err := Parse([]byte(doc), nil)
		if err == nil {
			t.Errorf("%.40q: no error", doc)
			continue
		}
		if ke := (*KeyError)(nil); errors.As(err, &ke) {
			t.Errorf("%.40q: a key error, want a document error: %v", doc, err)
		}
		if !strings.HasPrefix(err.Error(), "config: ") {
			t.Errorf("%.40q: error %q does not start with config:", doc, err)
		}
	}
}

func TestUnknownKeys(t *testing.T) {
	for _, c := range []struct {
		doc string
		key string
	}{
		{base + "serve: {}", "serve"},
		{base + "server: {listn: ':80'}", "server.listn"},
		{base + "routing: {cost_model: {prefill_token_sec: 1}}", "routing.cost_model.prefill_token_sec"},
		{base + "routing: {hot_prefix: {enable: true}}", "routing.hot_prefix.enable"},
		{base + "observability: {decision_log: {rate: 1}}", "observability.decision_log.rate"},
		{base + "discovery: {consul: {}}", "discovery.consul"},
		{"models: [{name: m}, {name: n, polcy: p2c}]\nreplicas: [{id: r, url: 'http://h', models: [m]}]", "models[1].polcy"},
		{"models: [{name: m, cost_model: {a: 1}}]\nreplicas: [{id: r, url: 'http://h', models: [m]}]", "models[0].cost_model.a"},
		{"models: [{name: m}]\nreplicas: [{id: r, url: 'http://h', models: [m], maxconcurrency: 1}]", "replicas[0].maxconcurrency"},
		{"models: [{name: m}]\ndiscovery: {dns: [{name: g, url: 'http://s', models: [m], refesh: 1s}]}", "discovery.dns[0].refesh"},
		{"models: [{name: m}]\nreplicas: [{id: r, url: 'http://h', models: [m]}]\nModels: []", "Models"},
	} {
		_, err := Parse([]byte(c.doc), nil)
		if got := keys(t, err); !slices.Equal(got, []string{c.key}) {
			t.Errorf("keys = %q, want [%q]; error: %v", got, c.key, err)
		}
		if !errors.Is(err, ErrUnknownKey) || err.Error() != c.key+": unknown key" {
			t.Errorf("error = %q, want %q", err, c.key+": unknown key")
		}
	}
}

func TestDurations(t *testing.T) {
	for _, c := range []struct {
		val  string
		want time.Duration
		err  string
	}{
		{"250ms", 250 * time.Millisecond, ""},
		{"2s", 2 * time.Second, ""},
		{"1.5s", 1500 * time.Millisecond, ""},
		{"1m30s", 90 * time.Second, ""},
		{"'  3s '", 3 * time.Second, ""},
		{"100us", 100 * time.Microsecond, ""},
		{"0", 0, ""},
		{"0s", 0, ""},
		{"'0'", 0, ""},
		{"5", 0, `server.reload_interval: 5 is a bare number: a duration needs a unit, such as "5s" or "5ms"`},
		{"2.5", 0, "2.5 is a bare number"},
		{"'5'", 0, "5 is a bare number"},
		{"2 s", 0, `invalid duration "2 s"`},
		{"1d", 0, `invalid duration "1d"`},
		{"10000000h", 0, "invalid duration"},
		{"true", 0, "expected a duration"},
		{"[1s]", 0, "expected a duration"},
		{"-1s", 0, "server.reload_interval: must not be negative, got -1s"},
	} {
		c2, err := Parse([]byte(base+"server: {reload_interval: "+c.val+"}"), nil)
		switch {
		case c.err == "" && err != nil:
			t.Errorf("%s: %v", c.val, err)
		case c.err == "" && c2.Server.ReloadInterval != c.want:
			t.Errorf("%s = %v, want %v", c.val, c2.Server.ReloadInterval, c.want)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s: error %v, want %q", c.val, err, c.err)
		case c.err != "" && !slices.Equal(keys(t, err), []string{"server.reload_interval"}):
			t.Errorf("%s: keys %v", c.val, keys(t, err))
		}
	}
}

func TestEnvOverrides(t *testing.T) {
	file := base + `
routing:
  split: {cost_model: 90, kv_aware: 10}
  shadow: [p2c]
server: {listen: ":1", admin_listen: ":2"}
`
	c := mustParse(t, file,
		"PATH=/usr/bin",
		"INFERRAILX_SERVER__LISTEN=ignored",
		"inferrail_server__listen=ignored", // the prefix is upper case
		"INFERRAIL_SERVER__LISTEN=0.0.0.0:8080",
		"INFERRAIL_ROUTING__COST_MODEL__PREFILL_TOKEN_SECS=0.0002",
		"INFERRAIL_ROUTING__SPLIT={kv_aware: 100}",
		"INFERRAIL_ROUTING__SHADOW=[least_request, random]",
		"INFERRAIL_ROUTING__SESSION_AFFINITY=true",
		"INFERRAIL_RETRY__MAX_ATTEMPTS=5",
		"INFERRAIL_HEALTH__INTERVAL=2s",
		"INFERRAIL_LOGGING__LEVEL=debug",
		"INFERRAIL_LOGGING__LEVEL=warn", // a later duplicate wins
		"INFERRAIL_OBSERVABILITY__OTLP_ENDPOINT=",
		"INFERRAIL_TOKENIZER={workers: 3}",
	)
	want := mustParse(t, file)
	want.Server.Listen = "0.0.0.0:8080"
	want.Routing.CostModel.PrefillTokenSecs = 0.0002
	want.Routing.Split = map[string]int{"kv_aware": 100} // replaced whole, not merged
	want.Routing.Shadow = []string{"least_request", "random"}
	want.Routing.SessionAffinity = true
	want.Retry.MaxAttempts = 5
	want.Health.Interval = 2 * time.Second
	want.Logging.Level = "warn"
	want.Tokenizer.Workers = 3
	if d := Diff(want, c); len(d) > 0 {
		a, _ := c.YAML()
		t.Errorf("sections %v differ:\n%s", d, a)
	}

	// A whole section from the environment merges with the file's, and a
	// key inside it wins whatever the order.
	c = mustParse(t, file, "INFERRAIL_SERVER__ADMIN_LISTEN=:4", "INFERRAIL_SERVER={listen: ':3', admin_listen: ':5'}")
	if c.Server.Listen != ":3" || c.Server.AdminListen != ":4" || c.Server.ReloadInterval != 2*time.Second {
		t.Errorf("server = %+v", c.Server)
	}

	// Lists are replaced whole.
	c = mustParse(t, base, "INFERRAIL_MODELS=[{name: m, aliases: [x]}, {name: n}]")
	if len(c.Models) != 2 || c.Models[1].BlockSize != 16 || c.Models[0].Aliases[0] != "x" {
		t.Errorf("models = %+v", c.Models)
	}
	// A model cost model set from the environment still inherits.
	c = mustParse(t, base, "INFERRAIL_MODELS=[{name: m, cost_model: {prefill_fixed_secs: 1}}]", "INFERRAIL_ROUTING__COST_MODEL__PREFILL_TOKEN_SECS=7")
	if cm := c.Models[0].CostModel; cm.PrefillFixedSecs != 1 || cm.PrefillTokenSecs != 7 {
		t.Errorf("cost model = %+v", cm)
	}
}

func TestEnvErrors(t *testing.T) {
	for _, c := range []struct {
		env  []string
		keys []string
		msg  string
	}{
		{[]string{"INFERRAIL_SERVER__LISTN=:1"}, []string{"server.listn"}, "server.listn (INFERRAIL_SERVER__LISTN): unknown key"},
		{[]string{"INFERRAIL_SERVR__LISTEN=:1"}, []string{"servr"}, "servr (INFERRAIL_SERVR__LISTEN): unknown key"},
		{[]string{"INFERRAIL_SERVER_LISTEN=:1"}, []string{"server_listen"}, ""},
		{[]string{"INFERRAIL_=x"}, []string{""}, ""},
		{[]string{"INFERRAIL_RETRY__MAX_ATTEMPTS=many"}, []string{"retry.max_attempts"}, `retry.max_attempts (INFERRAIL_RETRY__MAX_ATTEMPTS): expected a whole number, got the string "many"`},
		{[]string{"INFERRAIL_RETRY__MAX_ATTEMPTS="}, []string{"retry.max_attempts"}, "empty value"},
		{[]string{"INFERRAIL_HEALTH__INTERVAL=5"}, []string{"health.interval"}, "bare number"},
		{[]string{"INFERRAIL_ROUTING__SHADOW=[p2c"}, []string{"routing.shadow"}, "not valid YAML"},
		{[]string{"INFERRAIL_ROUTING__SHADOW=p2c"}, []string{"routing.shadow"}, "expected a list"},
		{[]string{"INFERRAIL_REPLICAS__0__URL=http://x"}, []string{"replicas"}, "a list or map is set whole, e.g. INFERRAIL_REPLICAS='[...]'"},
		{[]string{"INFERRAIL_ROUTING__SPLIT__KV_AWARE=100"}, []string{"routing.split"}, "set whole"},
		{[]string{"INFERRAIL_SERVER__LISTEN__HOST=x"}, []string{"server.listen"}, ""},
		{[]string{"INFERRAIL_SERVER={listn: x}"}, []string{"server.listn"}, ""},
		{[]string{"INFERRAIL_SERVER__LISTEN=nope"}, []string{"server.listen"}, "want host:port"},
		{[]string{"INFERRAIL_ROUTING__KAPPA=2", "INFERRAIL_LOGGING__LEVEL=loud"}, []string{"routing.kappa", "logging.level"}, ""},
	} {
		_, err := Parse([]byte(base), c.env)
		if err == nil {
			t.Errorf("%v: no error", c.env)
			continue
		}
		if got := keys(t, err); !slices.Equal(got, c.keys) {
			t.Errorf("%v: keys %q, want %q; error: %v", c.env, got, c.keys, err)
		}
		if c.msg != "" && !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%v: error %q does not contain %q", c.env, err, c.msg)
		}
	}
}

// TestProblemsAreBounded checks that a config with a problem in every one of
// thousands of replicas reports the first hundred and counts the rest.
func TestProblemsAreBounded(t *testing.T) {
	doc := "models: [{name: m}]\nreplicas:\n" + strings.Repeat("  - {id: r, models: [m]}\n", 1000)
	_, err := Parse([]byte(doc), nil)
	errs := unjoin(err)
	if len(errs) != maxProblems+1 {
		t.Fatalf("%d errors, want %d", len(errs), maxProblems+1)
	}
	if last := errs[len(errs)-1].Error(); last != "and 1899 more problems" {
		t.Errorf("last = %q", last)
	}
	path := t.TempDir() + "/c.yaml"
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path, nil); err == nil || !strings.HasPrefix(err.Error(), "config "+path+": 1999 problems:\n") {
		t.Errorf("Load: %.200v", err)
	}
}

// routing.shared_engines_rendezvous is on by default and can be turned off
// (issue 32).
func TestSharedEnginesRendezvousKey(t *testing.T) {
	if c := mustParse(t, base); !c.Routing.SharedEnginesRendezvous {
		t.Error("off by default")
	}
	if c := mustParse(t, base+"routing: {shared_engines_rendezvous: false}\n"); c.Routing.SharedEnginesRendezvous {
		t.Error("routing.shared_engines_rendezvous: false left it on")
	}
	if c := mustParse(t, base, "INFERRAIL_ROUTING__SHARED_ENGINES_RENDEZVOUS=false"); c.Routing.SharedEnginesRendezvous {
		t.Error("the environment did not turn it off")
	}
}

package config

import (
	"time"

	"github.com/inferrail/inferrail/model/flow"
	"github.com/inferrail/inferrail/model/kvevent"
	"github.com/inferrail/inferrail/model/sched"
)

// Config is the gateway's whole configuration.
//
// A *Config returned by Load or Parse is valid and immutable: nothing modifies
// it afterwards, so it is safe for concurrent reads without locking. Its maps and
// slices are shared, not copied; callers must not modify them either. A reload
// builds a new *Config.
//
// Only models and at least one replica or DNS group are required; every other
// key has a default, documented on its field.
type Config struct {
	// Server holds the client and admin listeners and request limits.
	// Restart only.
	Server Server `koanf:"server"`
	// ExtProc is the endpoint picker's listeners (inferrail epp). Restart
	// only.
	ExtProc ExtProc `koanf:"ext_proc"`
	// Upstream holds how the gateway connects to engines. Restart only.
	Upstream Upstream `koanf:"upstream"`
	// Models lists the models the gateway serves, in the order GET /v1/models
	// lists them. At least one is required. Adding, removing or reordering
	// models, or changing a model's tokenizer, chat template or block size,
	// needs a restart; its policy, split, shadow, cost_model and aliases
	// change live.
	Models []Model `koanf:"models"`
	// Replicas lists the static engine replicas. Live: a replica that keeps
	// its id keeps its health, counters and cache predictions.
	Replicas []Replica `koanf:"replicas"`
	// Discovery adds replicas found in DNS, in Kubernetes (an
	// InferencePool's pods) and in an endpoint file. Restart only.
	Discovery Discovery `koanf:"discovery"`
	// Routing holds the fleet-wide routing settings. Live.
	Routing Routing `koanf:"routing"`
	// Health holds active health checks and passive ejection. Restart only.
	Health Health `koanf:"health"`
	// Retry holds retries before the first response byte. Live.
	Retry Retry `koanf:"retry"`
	// FlowControl holds requests back, in priority bands, while every
	// replica of their model is full or the pool is saturated. Live.
	FlowControl FlowControl `koanf:"flow_control"`
	// RateLimits holds each tenant's requests per second and tokens per
	// minute. Live.
	RateLimits RateLimits `koanf:"rate_limits"`
	// Load holds scraping of the engines' /metrics pages. Restart only.
	Load LoadSignals `koanf:"load"`
	// Tokenizer holds the edge tokenization worker pool. Restart only.
	Tokenizer Tokenizer `koanf:"tokenizer"`
	// Index holds the KV index. Restart only.
	Index Index `koanf:"index"`
	// KVEvents holds how replicas with kv_events follow their engines'
	// events. Restart only.
	KVEvents KVEvents `koanf:"kv_events"`
	// Observability holds traces, the decision log and the shadow log.
	// Restart only.
	Observability Observability `koanf:"observability"`
	// Logging holds the gateway's own log. Only log_prompts is live.
	Logging Logging `koanf:"logging"`
	// Auth holds API keys on the client port and the admin port's
	// credentials. Live.
	Auth Auth `koanf:"auth"`
	// TLS holds the listeners' certificates and the trust in engines.
	// Restart only; the certificate files are reread when they change.
	TLS TLS `koanf:"tls"`
}

// Server configures the listeners and the limits on client requests.
type Server struct {
	// Listen is the client (OpenAI API) address, host:port. An empty host
	// listens on every interface; port 0 picks a free port.
	// Default "127.0.0.1:8080".
	Listen string `koanf:"listen"`
	// AdminListen serves /metrics, /admin/config, /admin/explain and the other
	// admin routes, host:port. They are open unless auth.admin sets a token
	// (or tls.admin_listen a client CA): keep it on localhost or a private
	// network. Default "127.0.0.1:9090".
	AdminListen string `koanf:"admin_listen"`
	// RequestTimeout bounds reading a request body (a body that stops
	// arriving gets a 408) and everything before the first response byte:
	// every attempt, retry and backoff share this one deadline. A response
	// that has started streaming is not cut by it. Default 5m, so a request
	// queued behind a busy engine is not given up before most clients give
	// up themselves.
	RequestTimeout time.Duration `koanf:"request_timeout"`
	// HeaderReadTimeout bounds reading a request's headers, and closes client
	// connections left idle between requests for that long. Default 30s.
	HeaderReadTimeout time.Duration `koanf:"header_read_timeout"`
	// ShutdownTimeout is how long running streams may finish after SIGTERM
	// before the rest are closed. Default 30s, Kubernetes' default grace
	// period.
	ShutdownTimeout time.Duration `koanf:"shutdown_timeout"`
	// ReloadInterval is how often the config file is reread and applied when
	// it differs from the config in effect; 0 turns polling off (SIGHUP and
	// POST /admin/reload still reload). Default 2s.
	ReloadInterval time.Duration `koanf:"reload_interval"`
	// MaxBodyBytes is the largest request body accepted, on the client port
	// and by /admin/explain; larger ones get a 413. Default 16777216 (16 MiB),
	// room for long contexts and inline images.
	MaxBodyBytes int64 `koanf:"max_body_bytes"`
}

// ExtProc configures `inferrail epp`, the endpoint picker (EPP) behind
// Envoy: Envoy streams each request to it over ext_proc and forwards the
// request to the endpoint it names, as the Gateway API Inference
// Extension's protocol says. `inferrail serve` reads none of it. The
// defaults are llm-d's EPP ports.
type ExtProc struct {
	// Listen is the ext_proc gRPC address (envoy.service.ext_proc.v3),
	// host:port. Default ":9002". tls.ext_proc turns TLS on.
	Listen string `koanf:"listen"`
	// HealthListen serves the gRPC health protocol (services liveness,
	// readiness and envoy.service.ext_proc.v3.ExternalProcessor), plain
	// gRPC, host:port. Default ":9003".
	HealthListen string `koanf:"health_listen"`
	// AdminListen is the admin port in epp mode (/metrics, /admin/*), in
	// place of server.admin_listen. Default ":9090", the port llm-d's EPP
	// serves its metrics on.
	AdminListen string `koanf:"admin_listen"`
}

// Upstream configures the gateway's client to the engines. It speaks
// HTTP/1.1 over pooled keep-alive connections, as vLLM's and SGLang's
// servers (uvicorn) do.
type Upstream struct {
	// DialTimeout bounds opening a connection to an engine; a dial that fails
	// or times out is retried on another replica. Default 2s.
	DialTimeout time.Duration `koanf:"dial_timeout"`
	// APIKeyFile is a file holding the engines' own key (vLLM's --api-key),
	// sent to every replica without an api_key_file of its own, DNS
	// members included, as Authorization: Bearer KEY. Reread as
	// auth.api_keys.file is. The client's Authorization and x-api-key are
	// never forwarded while auth.api_keys is on, or once an engine key is
	// set. Default "": none.
	APIKeyFile string `koanf:"api_key_file"`
}

// Model is one model the gateway serves. Routing keys left unset (policy,
// split, shadow, cost_model) take the routing section's value.
type Model struct {
	// Name is the model name engines serve and clients ask for. Required and
	// unique.
	Name string `koanf:"name"`
	// Aliases are further names clients may ask for; the gateway rewrites
	// them to Name before forwarding. Each is unique across every model's
	// name and aliases. Default none.
	Aliases []string `koanf:"aliases"`
	// Policy routes this model's requests when Split is empty: a policy,
	// or a name of routing.schedulers. Default "", which takes
	// routing.split, else routing.scheduler, else routing.default_policy.
	Policy string `koanf:"policy"`
	// Scheduler routes this model's requests when Split is empty, as
	// routing.scheduler does: a scheduling profile, an EndpointPickerConfig
	// document inline or the path of a YAML file holding one (docs/
	// plugins.md). Set it or policy, not both. In this model's routing
	// (its split and shadow, and routing's) the name "scheduler" means this
	// profile. A file is read when the config is loaded or reloaded.
	// Default none.
	Scheduler any `koanf:"scheduler"`
	// Split gives each policy a percent of this model's traffic; the
	// percents are whole numbers summing to 100. Default none: Policy, else
	// the routing section's split or default policy.
	Split map[string]int `koanf:"split"`
	// Shadow lists policies that pick a replica for every request of this
	// model without routing it. Unset takes routing.shadow; an empty list
	// ([]) runs no shadows for this model.
	Shadow []string `koanf:"shadow"`
	// CostModel prices prefill on this model's engines. Unset takes
	// routing.cost_model; keys it leaves out are taken from routing.cost_model.
	// `cost_model: auto` calibrates online from routing.cost_model's values
	// (CostModel.Auto).
	CostModel *CostModel `koanf:"cost_model"`
	// Tokenizer names the tokenizer for cache predictions: a model directory,
	// a repository already in the local Hugging Face cache (org/name or
	// org/name@revision), or builtin:sim for the simulator. Nothing is
	// downloaded. Default "": no tokenizer, so requests route without cache
	// predictions.
	Tokenizer string `koanf:"tokenizer"`
	// ChatTemplate overrides the tokenizer's chat template, as vLLM's
	// --chat-template: a file path or the template itself. Default "": the
	// tokenizer's own.
	ChatTemplate string `koanf:"chat_template"`
	// ChatTemplateContentFormat is how message content reaches the template,
	// as vLLM's --chat-template-content-format: auto, string or openai.
	// Default "auto".
	ChatTemplateContentFormat string `koanf:"chat_template_content_format"`
	// ChatTemplateKwargs are extra template variables, as vLLM's
	// --chat-template-kwargs (for example enable_thinking: false). Default
	// none.
	ChatTemplateKwargs map[string]any `koanf:"chat_template_kwargs"`
	// AnthropicInlineSystem is where the inline role "system" messages of
	// Anthropic Messages requests (Claude Code sends one almost every
	// turn) go in the prompt, as vLLM's Anthropic entrypoint places them:
	// preserve keeps them in place as system turns, fold merges them into
	// a neighbouring user message. vLLM picks one by probing the chat
	// template at first use and logs it ("Anthropic inline system
	// messages will be kept in place" or "... folded into adjacent
	// turns"); set the same here. Default "preserve", what it picks for
	// templates that mark system turns (Qwen, ChatML, the simulator's).
	AnthropicInlineSystem string `koanf:"anthropic_inline_system"`
	// BlockSize is tokens per KV block, as the engines' --block-size. It must
	// match the engines for cache predictions to be right. Default 16, vLLM's
	// default.
	BlockSize int `koanf:"block_size"`
	// SLO is the latency objective of this model's requests that name none
	// in llm-d's headers (x-llm-d-slo-ttft-ms, x-llm-d-slo-tpot-ms, or
	// their x-slo-* aliases); a header sets its own measure and the other
	// keeps this default. The SLO-aware plugins route and admit on it, and
	// inferrail_slo_requests_total counts whether requests met it. Applies
	// live. Default none.
	SLO SLO `koanf:"slo"`

	// scheduler is Scheduler decoded, by Parse.
	scheduler *sched.Config
}

// SLO is a model's default latency objective; a zero measure sets none.
type SLO struct {
	// TTFT is the time to first token, from the request's arrival at the
	// gateway to the first byte of its response, such as 2s. At most 1h.
	TTFT time.Duration `koanf:"ttft"`
	// TPOT is the mean time per output token after the first, such as
	// 50ms. At most 1h.
	TPOT time.Duration `koanf:"tpot"`
}

// Replica is one static engine replica.
type Replica struct {
	// ID names the replica in metrics, logs and the x-inferrail-replica
	// header: letters, digits, '.', '_' and '-'. Required and unique.
	ID string `koanf:"id"`
	// URL is the engine's base URL, http or https with a host, without query
	// or fragment, such as http://10.0.0.10:8000. Required.
	URL string `koanf:"url"`
	// Models lists the configured model names this replica serves. At least
	// one is required.
	Models []string `koanf:"models"`
	// Labels are the replica's labels, Kubernetes-style keys and values,
	// which scheduling profiles' filters select replicas by
	// (label-selector-filter; decode-filter and prefill-filter read
	// llm-d.ai/role). Default none.
	Labels map[string]string `koanf:"labels"`
	// MaxConcurrency caps requests in flight to this replica; a full replica
	// is skipped and a full fleet answers 503. Default 1024, four times
	// vLLM's default --max-num-seqs so the engine's own queue stays fed.
	MaxConcurrency int `koanf:"max_concurrency"`
	// MaxPending caps the requests still waiting for a response head, so a
	// replica that hangs stops absorbing traffic. Non-streaming requests
	// wait for their head until they finish, so set it above the share of
	// them in flight. At most max_concurrency. Default 0: no cap beyond
	// max_concurrency.
	MaxPending int `koanf:"max_pending"`
	// KVCapacityBlocks sizes this replica's cache prediction in KV blocks.
	// Default 0: what the engine reports in its metrics, else
	// index.default_capacity_blocks.
	KVCapacityBlocks int `koanf:"kv_capacity_blocks"`
	// KVEvents is the engine's KV event stream, the endpoint of vLLM's or
	// SGLang's --kv-events-config (see engine_type): tcp://host:port (such
	// as tcp://10.0.0.10:5557) or ipc://path. Set, the gateway subscribes to it and keeps this
	// replica's cache prediction in step with what the engine stores and
	// evicts, the blocks it generated included, which routing decisions
	// alone never show. The engine's hashes are rebuilt from the token ids
	// in its events, salted by the replica's first model, so a replica
	// whose engine serves several models is mirrored only for that one.
	// Default "": off, the prediction comes from routing decisions.
	KVEvents string `koanf:"kv_events"`
	// KVEventsReplay is the engine's replay endpoint (replay_endpoint in
	// --kv-events-config), tcp://host:port or ipc://path: batches lost on
	// the stream are fetched from it, and so is the engine's buffered
	// history when the gateway subscribes. Needs kv_events. Default "": a
	// lost batch is counted and the prediction may drift until the blocks
	// it named are stored or evicted again.
	KVEventsReplay string `koanf:"kv_events_replay"`
	// KVEventsBind makes the gateway listen on kv_events and the engine
	// connect to it, for an engine whose endpoint has no "*" (vLLM then
	// connects rather than binds). Needs kv_events. Default false: the
	// engine binds and the gateway connects.
	KVEventsBind bool `koanf:"kv_events_bind"`
	// APIKeyFile is a file holding this engine's key (vLLM's --api-key), in
	// place of upstream.api_key_file. Default "": upstream.api_key_file.
	APIKeyFile string `koanf:"api_key_file"`
	// EngineType is the engine behind the replica, vllm or sglang: how its
	// KV events are read (SGLang's schema differs from vLLM's past the
	// first fields, and it replays without the topic frame) and which rule
	// says whether its publisher binds (SGLang binds 0.0.0.0 too, vLLM
	// connects to it). Set sglang for an SGLang server started with
	// --kv-events-config '{"publisher": "zmq", ...}'. Default "vllm".
	EngineType string `koanf:"engine_type"`
}

// Discovery configures replicas found at run time. Every way may be used
// with the others and with static replicas; a replica id another already
// holds is skipped with a warning.
type Discovery struct {
	// DNS lists groups whose DNS name resolves to the replicas' addresses.
	// Default none.
	DNS []DNSGroup `koanf:"dns"`
	// Kubernetes watches an InferencePool's pods (or pods a selector
	// picks) through the Kubernetes API. Default off.
	Kubernetes Kubernetes `koanf:"kubernetes"`
	// File watches an endpoint file in llm-d's file-discovery format.
	// Default off.
	File EndpointFile `koanf:"file"`
}

// Kubernetes discovers replicas as llm-d's endpoint picker does: the
// Ready pods (with a pod IP and no deletion timestamp) that an
// InferencePool's spec.selector.matchLabels picks in its namespace, one
// replica per target port, named <pod>-rank-<index>, at
// <scheme>://<pod IP>:<port>. The pod annotation llm-d.ai/active-ports
// (or the older inference.networking.k8s.io/active-ports), a comma list
// of ports, narrows which target ports of a pod are live. Pod labels
// become replica labels, so decode-filter and prefill-filter see
// llm-d.ai/role. A pod that stops counting is drained. The gateway needs
// RBAC to get, list and watch pods (and inferencepools when pool_name
// names one) in the namespace. While the API cannot be reached the last
// endpoints stay. On when pool_name or endpoint_selector is set. The
// flags --pool-name, --pool-namespace, --endpoint-selector and
// --endpoint-target-ports set these keys, as llm-d's flags do.
type Kubernetes struct {
	// PoolName is the InferencePool (inference.networking.k8s.io/v1)
	// whose selector and targetPorts are watched, and followed when they
	// change; an invalid edit is refused with a warning and the last valid
	// pool kept. With endpoint_selector set no InferencePool is read and it
	// only names the pool. Default "".
	PoolName string `koanf:"pool_name"`
	// PoolNamespace is the namespace of the pool and its pods. Default "":
	// the gateway pod's own namespace (from its service account), else
	// "default".
	PoolNamespace string `koanf:"pool_namespace"`
	// EndpointSelector, when set, makes the pool from config without the
	// InferencePool CRD: the pods whose labels match every entry (as
	// matchLabels), on target_ports. Default none.
	EndpointSelector map[string]string `koanf:"endpoint_selector"`
	// TargetPorts are the ports of every pod, 1 to 8, each a replica of
	// its own (data-parallel ranks), with endpoint_selector. Without it
	// the InferencePool's spec.targetPorts are used and this must be
	// empty. Default none.
	TargetPorts []int `koanf:"target_ports"`
	// Kubeconfig is a kubeconfig file to reach the API with. Default "":
	// the in-cluster service account, else $KUBECONFIG.
	Kubeconfig string `koanf:"kubeconfig"`
	// Scheme is how the engines are reached, http or https. Default
	// "http".
	Scheme string `koanf:"scheme"`
	// Models lists the configured model names every pod serves. Default
	// none: every configured model.
	Models []string `koanf:"models"`
	// MaxConcurrency caps each replica's requests in flight, as for a
	// replica. Default 1024.
	MaxConcurrency int `koanf:"max_concurrency"`
	// MaxPending caps each replica's requests waiting for a response head,
	// as for a replica. Default 0: no cap beyond max_concurrency.
	MaxPending int `koanf:"max_pending"`
	// KVCapacityBlocks sizes each replica's cache prediction, as for a
	// replica. Default 0: reported by the engine, else
	// index.default_capacity_blocks.
	KVCapacityBlocks int `koanf:"kv_capacity_blocks"`
	// KVEventsPort, when set, is the port every pod publishes its KV
	// events on (vLLM's --kv-events-config endpoint tcp://*:PORT): each
	// replica's stream is tcp://<pod IP>:PORT, plus its rank for the
	// ranks past the first, as vLLM offsets each data-parallel rank's
	// port. Default 0: no KV events.
	KVEventsPort int `koanf:"kv_events_port"`
	// KVEventsReplayPort is the pods' replay socket port (plus the rank,
	// likewise), as kv_events_replay is for a replica. Needs
	// kv_events_port. Default 0.
	KVEventsReplayPort int `koanf:"kv_events_replay_port"`
	// EngineType is the pods' engine, vllm or sglang, as engine_type is for
	// a replica. Default "vllm".
	EngineType string `koanf:"engine_type"`
}

// On reports whether Kubernetes discovery is configured.
func (k *Kubernetes) On() bool { return k.PoolName != "" || len(k.EndpointSelector) > 0 }

// EndpointFile discovers replicas from a file in llm-d's file-discovery
// format, without Kubernetes: a YAML (or JSON) document
// endpoints: [{name, namespace, address, port, labels}], where address is
// an IPv4 address and port a string such as "8000", at most 1 MiB. Each
// entry is a replica named by its name, at <scheme>://address:port, with
// its labels as replica labels. A rewrite that cannot be read (a parse
// error, over 1 MiB) keeps the last good set, with a warning.
type EndpointFile struct {
	// Path is the file. Default "": off.
	Path string `koanf:"path"`
	// Watch rereads the file when it changes (an edit in place or a new
	// file renamed over it); false reads it once at startup. Default true.
	Watch bool `koanf:"watch"`
	// Scheme is how the engines are reached, http or https. Default
	// "http".
	Scheme string `koanf:"scheme"`
	// Models lists the configured model names every endpoint serves.
	// Default none: every configured model.
	Models []string `koanf:"models"`
	// MaxConcurrency caps each replica's requests in flight, as for a
	// replica. Default 1024.
	MaxConcurrency int `koanf:"max_concurrency"`
	// MaxPending caps each replica's requests waiting for a response head,
	// as for a replica. Default 0: no cap beyond max_concurrency.
	MaxPending int `koanf:"max_pending"`
	// KVCapacityBlocks sizes each replica's cache prediction, as for a
	// replica. Default 0: reported by the engine, else
	// index.default_capacity_blocks.
	KVCapacityBlocks int `koanf:"kv_capacity_blocks"`
	// KVEventsPort, when set, is the port every endpoint publishes its KV
	// events on: each replica's stream is tcp://<address>:PORT. Default 0:
	// no KV events.
	KVEventsPort int `koanf:"kv_events_port"`
	// KVEventsReplayPort is the endpoints' replay socket port. Needs
	// kv_events_port. Default 0.
	KVEventsReplayPort int `koanf:"kv_events_replay_port"`
	// EngineType is the endpoints' engine, vllm or sglang. Default "vllm".
	EngineType string `koanf:"engine_type"`
}

// DNSGroup is a DNS name whose addresses are each a replica, named
// <name>-<ip>-<port>. Groups are resolved before the first request and then
// every Refresh; a failed lookup keeps the last known set.
type DNSGroup struct {
	// Name names the group and prefixes its replicas' ids: letters, digits,
	// '.', '_' and '-'. Required and unique.
	Name string `koanf:"name"`
	// URL is the engines' base URL; its host is the name resolved, and its
	// port (else the scheme's) the port each address is reached on, such as
	// http://vllm.inference.svc.cluster.local:8000. Required.
	URL string `koanf:"url"`
	// Models lists the configured model names every member serves. At least
	// one is required.
	Models []string `koanf:"models"`
	// Labels are every member's labels, as for a replica. Default none.
	Labels map[string]string `koanf:"labels"`
	// Refresh is how often the name is resolved again. Default 5s, CoreDNS's
	// TTL for cluster names.
	Refresh time.Duration `koanf:"refresh"`
	// MaxConcurrency caps each member's requests in flight, as for a replica.
	// Default 1024.
	MaxConcurrency int `koanf:"max_concurrency"`
	// MaxPending caps each member's requests waiting for a response head, as
	// for a replica. Default 0: no cap beyond max_concurrency.
	MaxPending int `koanf:"max_pending"`
	// KVCapacityBlocks sizes each member's cache prediction, as for a
	// replica. Default 0: reported by the engine, else
	// index.default_capacity_blocks.
	KVCapacityBlocks int `koanf:"kv_capacity_blocks"`
	// KVEventsPort, when set, is the port every member publishes its KV
	// events on (vLLM's --kv-events-config endpoint, tcp://*:PORT): each
	// member's stream is tcp://<its address>:PORT, as kv_events is for a
	// replica. Default 0: no KV events.
	KVEventsPort int `koanf:"kv_events_port"`
	// KVEventsReplayPort is the members' replay socket port, as
	// kv_events_replay is for a replica. Needs kv_events_port. Default 0.
	KVEventsReplayPort int `koanf:"kv_events_replay_port"`
	// EngineType is the members' engine, vllm or sglang, as engine_type is
	// for a replica. Default "vllm".
	EngineType string `koanf:"engine_type"`
}

// Routing holds the routing settings shared by every model. Policies are
// round_robin, random, least_request, p2c, prefix_hash, kv_aware and
// cost_model (model/sched's registry names them). Wherever a policy is
// named (default_policy, a model's policy, a split's keys, the shadow
// lists), a scheduling profile may be named instead: a name of schedulers,
// or "scheduler" for the model's scheduler, else routing.scheduler.
type Routing struct {
	// DefaultPolicy routes models that name no policy, scheduler or split
	// when Split is empty and Scheduler unset. Default "least_request",
	// which needs neither a tokenizer nor engine metrics; cost_model is the
	// cache-aware choice.
	DefaultPolicy string `koanf:"default_policy"`
	// Scheduler routes, in place of DefaultPolicy, the models that name no
	// policy, scheduler or split when Split is empty: a scheduling profile,
	// an llm-d EndpointPickerConfig document (apiVersion llm-d.ai/v1alpha1,
	// kind EndpointPickerConfig, plugins, schedulingProfiles) inline or the
	// path of a YAML file holding one, with llm-d's plugin types,
	// parameters and defaults (docs/plugins.md). Its routing name is
	// "scheduler". A file is read when the config is loaded or reloaded
	// (SIGHUP, POST /admin/reload). Default none.
	Scheduler any `koanf:"scheduler"`
	// Schedulers names further scheduling profiles, each inline or a file
	// path as for scheduler, to name wherever a policy is named: {helm:
	// ./helm.yaml} lets a split give helm a percent. A name holds letters,
	// digits, '_' and '-', and is neither a policy's nor "scheduler".
	// Default none.
	Schedulers map[string]any `koanf:"schedulers"`
	// Split gives each policy (or scheduling profile) a percent of the
	// traffic of models that set neither policy, scheduler nor split, as
	// whole numbers summing to 100, for example {cost_model: 90, kv_aware:
	// 10}. A conversation stays with one arm. Default none: Scheduler, else
	// DefaultPolicy, takes all of it.
	Split map[string]int `koanf:"split"`
	// Shadow lists policies (or scheduling profiles) that pick a replica
	// for every routed request without routing it, to compare against the
	// routing policy. Default none.
	Shadow []string `koanf:"shadow"`
	// Seed seeds the randomized policies, so a fixed seed replays the same
	// choices. Default 0: a seed drawn at startup, so gateways side by side
	// do not make the same random choices.
	Seed uint64 `koanf:"seed"`
	// EstimateDeadline bounds gathering the replicas' estimates for one
	// decision; a replica that misses it is priced from its last published
	// state. Default 2ms.
	EstimateDeadline time.Duration `koanf:"estimate_deadline"`
	// EstimateFanout caps the replicas asked for an estimate per decision.
	// In a larger fleet the routing actor asks a shortlist: the replicas
	// it recently sent the prompt's root prefix to, the conversation's, and
	// the least loaded by their published queues; the rest are priced from
	// their published state without a cache prediction. 0 asks every
	// replica. Default 16.
	EstimateFanout int `koanf:"estimate_fanout"`
	// Epsilon bounds load for cost_model: no replica gets more than
	// ceil((1 + epsilon) * (in_flight + 1) / n) requests, a replica's load
	// being this gateway's requests in flight there or, when more, its
	// engine's fresh running and waiting count (with several gateway
	// instances each sees a share of the engine's load). At least 0.
	// Default 1.0, twice a replica's share.
	Epsilon float64 `koanf:"epsilon"`
	// Kappa is the KV cache usage above which cost_model sets a replica aside
	// for prompts longer than short_prompt_tokens, unless every replica is
	// above it. In (0, 1]. Default 0.92.
	Kappa float64 `koanf:"kappa"`
	// ShortPromptTokens is the prompt length, in tokens to compute, up to
	// which kappa does not apply. Default 256.
	ShortPromptTokens int `koanf:"short_prompt_tokens"`
	// RecomputeWeight has cost_model price each replica this many times
	// the prefill it would compute beyond the replica that would compute
	// the least: the fleet's extra work, which near capacity delays every
	// request behind it. 0 prices the request's own time to first token
	// alone. At least 0. Default 2.
	RecomputeWeight float64 `koanf:"recompute_weight"`
	// SLOAdmission has cost_model refuse a request with an SLO (llm-d's
	// x-llm-d-slo-ttft-ms and x-llm-d-slo-tpot-ms headers, or its model's
	// slo) that no replica is predicted to meet, with a 500 as llm-d's
	// latency-slo-admitter answers, rather than send it to miss. A request
	// without an SLO is never refused by it. Default true.
	SLOAdmission bool `koanf:"slo_admission"`
	// SLOAdmissionWaitFactor multiplies a replica's wait when the admission
	// judges it: the larger of its queued prefill and the prefill of its
	// pending requests' uncached tokens. At least 1. Default 3.
	SLOAdmissionWaitFactor float64 `koanf:"slo_admission_wait_factor"`
	// SessionAffinity sends a request naming its conversation (x-session-id
	// or the user field) back to the conversation's last replica while the
	// load guards allow it. Default false.
	SessionAffinity bool `koanf:"session_affinity"`
	// ColdRendezvous has cost_model place a cold prompt (no replica the
	// guards allow is predicted to hold any of it, and its root not routed
	// lately: an evicted prompt goes by the estimate) on its first block's
	// rendezvous owner among the replicas within half a prefill of the
	// lowest estimate, rather than on the lowest: several gateway
	// instances in front of the same engines then place a new prefix on
	// the same replica without sharing any state. Worth it with several
	// instances without KV events; a lone instance still pays for it under
	// load, where new prefixes no longer go to the least loaded replica
	// (W2 in the fleet simulator: hit rate 0.730 → 0.698). Default false;
	// shared_engines_rendezvous turns it on while it is needed.
	ColdRendezvous bool `koanf:"cold_rendezvous"`
	// SharedEnginesRendezvous has cost_model turn the cold rendezvous on
	// while a replica's engine is found shared with another router or
	// client (the shared_engines warning: the engine runs more requests
	// than this gateway sent it, or admits prompts while this gateway sent
	// it none), and send a prefix seen lately but predicted nowhere to its
	// owner too, since the other router most likely placed it. A lone
	// instance never finds its engines shared and pays nothing. Default
	// true.
	SharedEnginesRendezvous bool `koanf:"shared_engines_rendezvous"`
	// CostModel prices prefill for cost_model, for shadow comparisons and in
	// /admin/explain. Defaults fit the simulator's default latency model
	// (an 8B model on one 24 GB GPU); inferrail calibrate fits a real engine.
	CostModel CostModel `koanf:"cost_model"`
	// PrefixHash configures the prefix_hash policy.
	PrefixHash PrefixHash `koanf:"prefix_hash"`
	// KVAware configures the kv_aware policy.
	KVAware KVAware `koanf:"kv_aware"`
	// HotPrefix configures cost_model's replication of hot prefixes.
	HotPrefix HotPrefix `koanf:"hot_prefix"`

	// profiles are Scheduler and Schedulers decoded, and warnings every
	// scheduling profile's warnings (the models' too), by Parse.
	profiles profiles
	warnings []string
}

// CostModel holds the parameters of cost_model's estimate of time to first
// token, TTFT = W + P(u, c), with P(u, c) = a*u + b*u*(c + u/2) + d for u
// tokens to compute after c cached ones, and W the prefill queued on the
// replica plus decode_interference_secs per running request. Values are float
// seconds, at least 0.
type CostModel struct {
	// PrefillTokenSecs is a, seconds per computed token. Default 0.0001.
	PrefillTokenSecs float64 `koanf:"prefill_token_secs"`
	// PrefillPairSecs is b, seconds per pair of computed and attended
	// tokens. Default 0.0000000033.
	PrefillPairSecs float64 `koanf:"prefill_pair_secs"`
	// PrefillFixedSecs is d, seconds per prefill. Default 0.005.
	PrefillFixedSecs float64 `koanf:"prefill_fixed_secs"`
	// DecodeInterferenceSecs is the delay each running request adds to a new
	// request's prefill. Default 0.0001, the simulator's time per further
	// sequence in a decode step.
	DecodeInterferenceSecs float64 `koanf:"decode_interference_secs"`
	// DecodeTokenSecs is the time of a decode step that decodes one
	// sequence; each further one adds decode_interference_secs. It prices
	// time per output token (cost.Model.TPOT), never time to first token.
	// For now only predicted-latency-producer reads it, through each
	// replica's online fit under auto (the producer's own decodeTokenSecs
	// otherwise). Default 0.02, the simulator's decode step.
	DecodeTokenSecs float64 `koanf:"decode_token_secs"`
	// Auto calibrates a, b and d online, per replica: each replica's actor
	// fits them to the prefills it measures on ordinary traffic (a request
	// with nothing queued ahead of it, whose cache prediction held) and its
	// fit prices it, starting from the values above until it has enough
	// varied samples. A pool that mixes GPU kinds then prices each kind as
	// it runs. The scalar `cost_model: auto` is {auto: true} with the
	// defaults (under a model: with routing.cost_model's values).
	// Turning it off reverts every replica to the values above. A replica
	// whose traffic never varies enough, or whose fit stays poor, keeps
	// the configured values and raises a warning
	// (cost_model_no_spread, cost_model_fit_poor). Default false.
	Auto bool `koanf:"auto"`
}

// PrefixHash configures the prefix_hash policy.
type PrefixHash struct {
	// Blocks is how many leading full blocks of a prompt are hashed to pick
	// its replica. Default 16 (256 tokens at block size 16).
	Blocks int `koanf:"blocks"`
}

// KVAware configures the kv_aware policy, which picks the best
// cache_weight * cached / prompt - load_weight * in_flight / busiest.
type KVAware struct {
	// CacheWeight weighs the share of the prompt cached. At least 0.
	// Default 1.0.
	CacheWeight float64 `koanf:"cache_weight"`
	// LoadWeight weighs requests in flight against the busiest replica's.
	// At least 0. Default 1.0.
	LoadWeight float64 `koanf:"load_weight"`
}

// HotPrefix configures cost_model's hot prefix replication: a root prefix
// whose prefill demand needs more than Utilization of a replica gets
// ceil(demand / utilization) owners.
type HotPrefix struct {
	// Enabled turns hot prefix replication on. Default true.
	Enabled bool `koanf:"enabled"`
	// Blocks is how many leading blocks make a root prefix. Default 16.
	Blocks int `koanf:"blocks"`
	// Window is the decay window of the count-min sketch that measures
	// demand. Default 10s.
	Window time.Duration `koanf:"window"`
	// Utilization is the share of one replica's time a root prefix may need
	// before it gets another owner. In (0, 1]. Default 0.5.
	Utilization float64 `koanf:"utilization"`
}

// Health configures active health checks and passive ejection.
type Health struct {
	// Interval is how often every replica is probed at /health. Default 1s.
	Interval time.Duration `koanf:"interval"`
	// Timeout bounds one probe; at most interval. Default 500ms.
	Timeout time.Duration `koanf:"timeout"`
	// UnhealthyThreshold is how many failed probes take a replica out of
	// rotation, and how many consecutive failed requests eject it. Default 3.
	UnhealthyThreshold int `koanf:"unhealthy_threshold"`
	// EjectionBackoff is how long a first ejection lasts; each repeat
	// doubles it. Default 5s.
	EjectionBackoff time.Duration `koanf:"ejection_backoff"`
	// MaxEjectionBackoff caps the doubled ejection; at least
	// ejection_backoff. Default 1m.
	MaxEjectionBackoff time.Duration `koanf:"max_ejection_backoff"`
	// MaxEjectionPercent caps the percent of a model's healthy replicas that
	// failed requests may eject, so requests that fail everywhere cannot
	// empty the pool. In [0, 100]. Default 50.
	MaxEjectionPercent int `koanf:"max_ejection_percent"`
}

// Retry configures retries, which happen only before the first response
// byte reaches the client.
type Retry struct {
	// MaxAttempts is the most attempts per request, the first included;
	// 1 turns retries off. Default 3.
	MaxAttempts int `koanf:"max_attempts"`
	// Backoff is the wait before the first retry, doubling on each further
	// one, within server.request_timeout. 0 retries at once. Default 25ms.
	Backoff time.Duration `koanf:"backoff"`
}

// FlowControl configures the admission queue, after llm-d's flow
// controller. When enabled, a request waits in its model's queue while
// every replica of the model is at its max_concurrency or max_pending
// cap, or while the saturation detector finds the model's pool saturated;
// a request never waits while a replica has room and the pool is not
// saturated. Waiting requests are held in priority bands (a higher band
// always leaves first), their flows within a band share by fairness, and
// each flow's requests leave by ordering. A request's priority is its
// x-llm-d-inference-objective header's in objectives, else its tenant's in
// tenant_priorities, else default_priority; a negative priority is
// sheddable: refused with 429 while the pool is saturated. Its flow is its
// x-llm-d-inference-fairness-id header, else its tenant. Refusals carry
// llm-d's x-llm-d-request-dropped-reason: 429 rejected-saturated (the
// queue is full, or a sheddable request met a saturated pool), 429
// rejected-ttl-expired (max_wait passed), 429 evicted-queue-pressure
// (evicted by higher-priority work), 503 rejected-no-endpoints (no healthy
// replica) and 503 rejected-shutting-down; each with Retry-After. Live: a
// reload changes every key for the requests that follow, and the policies
// of the requests waiting.
//
// An EndpointPickerConfig in routing.scheduler carries its flow control
// over, so that an llm-d config works unchanged: featureGates
// [flowControl] turns the queue on; its flowControl block's maxRequests
// sets max_queued, defaultRequestTTL max_wait, the bands' fairness and
// ordering policy plugins fairness and ordering (one each for every band:
// the first the document names), enableEviction eviction, and
// saturationDetector's plugin (or the deprecated top-level
// saturationDetector's) saturation_detector; each key the document sets
// replaces this section's. What has no equivalent (maxBytes, per-band
// bounds, noEndpointRequestTTL, usageLimitPolicyPluginRef) is warned about
// at load.
type FlowControl struct {
	// Enabled turns the queue on. Default false: a full fleet answers 503.
	Enabled bool `koanf:"enabled"`
	// MaxQueued is the most requests waiting per model, across its bands;
	// one more is answered 429 rejected-saturated, unless eviction makes
	// room. At least 1. Default 1024.
	MaxQueued int `koanf:"max_queued"`
	// MaxWait is the longest a request waits before it is answered 429
	// rejected-ttl-expired (within server.request_timeout): llm-d's
	// defaultRequestTTL. Default 5s.
	MaxWait time.Duration `koanf:"max_wait"`
	// Fairness shares a band among its flows: global-strict-fairness-policy
	// (one queue across flows, llm-d's default) or
	// round-robin-fairness-policy (flows take turns, so one tenant's burst
	// cannot starve the others). Default "global-strict-fairness-policy".
	Fairness string `koanf:"fairness"`
	// Ordering orders a flow's requests: fcfs-ordering-policy (by arrival),
	// edf-ordering-policy (earliest deadline first, the deadline being
	// when max_wait or server.request_timeout would end the wait) or
	// slo-deadline-ordering-policy (earliest first token due: arrival plus
	// the x-llm-d-slo-ttft-ms header, requests without one last). Default
	// "fcfs-ordering-policy".
	Ordering string `koanf:"ordering"`
	// DefaultPriority is the priority of a request whose objective and
	// tenant name none. Default 0.
	DefaultPriority int `koanf:"default_priority"`
	// Objectives maps x-llm-d-inference-objective values (InferenceObjective
	// names) to priorities; an objective not listed takes the tenant's
	// priority. Default none.
	Objectives map[string]int `koanf:"objectives"`
	// TenantPriorities maps tenants (auth.api_keys) to their default
	// priority. Default none.
	TenantPriorities map[string]int `koanf:"tenant_priorities"`
	// Eviction lets a full queue make room for a request by evicting the
	// newest waiting request of the lowest sheddable band below its
	// priority, answered 429 evicted-queue-pressure. Default false, as
	// llm-d's enableEviction.
	Eviction bool `koanf:"eviction"`
	// SaturationDetector says when a model's pool is saturated.
	SaturationDetector SaturationDetector `koanf:"saturation_detector"`
}

// SaturationDetector configures the saturation detector: llm-d's
// utilization-detector, on the engines' own reports (load), or its
// concurrency-detector, on the gateway's counts of requests in flight.
// The pool is saturated when the mean score of its healthy replicas is at
// least 1 + headroom.
type SaturationDetector struct {
	// Type is utilization-detector or concurrency-detector. Default
	// "utilization-detector".
	Type string `koanf:"type"`
	// QueueDepthThreshold is the engine's waiting queue that scores 1
	// (utilization-detector). At least 1. Default 5, llm-d's.
	QueueDepthThreshold int `koanf:"queue_depth_threshold"`
	// KVCacheUtilThreshold is the KV cache use that scores 1
	// (utilization-detector). In (0, 1]. Default 0.8, llm-d's.
	KVCacheUtilThreshold float64 `koanf:"kv_cache_util_threshold"`
	// MetricsStalenessThreshold is the age past which a replica's report
	// scores 1, as does a replica without one: stale metrics count as
	// saturated, as in llm-d (utilization-detector). Keep it above
	// load.scrape_interval. Default 200ms, llm-d's.
	MetricsStalenessThreshold time.Duration `koanf:"metrics_staleness_threshold"`
	// MaxConcurrency is the requests in flight per replica that score 1
	// (concurrency-detector); llm-d suggests about 110% of the engine's
	// batch size. At least 1. Default 100, llm-d's.
	MaxConcurrency int `koanf:"max_concurrency"`
	// Headroom is the share over a score of 1 tolerated before the pool is
	// saturated. At least 0. Default 0.
	Headroom float64 `koanf:"headroom"`
}

// LoadSignals configures scraping the engines' Prometheus pages. (The YAML
// section is load; the type is named apart from the Load function.)
type LoadSignals struct {
	// ScrapeInterval is how often every replica is scraped. Default 100ms.
	ScrapeInterval time.Duration `koanf:"scrape_interval"`
	// ScrapeTimeout bounds one scrape. Default 100ms.
	ScrapeTimeout time.Duration `koanf:"scrape_timeout"`
	// MaxAge is the age past which a report is treated as missing and
	// routing falls back to the gateway's own counts; more than
	// scrape_interval. Default 250ms.
	MaxAge time.Duration `koanf:"max_age"`
}

// Tokenizer configures tokenization at the edge.
type Tokenizer struct {
	// Workers is the size of the pool that tokenizes bodies over 1 KiB.
	// Default 0: one per CPU the Go runtime uses (GOMAXPROCS).
	Workers int `koanf:"workers"`
	// MaxWait is how long a request may wait for a worker before it is
	// routed without a prediction. Default 50ms.
	MaxWait time.Duration `koanf:"max_wait"`
	// CacheTokens caps the tokens kept per model in the cache of repeated
	// prompt pieces (system prompts, earlier turns); 0 turns it off.
	// Default 1000000.
	CacheTokens int `koanf:"cache_tokens"`
}

// Index configures the KV index.
type Index struct {
	// DefaultCapacityBlocks sizes the prediction of a replica that sets no
	// kv_capacity_blocks and whose engine reports none. Default 16384.
	DefaultCapacityBlocks int `koanf:"default_capacity_blocks"`
	// WarmStartFrom lists peer gateway instances' admin URLs
	// (http://gateway-0:9090), asked in turn at startup, before the gateway
	// serves, for GET /admin/index/snapshot until one answers: each replica
	// the peer also routes to starts with the peer's index and KV event
	// mapping, so the new instance predicts as the peer does from its first
	// request. The request carries the token of auth.admin.token_file, as
	// the peers share it. When none can be read the index starts cold, and
	// every replica shows the index_warm_start_failed warning. Default
	// none: start cold.
	WarmStartFrom []string `koanf:"warm_start_from"`
	// WarmStartDNS is an admin URL whose host name lists the peers
	// (http://inferrail-peers.ns.svc:9090, a Kubernetes headless Service):
	// at startup every address it resolves to is asked in turn, after
	// WarmStartFrom, as a peer of its own. This instance's own address
	// answers nothing yet and is passed over. Default none.
	WarmStartDNS string `koanf:"warm_start_dns"`
}

// KVEvents configures the exact mode: how replicas whose engines publish KV
// events (kv_events, kv_events_port) predict from them, and when they stop
// trusting them.
type KVEvents struct {
	// SpeculativeTTL is how long the blocks of a request just routed to a
	// replica in exact mode count as cached there before the engine's own
	// event confirms them (llm-d's speculativeTTL): the engine announces a
	// prompt's blocks only once it has computed them, and meanwhile a second
	// request for the same prefix must see them placed. An entry the engine
	// has not confirmed by then is dropped. 0 predicts from the events
	// alone. Default 2s, llm-d's.
	SpeculativeTTL time.Duration `koanf:"speculative_ttl"`
	// MaxSilence is how long a replica in exact mode may receive no batch
	// after its engine completed a request that must have stored blocks,
	// before it falls back to the approximate index (fed by routing
	// decisions, as without events) until the events resume and a resync
	// completes. A lost batch the replay cannot recover and a subscription
	// that fails fall back at once. Default 2s.
	MaxSilence time.Duration `koanf:"max_silence"`
}

// Observability configures traces and the decision and shadow logs.
type Observability struct {
	// OTLPEndpoint is the OTLP/HTTP trace collector, http or https; a bare
	// address such as http://collector:4318 gets the standard /v1/traces
	// path. Default "": no spans are created.
	OTLPEndpoint string `koanf:"otlp_endpoint"`
	// TraceSampleRatio is the share of requests traced, in [0, 1]. Default
	// 1.0, OpenTelemetry's default; lower it for high request rates.
	TraceSampleRatio float64 `koanf:"trace_sample_ratio"`
	// DecisionLog writes sampled routing decisions as JSON lines.
	DecisionLog DecisionLog `koanf:"decision_log"`
	// RequestLog writes one line per request in the Mooncake trace format,
	// for replay.
	RequestLog RequestLog `koanf:"request_log"`
	// ShadowLog is the file every config generation and shadow decision is
	// written to as JSON lines, for offline replay. Default "": off.
	ShadowLog string `koanf:"shadow_log"`
	// UsageForAccuracy is how the gateway gets the engine's cached tokens
	// of a streamed request whose client did not ask for usage:
	// UsageAsSent (default) leaves the request alone, and its prediction
	// counts as unknown; UsageInject adds stream_options.include_usage to
	// the engine request and strips the usage chunk from that client's
	// stream. inferrail serve only.
	UsageForAccuracy string `koanf:"usage_for_accuracy"`
}

// The values of observability.usage_for_accuracy.
const (
	UsageAsSent = "as_sent"
	UsageInject = "inject"
)

// DecisionLog configures the decision log. Prompts are never logged.
type DecisionLog struct {
	// Path is the JSON lines file; required when sample_rate is above 0.
	// Default "".
	Path string `koanf:"path"`
	// SampleRate is the share of requests whose decisions are logged, in
	// [0, 1]. Default 0: off.
	SampleRate float64 `koanf:"sample_rate"`
}

// RequestLog configures the request log: one JSON line per request, the
// Mooncake trace's fields (timestamp, input_length, output_length,
// hash_ids) and the gateway's (docs/request-log.md), for inferrail whatif,
// aiperf or Dynamo's replay. It holds no text and no token id. Restart to
// change.
type RequestLog struct {
	// Path is the JSON lines file. One already there at start is moved
	// aside first, as at a rotation, so that a file holds one run's
	// numbering of hash ids. Default "": off.
	Path string `koanf:"path"`
	// SampleRate is the share of requests logged, in [0, 1], chosen by
	// conversation (x-session-id or the body's user; a request naming
	// none by its request id), so that a conversation is logged whole.
	// Default 1.
	SampleRate float64 `koanf:"sample_rate"`
	// BlockSize is tokens per hash id; a multiple of every model's
	// block_size. Default 512, Mooncake's.
	BlockSize int `koanf:"block_size"`
	// MaxBytes rotates the file once it holds this many bytes: path moves
	// to path.1 (path.1 to path.2...) and a new path starts. 0: never.
	// Default 1073741824 (1 GiB).
	MaxBytes int64 `koanf:"max_bytes"`
	// MaxFiles is how many files are kept when rotating, path included;
	// the oldest goes. Default 8.
	MaxFiles int `koanf:"max_files"`
}

// Logging configures the gateway's own log.
type Logging struct {
	// Level is the least severe level logged: debug, info, warn or error.
	// Default "info".
	Level string `koanf:"level"`
	// Format is text or json. Default "text".
	Format string `koanf:"format"`
	// LogPrompts lets request bodies into the log. Default false. Live.
	LogPrompts bool `koanf:"log_prompts"`
}

// Default returns a new Config holding every default. It has no models or
// replicas, so it is not valid on its own.
func Default() *Config {
	return &Config{
		Server: Server{
			Listen:            "127.0.0.1:8080",
			AdminListen:       "127.0.0.1:9090",
			RequestTimeout:    5 * time.Minute,
			HeaderReadTimeout: 30 * time.Second,
			ShutdownTimeout:   30 * time.Second,
			ReloadInterval:    2 * time.Second,
			MaxBodyBytes:      16 << 20,
		},
		ExtProc: ExtProc{Listen: ":9002", HealthListen: ":9003", AdminListen: ":9090"},
		Upstream: Upstream{
			DialTimeout: 2 * time.Second,
		},
		Discovery: Discovery{
			Kubernetes: Kubernetes{Scheme: "http", MaxConcurrency: 1024, EngineType: string(kvevent.EngineVLLM)},
			File:       EndpointFile{Watch: true, Scheme: "http", MaxConcurrency: 1024, EngineType: string(kvevent.EngineVLLM)},
		},
		Routing: Routing{
			DefaultPolicy:           "least_request",
			SharedEnginesRendezvous: true,
			EstimateDeadline:        2 * time.Millisecond,
			EstimateFanout:          16,
			Epsilon:                 1.0,
			Kappa:                   0.92,
			ShortPromptTokens:       256,
			RecomputeWeight:         2,
			SLOAdmission:            true,
			SLOAdmissionWaitFactor:  3,
			CostModel: CostModel{
				PrefillTokenSecs:       0.0001,
				PrefillPairSecs:        0.0000000033,
				PrefillFixedSecs:       0.005,
				DecodeInterferenceSecs: 0.0001,
				DecodeTokenSecs:        0.02,
			},
			PrefixHash: PrefixHash{Blocks: 16},
			KVAware:    KVAware{CacheWeight: 1.0, LoadWeight: 1.0},
			HotPrefix: HotPrefix{
				Enabled:     true,
				Blocks:      16,
				Window:      10 * time.Second,
				Utilization: 0.5,
			},
		},
		Health: Health{
			Interval:           time.Second,
			Timeout:            500 * time.Millisecond,
			UnhealthyThreshold: 3,
			EjectionBackoff:    5 * time.Second,
			MaxEjectionBackoff: time.Minute,
			MaxEjectionPercent: 50,
		},
		Retry: Retry{
			MaxAttempts: 3,
			Backoff:     25 * time.Millisecond,
		},
		FlowControl: FlowControl{
			MaxQueued: 1024,
			MaxWait:   5 * time.Second,
			Fairness:  flow.FairnessGlobalStrict,
			Ordering:  flow.OrderingFCFS,
			SaturationDetector: SaturationDetector{
				Type:                      flow.DetectorUtilization,
				QueueDepthThreshold:       flow.DefaultUtilization.QueueDepthThreshold,
				KVCacheUtilThreshold:      flow.DefaultUtilization.KVCacheUtilThreshold,
				MetricsStalenessThreshold: flow.DefaultUtilization.MetricsStalenessThreshold,
				MaxConcurrency:            flow.DefaultConcurrency.MaxConcurrency,
			},
		},
		Load: LoadSignals{
			ScrapeInterval: 100 * time.Millisecond,
			ScrapeTimeout:  100 * time.Millisecond,
			MaxAge:         250 * time.Millisecond,
		},
		Tokenizer: Tokenizer{
			MaxWait:     50 * time.Millisecond,
			CacheTokens: 1_000_000,
		},
		Index:    Index{DefaultCapacityBlocks: 16384},
		KVEvents: KVEvents{SpeculativeTTL: 2 * time.Second, MaxSilence: 2 * time.Second},
		Observability: Observability{
			TraceSampleRatio: 1.0,
			UsageForAccuracy: UsageAsSent,
			RequestLog:       RequestLog{SampleRate: 1, BlockSize: 512, MaxBytes: 1 << 30, MaxFiles: 8},
		},
		Logging: Logging{
			Level:  "info",
			Format: "text",
		},
		Auth: defaultAuth(),
		TLS:  defaultTLS(),
	}
}

// defaultModel, defaultReplica and defaultDNSGroup hold the defaults of list
// entries, which the file's entries are laid over.
func defaultModel() Model {
	return Model{ChatTemplateContentFormat: "auto", AnthropicInlineSystem: "preserve", BlockSize: 16}
}

func defaultReplica() Replica {
	return Replica{MaxConcurrency: 1024, EngineType: string(kvevent.EngineVLLM)}
}

func defaultDNSGroup() DNSGroup {
	return DNSGroup{Refresh: 5 * time.Second, MaxConcurrency: 1024, EngineType: string(kvevent.EngineVLLM)}
}

// ModelRouting is how one model is routed, with the routing section's
// values filled in where the model sets none.
type ModelRouting struct {
	// Split maps each policy (or scheduling profile, see Profile) routing
	// the model to its percent of the traffic; never empty, and the
	// percents sum to 100.
	Split map[string]int
	// Shadow lists the shadow policies; possibly empty.
	Shadow []string
	// CostModel prices prefill for the model.
	CostModel CostModel
}

// RoutingFor returns how model m is routed: its own split, else its own
// scheduler or policy, else routing.split, else routing.scheduler, else
// routing.default_policy; its own shadow list if set, else routing.shadow;
// its own cost model if set, else routing.cost_model. A scheduler is named
// SchedulerName. The result's map and slice are fresh.
func (c *Config) RoutingFor(m *Model) ModelRouting {
	var r ModelRouting
	switch {
	case len(m.Split) > 0:
		r.Split = copyMap(m.Split)
	case m.Scheduler != nil:
		r.Split = map[string]int{SchedulerName: 100}
	case m.Policy != "":
		r.Split = map[string]int{m.Policy: 100}
	case len(c.Routing.Split) > 0:
		r.Split = copyMap(c.Routing.Split)
	case c.Routing.Scheduler != nil:
		r.Split = map[string]int{SchedulerName: 100}
	default:
		r.Split = map[string]int{c.Routing.DefaultPolicy: 100}
	}
	if m.Shadow != nil {
		r.Shadow = append([]string{}, m.Shadow...)
	} else {
		r.Shadow = append([]string{}, c.Routing.Shadow...)
	}
	if m.CostModel != nil {
		r.CostModel = *m.CostModel
	} else {
		r.CostModel = c.Routing.CostModel
	}
	return r
}

// Model returns the model named name, or whose aliases include it.
func (c *Config) Model(name string) (*Model, bool) {
	for i := range c.Models {
		m := &c.Models[i]
		if m.Name == name {
			return m, true
		}
	}
	for i := range c.Models {
		m := &c.Models[i]
		for _, a := range m.Aliases {
			if a == name {
				return m, true
			}
		}
	}
	return nil, false
}

func copyMap(m map[string]int) map[string]int {
	out := make(map[string]int, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// NewModel returns a model entry for name with every other key at its
// default, for configs built in code (inferrail launch, tests).
func NewModel(name string, aliases ...string) Model {
	m := defaultModel()
	m.Name, m.Aliases = name, aliases
	return m
}

// NewReplica returns a replica entry with every other key at its default.
func NewReplica(id, url string, models ...string) Replica {
	r := defaultReplica()
	r.ID, r.URL, r.Models = id, url, models
	return r
}

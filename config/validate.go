package config

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/inferrail/inferrail/model/flow"
	"github.com/inferrail/inferrail/model/kvevent"
	"github.com/inferrail/inferrail/model/sched"
)

// Validate reports every problem with c at once, as errors.Join of *KeyError
// values each naming its key (the first 100, then a count of the rest), or
// nil when c is valid. Load and Parse call it; code that builds a Config
// itself should too.
func (c *Config) Validate() error {
	errs, more := c.validate(nil, maxProblems)
	if more > 0 {
		errs = append(errs, moreProblems(more))
	}
	return errors.Join(errs...)
}

// validate returns the first limit problems about keys that skip (if not
// nil) lets through, and counts the rest.
func (c *Config) validate(skip func(key string) bool, limit int) (errs []error, more int) {
	v := c.check(skip, limit)
	return v.errs, v.more
}

// check validates c, decoding its scheduling profiles: the validator
// holds the problems, and the profiles and warnings for install.
func (c *Config) check(skip func(key string) bool, limit int) *validator {
	v := &validator{skip: skip, limit: limit}
	v.server(&c.Server)
	v.extProc(&c.ExtProc)
	v.positive("upstream.dial_timeout", c.Upstream.DialTimeout)
	v.profiles = v.schedulers(&c.Routing)
	names := routingNames{named: sortedKeys(c.Routing.Schedulers), scheduler: c.Routing.Scheduler != nil}
	models := v.models(c.Models, names)
	v.autoCostModels(c)
	if len(c.Replicas) == 0 && len(c.Discovery.DNS) == 0 && !c.Discovery.Kubernetes.On() && c.Discovery.File.Path == "" {
		v.add("replicas", "at least one replica, discovery.dns group, discovery.kubernetes pool or discovery.file is required")
	}
	ids, streams := map[string]string{}, map[string]string{}
	for i := range c.Replicas {
		r := &c.Replicas[i]
		p := index("replicas", i)
		v.id(p+".id", r.ID, ids)
		v.url(p+".url", r.URL, true)
		v.servedModels(p+".models", r.Models, models)
		v.labels(p+".labels", r.Labels)
		v.limits(p, r.MaxConcurrency, r.MaxPending, r.KVCapacityBlocks)
		v.kvEvents(p, r, streams)
		v.engineType(p+".engine_type", r.EngineType)
	}
	groups := map[string]string{}
	for i := range c.Discovery.DNS {
		g := &c.Discovery.DNS[i]
		p := index("discovery.dns", i)
		v.id(p+".name", g.Name, groups)
		v.url(p+".url", g.URL, true)
		v.servedModels(p+".models", g.Models, models)
		v.labels(p+".labels", g.Labels)
		v.positive(p+".refresh", g.Refresh)
		v.limits(p, g.MaxConcurrency, g.MaxPending, g.KVCapacityBlocks)
		v.eventPorts(p, g.KVEventsPort, g.KVEventsReplayPort)
		v.engineType(p+".engine_type", g.EngineType)
	}
	v.kubernetes(&c.Discovery.Kubernetes, models)
	v.endpointFile(&c.Discovery.File, models)
	v.routing(&c.Routing, names)
	v.health(&c.Health)
	v.atLeast("retry.max_attempts", c.Retry.MaxAttempts, 1)
	v.nonNegative("retry.backoff", c.Retry.Backoff)
	v.flowControl(&c.FlowControl)
	v.rateLimits(&c.RateLimits)
	v.load(&c.Load)
	v.atLeast("tokenizer.workers", c.Tokenizer.Workers, 0)
	v.positive("tokenizer.max_wait", c.Tokenizer.MaxWait)
	v.atLeast("tokenizer.cache_tokens", c.Tokenizer.CacheTokens, 0)
	v.atLeast("index.default_capacity_blocks", c.Index.DefaultCapacityBlocks, 1)
	for i, u := range c.Index.WarmStartFrom {
		v.url(fmt.Sprintf("index.warm_start_from[%d]", i), u, true)
	}
	if c.Index.WarmStartDNS != "" {
		v.url("index.warm_start_dns", c.Index.WarmStartDNS, true)
	}
	v.nonNegative("kv_events.speculative_ttl", c.KVEvents.SpeculativeTTL)
	v.positive("kv_events.max_silence", c.KVEvents.MaxSilence)
	v.observability(&c.Observability)
	v.requestLog(&c.Observability.RequestLog, c.Models, &c.Observability)
	v.oneOf("logging.level", c.Logging.Level, "debug", "info", "warn", "error")
	v.oneOf("logging.format", c.Logging.Format, "text", "json")
	v.auth(&c.Auth, &c.TLS, models)
	v.tls(&c.TLS)
	return v
}

// install keeps what check decoded in c, which Parse has just built.
func (c *Config) install(v *validator) {
	c.Routing.profiles = v.profiles
	if p := v.profiles[SchedulerName]; p != nil {
		c.FlowControl.apply(p.FlowControl())
	}
	for i := range c.Models {
		if i < len(v.modelProfiles) {
			c.Models[i].scheduler = v.modelProfiles[i]
		}
	}
	c.Routing.warnings = v.warnings
}

type validator struct {
	skip  func(key string) bool
	limit int
	errs  []error
	more  int

	// What check decoded: routing's scheduling profiles, each model's
	// scheduler (nil for none) and the profiles' warnings.
	profiles      profiles
	modelProfiles []*sched.Config
	warnings      []string
}

func (v *validator) add(key, format string, args ...any) {
	switch {
	case v.skip != nil && v.skip(key):
	case len(v.errs) >= v.limit:
		v.more++
	default:
		v.errs = append(v.errs, &KeyError{Key: key, Err: fmt.Errorf(format, args...)})
	}
}

func (v *validator) extProc(e *ExtProc) {
	v.listen("ext_proc.listen", e.Listen)
	v.listen("ext_proc.health_listen", e.HealthListen)
	v.listen("ext_proc.admin_listen", e.AdminListen)
	if e.Listen == e.HealthListen && !strings.HasSuffix(e.Listen, ":0") {
		v.add("ext_proc.health_listen", "must differ from ext_proc.listen (%s)", e.Listen)
	}
}

func (v *validator) server(s *Server) {
	v.listen("server.listen", s.Listen)
	v.listen("server.admin_listen", s.AdminListen)
	if s.Listen == s.AdminListen && !strings.HasSuffix(s.Listen, ":0") {
		v.add("server.admin_listen", "must differ from server.listen (%s)", s.Listen)
	}
	v.positive("server.request_timeout", s.RequestTimeout)
	v.positive("server.header_read_timeout", s.HeaderReadTimeout)
	v.positive("server.shutdown_timeout", s.ShutdownTimeout)
	v.nonNegative("server.reload_interval", s.ReloadInterval)
	if s.MaxBodyBytes < 1 {
		v.add("server.max_body_bytes", "must be at least 1, got %d", s.MaxBodyBytes)
	}
}

// models checks the model list, decoding each model's scheduler, and
// returns what each configured name and alias refers to. names are the
// routing names every model may give.
func (v *validator) models(models []Model, names routingNames) map[string]string {
	if len(models) == 0 {
		v.add("models", "at least one model is required")
	}
	// owner maps every name and alias to the path that introduced it.
	owner := map[string]string{}
	refs := map[string]string{}
	for i := range models {
		m := &models[i]
		p := index("models", i)
		switch prev, dup := owner[m.Name]; {
		case m.Name == "":
			v.add(p+".name", "required")
		case dup:
			v.add(p+".name", "%q is already %s", m.Name, prev)
		default:
			owner[m.Name] = p + ".name"
			refs[m.Name] = m.Name
		}
	}
	for i := range models {
		m := &models[i]
		p := index("models", i)
		for j, a := range m.Aliases {
			ap := index(p+".aliases", j)
			switch prev, dup := owner[a]; {
			case a == "":
				v.add(ap, "must not be empty")
			case dup:
				v.add(ap, "%q is already %s", a, prev)
			default:
				owner[a] = ap
				refs[a] = "alias:" + m.Name
			}
		}
		own := names
		var sc *sched.Config
		if m.Scheduler != nil {
			own.scheduler = true
			sc = v.profile(p+".scheduler", SchedulerName, m.Scheduler)
			if m.Policy != "" {
				v.add(p+".scheduler", "set scheduler or policy, not both (policy is %q)", m.Policy)
			}
		}
		v.modelProfiles = append(v.modelProfiles, sc)
		if m.Policy != "" {
			v.policy(p+".policy", m.Policy, own)
		}
		v.split(p+".split", m.Split, own)
		v.policies(p+".shadow", m.Shadow, own)
		if m.CostModel != nil {
			v.costModel(p+".cost_model", m.CostModel)
		}
		if rest, ok := strings.CutPrefix(m.Tokenizer, "builtin:"); ok && rest != "sim" {
			v.add(p+".tokenizer", "unknown builtin tokenizer %q; the only one is builtin:sim", m.Tokenizer)
		}
		v.oneOf(p+".chat_template_content_format", m.ChatTemplateContentFormat, "auto", "string", "openai")
		v.oneOf(p+".anthropic_inline_system", m.AnthropicInlineSystem, "preserve", "fold")
		v.atLeast(p+".block_size", m.BlockSize, 1)
		v.slo(p+".slo", m.SLO)
	}
	return refs
}

// servedModels checks the models a replica or DNS group serves.
func (v *validator) servedModels(key string, names []string, refs map[string]string) {
	if len(names) == 0 {
		v.add(key, "at least one model is required")
	}
	seen := map[string]bool{}
	for i, n := range names {
		p := index(key, i)
		ref, ok := refs[n]
		switch {
		case !ok:
			v.add(p, "%q is not a configured model", n)
		case strings.HasPrefix(ref, "alias:"):
			v.add(p, "%q is an alias; list the model's name, %q", n, strings.TrimPrefix(ref, "alias:"))
		case seen[n]:
			v.add(p, "%q is listed twice", n)
		}
		seen[n] = true
	}
}

// id checks a replica id or DNS group name: required, unique among seen,
// and made of characters safe in headers, metric labels and logs.
func (v *validator) id(key, id string, seen map[string]string) {
	if id == "" {
		v.add(key, "required")
		return
	}
	if len(id) > 253 {
		v.add(key, "longer than 253 characters")
		return
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			v.add(key, "%q may hold only letters, digits, '.', '_' and '-'", id)
			return
		}
	}
	if prev, dup := seen[id]; dup {
		v.add(key, "%q is already %s", id, prev)
		return
	}
	seen[id] = key
}

// url checks an http or https URL with a host and no query, fragment or
// credentials.
func (v *validator) url(key, raw string, required bool) {
	if raw == "" {
		if required {
			v.add(key, "required")
		}
		return
	}
	u, err := url.Parse(raw)
	if err != nil {
		v.add(key, "invalid URL: %v", unwrapURLError(err))
		return
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		v.add(key, "%q: want an http or https URL, such as http://127.0.0.1:8000", raw)
	case u.Hostname() == "":
		v.add(key, "%q has no host", raw)
	case u.User != nil:
		v.add(key, "%q must not hold credentials", raw)
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		v.add(key, "%q must not have a query or fragment", raw)
	}
}

func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// listen checks a host:port listen address.
func (v *validator) listen(key, addr string) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		v.add(key, "%q: want host:port, such as 127.0.0.1:8080", addr)
		return
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		v.add(key, "%q: port must be a number from 0 to 65535", addr)
		return
	}
	if strings.ContainsAny(host, " /\t") {
		v.add(key, "%q: invalid host", addr)
	}
}

func (v *validator) limits(p string, maxConcurrency, maxPending, kvCapacity int) {
	v.atLeast(p+".max_concurrency", maxConcurrency, 1)
	switch {
	case maxPending < 0:
		v.add(p+".max_pending", "must be at least 0, got %d", maxPending)
	case maxConcurrency >= 1 && maxPending > maxConcurrency:
		v.add(p+".max_pending", "%d is more than max_concurrency (%d)", maxPending, maxConcurrency)
	}
	v.atLeast(p+".kv_capacity_blocks", kvCapacity, 0)
}

// kvEvents checks a replica's KV event stream settings. Two replicas on
// one stream would mirror one engine into both predictions, so a stream
// is taken once.
func (v *validator) kvEvents(p string, r *Replica, seen map[string]string) {
	if r.KVEvents == "" {
		if r.KVEventsReplay != "" {
			v.add(p+".kv_events_replay", "needs kv_events")
		}
		if r.KVEventsBind {
			v.add(p+".kv_events_bind", "needs kv_events")
		}
		return
	}
	if v.zmqEndpoint(p+".kv_events", r.KVEvents, r.KVEventsBind) {
		if prev, dup := seen[r.KVEvents]; dup {
			v.add(p+".kv_events", "%q is already %s", r.KVEvents, prev)
		} else {
			seen[r.KVEvents] = p + ".kv_events"
		}
	}
	if r.KVEventsReplay != "" {
		v.zmqEndpoint(p+".kv_events_replay", r.KVEventsReplay, false)
	}
}

// eventPorts checks the KV event ports of a DNS group or discovery
// source, under p.
func (v *validator) eventPorts(p string, port, replay int) {
	for _, x := range []struct {
		key  string
		port int
	}{{".kv_events_port", port}, {".kv_events_replay_port", replay}} {
		if x.port < 0 || x.port > 65535 {
			v.add(p+x.key, "%d: want a port from 1 to 65535, or 0 for none", x.port)
		}
	}
	if replay != 0 && port == 0 {
		v.add(p+".kv_events_replay_port", "needs kv_events_port")
	}
}

// MaxTargetPorts is how many target ports a pool may have, as the
// InferencePool CRD allows (and llm-d's --endpoint-target-ports).
const MaxTargetPorts = 8

// kubernetes checks discovery.kubernetes.
func (v *validator) kubernetes(k *Kubernetes, models map[string]string) {
	const p = "discovery.kubernetes"
	if !k.On() {
		if len(k.TargetPorts) > 0 || k.PoolNamespace != "" || k.Kubeconfig != "" || len(k.Models) > 0 {
			v.add(p, "set pool_name or endpoint_selector to turn it on")
		}
		return
	}
	if k.PoolName != "" && (len(k.PoolName) > 253 || !labelPrefix(k.PoolName)) {
		v.add(p+".pool_name", "%q: an InferencePool name is a DNS subdomain: lower-case letters, digits, '-' and '.'", k.PoolName)
	}
	if k.PoolNamespace != "" && (len(k.PoolNamespace) > 63 || strings.Contains(k.PoolNamespace, ".") || !labelPrefix(k.PoolNamespace)) {
		v.add(p+".pool_namespace", "%q: a namespace is a DNS label: lower-case letters, digits and '-'", k.PoolNamespace)
	}
	v.labels(p+".endpoint_selector", k.EndpointSelector)
	switch {
	case len(k.EndpointSelector) == 0 && len(k.TargetPorts) > 0:
		v.add(p+".target_ports", "the InferencePool's spec.targetPorts are used; set endpoint_selector to make the pool from config")
	case len(k.EndpointSelector) > 0 && (len(k.TargetPorts) < 1 || len(k.TargetPorts) > MaxTargetPorts):
		v.add(p+".target_ports", "endpoint_selector needs 1 to %d target ports, got %d", MaxTargetPorts, len(k.TargetPorts))
	}
	seen := map[int]bool{}
	for i, port := range k.TargetPorts {
		switch {
		case port < 1 || port > 65535:
			v.add(index(p+".target_ports", i), "%d: want a port from 1 to 65535", port)
		case seen[port]:
			v.add(index(p+".target_ports", i), "port %d is listed twice", port)
		}
		seen[port] = true
	}
	v.oneOf(p+".scheme", k.Scheme, "http", "https")
	v.discoveredModels(p+".models", k.Models, models)
	v.limits(p, k.MaxConcurrency, k.MaxPending, k.KVCapacityBlocks)
	v.eventPorts(p, k.KVEventsPort, k.KVEventsReplayPort)
	v.engineType(p+".engine_type", k.EngineType)
}

// endpointFile checks discovery.file.
func (v *validator) endpointFile(f *EndpointFile, models map[string]string) {
	const p = "discovery.file"
	if f.Path == "" {
		if len(f.Models) > 0 {
			v.add(p, "set path to turn it on")
		}
		return
	}
	v.oneOf(p+".scheme", f.Scheme, "http", "https")
	v.discoveredModels(p+".models", f.Models, models)
	v.limits(p, f.MaxConcurrency, f.MaxPending, f.KVCapacityBlocks)
	v.eventPorts(p, f.KVEventsPort, f.KVEventsReplayPort)
	v.engineType(p+".engine_type", f.EngineType)
}

// discoveredModels checks the models a discovery source's replicas serve:
// none means every configured model.
func (v *validator) discoveredModels(key string, names []string, refs map[string]string) {
	if len(names) > 0 {
		v.servedModels(key, names, refs)
	}
}

// zmqEndpoint checks a ZeroMQ endpoint the gateway connects to, or with
// bind listens on, and reports whether it is valid.
func (v *validator) zmqEndpoint(key, ep string, bind bool) bool {
	scheme, addr, ok := strings.Cut(ep, "://")
	switch {
	case !ok || scheme != "tcp" && scheme != "ipc":
		v.add(key, "%q: want tcp://host:port or ipc://path, such as tcp://10.0.0.10:5557", ep)
		return false
	case scheme == "ipc":
		if addr == "" {
			v.add(key, "%q: the ipc path is empty", ep)
			return false
		}
		return true
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		v.add(key, "%q: want tcp://host:port, such as tcp://10.0.0.10:5557", ep)
		return false
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		v.add(key, "%q: port must be a number from 1 to 65535", ep)
		return false
	}
	switch {
	case host == "":
		v.add(key, "%q: the host is empty", ep)
		return false
	case host == "*" && !bind:
		v.add(key, "%q: \"*\" is for listening; name the engine's address (or set kv_events_bind to listen)", ep)
		return false
	case strings.ContainsAny(host, " /\t"):
		v.add(key, "%q: invalid host", ep)
		return false
	}
	return true
}

func (v *validator) routing(r *Routing, names routingNames) {
	v.policy("routing.default_policy", r.DefaultPolicy, names)
	v.split("routing.split", r.Split, names)
	v.policies("routing.shadow", r.Shadow, names)
	v.positive("routing.estimate_deadline", r.EstimateDeadline)
	v.atLeast("routing.estimate_fanout", r.EstimateFanout, 0)
	v.nonNegativeNumber("routing.epsilon", r.Epsilon)
	v.fraction("routing.kappa", r.Kappa, false)
	v.atLeast("routing.short_prompt_tokens", r.ShortPromptTokens, 0)
	v.nonNegativeNumber("routing.recompute_weight", r.RecomputeWeight)
	if !(r.SLOAdmissionWaitFactor >= 1) || math.IsInf(r.SLOAdmissionWaitFactor, 0) {
		v.add("routing.slo_admission_wait_factor", "must be a finite number of at least 1, got %v", r.SLOAdmissionWaitFactor)
	}
	v.costModel("routing.cost_model", &r.CostModel)
	v.atLeast("routing.prefix_hash.blocks", r.PrefixHash.Blocks, 1)
	v.nonNegativeNumber("routing.kv_aware.cache_weight", r.KVAware.CacheWeight)
	v.nonNegativeNumber("routing.kv_aware.load_weight", r.KVAware.LoadWeight)
	if r.KVAware.CacheWeight == 0 && r.KVAware.LoadWeight == 0 {
		v.add("routing.kv_aware", "cache_weight and load_weight must not both be 0")
	}
	v.atLeast("routing.hot_prefix.blocks", r.HotPrefix.Blocks, 1)
	v.positive("routing.hot_prefix.window", r.HotPrefix.Window)
	v.fraction("routing.hot_prefix.utilization", r.HotPrefix.Utilization, false)
}

// policy checks a routing name: a policy, or a scheduling profile of
// names.
func (v *validator) policy(key, name string, names routingNames) {
	if !names.has(name) {
		v.add(key, "unknown policy %q; %s", name, names.want())
	}
}

func (v *validator) policies(key string, list []string, names routingNames) {
	seen := map[string]bool{}
	for i, n := range list {
		p := index(key, i)
		v.policy(p, n, names)
		if seen[n] {
			v.add(p, "%q is listed twice", n)
		}
		seen[n] = true
	}
}

func (v *validator) split(key string, split map[string]int, names routingNames) {
	if len(split) == 0 {
		return
	}
	sum := 0
	for _, name := range sortedKeys(split) {
		pct := split[name]
		v.policy(keyPath(key, name), name, names)
		if pct < 0 || pct > 100 {
			v.add(keyPath(key, name), "percent must be from 0 to 100, got %d", pct)
		}
		sum += pct
	}
	if sum != 100 {
		v.add(key, "percents sum to %d, want 100", sum)
	}
}

// labels checks replica labels as Kubernetes checks them, so that a label
// selector copied from llm-d's configs means the same here: a key is an
// optional DNS subdomain prefix and '/', then a name of at most 63
// letters, digits, '-', '_' and '.', starting and ending with a letter or
// digit; a value is empty or such a name.
func (v *validator) labels(key string, labels map[string]string) {
	for _, k := range sortedKeys(labels) {
		p := keyPath(key, k)
		prefix, name, hasPrefix := strings.Cut(k, "/")
		if !hasPrefix {
			prefix, name = "", k
		}
		switch {
		case hasPrefix && (prefix == "" || len(prefix) > 253 || !labelPrefix(prefix)):
			v.add(p, "%q: the prefix before '/' must be a DNS subdomain, such as llm-d.ai", k)
		case !labelName(name):
			v.add(p, "%q: a label name is 1 to 63 letters, digits, '-', '_' and '.', starting and ending with a letter or digit", k)
		case labels[k] != "" && !labelName(labels[k]):
			v.add(p, "value %q: a label value is empty or 1 to 63 letters, digits, '-', '_' and '.', starting and ending with a letter or digit", labels[k])
		}
	}
}

func alnum(r byte) bool { return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' }

// labelName is a Kubernetes label name or value (a qualified name's name
// part).
func labelName(s string) bool {
	if s == "" || len(s) > 63 || !alnum(s[0]) || !alnum(s[len(s)-1]) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !alnum(c) && c != '-' && c != '_' && c != '.' {
			return false
		}
	}
	return true
}

// labelPrefix is a DNS subdomain: lower-case labels of letters, digits and
// '-', separated by dots.
func labelPrefix(s string) bool {
	for _, part := range strings.Split(s, ".") {
		if part == "" || len(part) > 63 || part[0] == '-' || part[len(part)-1] == '-' {
			return false
		}
		for i := 0; i < len(part); i++ {
			if c := part[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}

func (v *validator) costModel(key string, m *CostModel) {
	for _, f := range []struct {
		name string
		val  float64
	}{
		{"prefill_token_secs", m.PrefillTokenSecs},
		{"prefill_pair_secs", m.PrefillPairSecs},
		{"prefill_fixed_secs", m.PrefillFixedSecs},
		{"decode_interference_secs", m.DecodeInterferenceSecs},
		{"decode_token_secs", m.DecodeTokenSecs},
	} {
		v.nonNegativeNumber(keyPath(key, f.name), f.val)
	}
}

func (v *validator) health(h *Health) {
	v.positive("health.interval", h.Interval)
	v.positive("health.timeout", h.Timeout)
	if h.Timeout > h.Interval && h.Interval > 0 {
		v.add("health.timeout", "%s is longer than health.interval (%s)", h.Timeout, h.Interval)
	}
	v.atLeast("health.unhealthy_threshold", h.UnhealthyThreshold, 1)
	v.positive("health.ejection_backoff", h.EjectionBackoff)
	v.positive("health.max_ejection_backoff", h.MaxEjectionBackoff)
	if h.MaxEjectionBackoff < h.EjectionBackoff && h.MaxEjectionBackoff > 0 {
		v.add("health.max_ejection_backoff", "%s is shorter than health.ejection_backoff (%s)", h.MaxEjectionBackoff, h.EjectionBackoff)
	}
	if h.MaxEjectionPercent < 0 || h.MaxEjectionPercent > 100 {
		v.add("health.max_ejection_percent", "must be from 0 to 100, got %d", h.MaxEjectionPercent)
	}
}

func (v *validator) load(l *LoadSignals) {
	v.positive("load.scrape_interval", l.ScrapeInterval)
	v.positive("load.scrape_timeout", l.ScrapeTimeout)
	v.positive("load.max_age", l.MaxAge)
	if l.MaxAge <= l.ScrapeInterval && l.MaxAge > 0 {
		v.add("load.max_age", "%s must be longer than load.scrape_interval (%s), or every report is stale before the next", l.MaxAge, l.ScrapeInterval)
	}
}

func (v *validator) observability(o *Observability) {
	v.url("observability.otlp_endpoint", o.OTLPEndpoint, false)
	v.fraction("observability.trace_sample_ratio", o.TraceSampleRatio, true)
	v.fraction("observability.decision_log.sample_rate", o.DecisionLog.SampleRate, true)
	v.oneOf("observability.usage_for_accuracy", o.UsageForAccuracy, UsageAsSent, UsageInject)
	if o.DecisionLog.SampleRate > 0 && o.DecisionLog.Path == "" {
		v.add("observability.decision_log.path", "required when sample_rate is above 0")
	}
	if o.ShadowLog != "" && o.ShadowLog == o.DecisionLog.Path {
		v.add("observability.shadow_log", "must differ from observability.decision_log.path")
	}
}

// requestLog checks observability.request_log against the models, whose
// engine block sizes its block_size must be a multiple of.
func (v *validator) requestLog(r *RequestLog, models []Model, o *Observability) {
	v.fraction("observability.request_log.sample_rate", r.SampleRate, true)
	v.atLeast("observability.request_log.block_size", r.BlockSize, 1)
	if r.MaxBytes < 0 {
		v.add("observability.request_log.max_bytes", "must not be negative, got %d", r.MaxBytes)
	}
	v.atLeast("observability.request_log.max_files", r.MaxFiles, 1)
	for _, m := range models {
		if r.BlockSize >= 1 && m.BlockSize >= 1 && r.BlockSize%m.BlockSize != 0 {
			v.add("observability.request_log.block_size", "%d is not a multiple of model %s's block_size %d", r.BlockSize, m.Name, m.BlockSize)
		}
	}
	if r.Path == "" {
		return
	}
	for _, other := range []struct{ key, path string }{
		{"observability.decision_log.path", o.DecisionLog.Path}, {"observability.shadow_log", o.ShadowLog},
	} {
		if other.path == r.Path {
			v.add("observability.request_log.path", "must differ from %s", other.key)
		}
	}
}

func (v *validator) positive(key string, d time.Duration) {
	if d <= 0 {
		v.add(key, "must be longer than 0, got %s", d)
	}
}

func (v *validator) nonNegative(key string, d time.Duration) {
	if d < 0 {
		v.add(key, "must not be negative, got %s", d)
	}
}

// slo checks a model's default objective: each measure 0 (none) or
// positive, and no longer than a header may set (flow.MaxSLO).
func (v *validator) slo(key string, s SLO) {
	for _, m := range []struct {
		name string
		d    time.Duration
	}{{"ttft", s.TTFT}, {"tpot", s.TPOT}} {
		v.nonNegative(key+"."+m.name, m.d)
		if m.d > flow.MaxSLO {
			v.add(key+"."+m.name, "must be at most %s, got %s", flow.MaxSLO, m.d)
		}
	}
}

func (v *validator) atLeast(key string, n, least int) {
	if n < least {
		v.add(key, "must be at least %d, got %d", least, n)
	}
}

// fraction checks a number in (0, 1], or in [0, 1] when zero is allowed.
func (v *validator) fraction(key string, f float64, zero bool) {
	// Written so that NaN fails too.
	switch {
	case zero && !(f >= 0 && f <= 1):
		v.add(key, "must be from 0 to 1, got %v", f)
	case !zero && !(f > 0 && f <= 1):
		v.add(key, "must be above 0 and at most 1, got %v", f)
	}
}

// nonNegativeNumber checks a finite number of at least 0.
func (v *validator) nonNegativeNumber(key string, f float64) {
	if !(f >= 0) || math.IsInf(f, 1) {
		v.add(key, "must be a finite number of at least 0, got %v", f)
	}
}

// engineType checks an engine_type: one of kvevent.Engines.
func (v *validator) engineType(key, val string) {
	var names []string
	for _, e := range kvevent.Engines() {
		names = append(names, string(e))
	}
	v.oneOf(key, val, names...)
}

func (v *validator) oneOf(key, val string, allowed ...string) {
	if !slices.Contains(allowed, val) {
		v.add(key, "%q: want one of %s", val, strings.Join(allowed, ", "))
	}
}

// estimating names the policies whose decisions carry an estimate, so that
// the replicas they route to measure prefills (those the routing actors
// assign: the cache-aware ones, or any of them as a shadow).
var estimating = map[string]bool{"prefix_hash": true, "kv_aware": true, "cost_model": true}

// autoCostModels warns of a model whose cost model is auto while nothing
// routing it asks the replicas for an estimate: its replicas measure no
// prefill, and the configured values keep pricing them.
func (v *validator) autoCostModels(c *Config) {
	for i := range c.Models {
		m := &c.Models[i]
		r := c.RoutingFor(m)
		if !r.CostModel.Auto {
			continue
		}
		aware := false
		for p := range r.Split {
			aware = aware || estimating[p] || p == SchedulerName || c.Routing.Schedulers[p] != nil
		}
		for _, p := range r.Shadow {
			aware = aware || estimating[p]
		}
		if !aware {
			v.warnings = append(v.warnings, fmt.Sprintf("models[%d].cost_model: auto, but model %s is routed by %s, "+
				"which asks the replicas for no estimate: they measure no prefill to fit, and the configured values price them",
				i, m.Name, strings.Join(sortedKeys(r.Split), ", ")))
		}
	}
}

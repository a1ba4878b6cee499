package sched

import _ "embed"

// llm-d's own scheduling profiles, as the documents in testdata hold them
// unchanged (bench/sweeps/llmd.toml and the equivalence tests read the same
// files): embedded so that a command can run them without the source tree.

//go:embed testdata/helm-default.yaml
var llmdHelmDefault string

//go:embed testdata/sticky-until-saturated.yaml
var llmdSticky string

//go:embed testdata/latency-slo.yaml
var llmdLatency string

//go:embed testdata/precise-prefix.yaml
var llmdPrecise string

// LLMDProfile is one of llm-d's profiles: its name in reports and its
// EndpointPickerConfig document as YAML text, for Parse once decoded.
type LLMDProfile struct {
	Name, YAML string
}

// LLMDProfiles returns llm-d's Helm default profile (queue-scorer 2,
// kv-cache-utilization-scorer 2, prefix-cache-scorer 3), its "sticky until
// saturated" composition (prefix-cache-affinity-filter, token-load-scorer),
// named as bench/sweeps/llmd.toml names them, its predicted-latency
// composition with SLOs (llmd-latency: predicted-latency-producer,
// slo-headroom-tier-filter, latency-scorer, latency-slo-admitter; it
// refuses only requests with an SLO) and its precise prefix composition
// (llmd-precise: prefix-cache-scorer on precise-prefix-cache-producer, whose
// Signals include SignalKVEvents: route it where the engines' KV events
// feed the index).
func LLMDProfiles() []LLMDProfile {
	return []LLMDProfile{{"llmd-helm-default", llmdHelmDefault}, {"llmd-sticky", llmdSticky},
		{"llmd-latency", llmdLatency}, {"llmd-precise", llmdPrecise}}
}

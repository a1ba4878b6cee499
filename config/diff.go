package config

import (
	"reflect"
)

// Diff names the top-level sections that differ between prev and next, in
// the order of the Config type ("server", "models", "routing", …). A nil
// prev differs in every section. An empty result means the configs are
// equal, so a reload that finds none is a no-op.
func Diff(prev, next *Config) []string {
	var out []string
	if next == nil {
		return nil
	}
	pv, nv := reflect.ValueOf(prev), reflect.ValueOf(next).Elem()
	for i := 0; i < nv.NumField(); i++ {
		if prev == nil || !reflect.DeepEqual(pv.Elem().Field(i).Interface(), nv.Field(i).Interface()) {
			out = append(out, tagOf(configType.Field(i)))
		}
	}
	return out
}

// restartSection reports whether a section is built at startup: listeners,
// the upstream client, discovery, health checks, load scraping, tokenizers,
// the index, the exact mode's settings and telemetry.
func restartSection(name string) bool {
	switch name {
	case "server", "ext_proc", "upstream", "discovery", "health", "load", "tokenizer", "index", "kv_events", "observability", "tls":
		return true
	}
	return false
}

// RestartOnly names what differs between prev and next but cannot change
// while the gateway runs: the sections built at startup (server, ext_proc, upstream,
// discovery, health, load, tokenizer, index, kv_events,
// observability, tls),
// the model list when a model was added, removed, renamed or moved
// ("models"), a model's tokenizer, chat template settings or block size
// ("models[1].tokenizer"), and logging.level and logging.format. A reload that finds any is refused
// whole, naming them. Everything else, the routing section, each model's
// policy, split, shadow, cost_model and aliases, the static replicas, retry,
// auth, flow_control, rate_limits and logging.log_prompts, applies live. With a nil prev nothing is running,
// and the result is empty.
func RestartOnly(prev, next *Config) []string {
	if prev == nil || next == nil {
		return nil
	}
	var out []string
	for _, section := range Diff(prev, next) {
		if restartSection(section) {
			out = append(out, section)
		}
	}
	out = append(out, restartModels(prev.Models, next.Models)...)
	if prev.Logging.Level != next.Logging.Level {
		out = append(out, "logging.level")
	}
	if prev.Logging.Format != next.Logging.Format {
		out = append(out, "logging.format")
	}
	return out
}

func restartModels(prev, next []Model) []string {
	if len(prev) != len(next) {
		return []string{"models"}
	}
	for i := range prev {
		if prev[i].Name != next[i].Name {
			return []string{"models"}
		}
	}
	var out []string
	for i := range prev {
		a, b := &prev[i], &next[i]
		p := index("models", i)
		if a.Tokenizer != b.Tokenizer {
			out = append(out, p+".tokenizer")
		}
		if a.ChatTemplate != b.ChatTemplate {
			out = append(out, p+".chat_template")
		}
		if a.ChatTemplateContentFormat != b.ChatTemplateContentFormat {
			out = append(out, p+".chat_template_content_format")
		}
		if !reflect.DeepEqual(a.ChatTemplateKwargs, b.ChatTemplateKwargs) {
			out = append(out, p+".chat_template_kwargs")
		}
		if a.AnthropicInlineSystem != b.AnthropicInlineSystem {
			out = append(out, p+".anthropic_inline_system")
		}
		if a.BlockSize != b.BlockSize {
			out = append(out, p+".block_size")
		}
	}
	return out
}

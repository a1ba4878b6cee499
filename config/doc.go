// Package config turns the gateway's YAML file and its INFERRAIL_ environment
// overrides into one validated, immutable *Config.
//
// Load and Parse apply, in order: the defaults (Default), the file, the
// environment, then Validate. Unknown keys are rejected wherever they appear,
// and every problem is reported at once (errors.Join of *KeyError), each naming
// its key path, such as "replicas[2].url" or "routing.cost_model.prefill_token_secs".
// A key that was removed is unknown too, and its error says why it went and
// what to do instead (removed.go lists them).
//
// Durations are written with units ("250ms", "2s"); a bare number is an error,
// except 0. Byte counts are integers named …_bytes. Cost-model parameters are
// float seconds (…_secs), because some are far below a nanosecond.
//
// Environment overrides are named INFERRAIL_ plus the key path in upper case,
// with a double underscore between levels: INFERRAIL_SERVER__LISTEN sets
// server.listen, INFERRAIL_ROUTING__COST_MODEL__PREFILL_TOKEN_SECS sets
// routing.cost_model.prefill_token_secs. String and duration keys take the value
// as it is; every other key reads it as YAML, so lists and maps are written in
// flow style (INFERRAIL_ROUTING__SHADOW='[least_request]'). A list or map is
// always replaced whole, never indexed into.
//
// Input is bounded so hostile YAML fails fast: documents over MaxBytes,
// nesting deeper than 32 levels, or more than 131072 values once aliases are
// expanded ("billion laughs") are refused before any of it is checked, and
// at most 100 problems are spelled out.
//
// Scheduling profiles (routing.scheduler, routing.schedulers, a model's
// scheduler) are llm-d EndpointPickerConfig documents, inline or the path
// of a YAML file; Parse decodes each with model/sched's parser, reading the
// files then, reports its problems with their key paths inside the
// document (routing.scheduler.plugins[1].type) and keeps its warnings for
// Warnings; Profile returns a decoded profile by its routing name. Policy
// names are model/sched's registry's. Replica and DNS group labels are
// checked as Kubernetes checks labels.
//
// Which settings apply live and which need a restart is in Diff and RestartOnly;
// the reference's rule is that routing, each model's policy, scheduler, split,
// shadow, cost_model and aliases, the static replicas, retry, auth,
// flow_control, rate_limits and logging.log_prompts change while the gateway runs, and everything built at
// startup does not.
//
// Secrets stay out of the config: API keys (auth.api_keys.keys) and the
// admin token (auth.admin.token_sha256) are given by their SHA-256, and
// the keys themselves, the token and the engines' keys are read from the
// files auth.api_keys.file, auth.admin.token_file, upstream.api_key_file
// and replicas[].api_key_file name, by transport/auth, which hashes what it
// can. ParseAPIKeys reads the key file's layout without reading the file.
// Fields tagged secret:"true" are shown as Redaction by Redacted (GET
// /admin/config). The auth section changes live; tls needs a restart, but
// its certificate files are reread when they change.
//
// config starts no goroutines and keeps no mutable globals. Its only I/O is
// Load reading one file, and Parse (or Profile, for a Config built in code)
// reading the scheduling profiles' files; it never reads the process
// environment itself (the caller passes it in, usually os.Environ()).
// Nobody else in the gateway reads the config file or INFERRAIL_ variables.
package config

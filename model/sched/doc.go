// Package sched is Inferrail's scheduling pipeline in the shape llm-d's
// endpoint picker gives it: per scheduling profile, filters in order, then
// weighted scorers (each score in [0, 1]) summed, then a picker; a profile
// handler chooses which profiles run for a request. It holds the one
// registry of plugin types and of the policy names, the built-in profiles
// the seven policies are made of, and the decoder of llm-d's
// EndpointPickerConfig documents.
//
// The plugins' type names, parameters and defaults are llm-d's
// (llm-d/llm-d-router pkg/epp/framework/plugins, see
// ../shared/reference/llm-d-gie.md §2); the types llm-d does not have are
// marked as Inferrail's own in docs/plugins.md, which a test generates from
// the registry.
//
// sched starts no goroutines, does no I/O and keeps no mutable globals: the
// registry is a table fixed when the package loads, and callers pass the
// randomness and the time (policy.Request.Now). A Scheduler, and the plugin
// instances it is built from, keep state (a rotation, session tables, the
// hot-prefix sketch); each is owned by one routing actor and is not safe
// for concurrent use. A Config is immutable and builds any number of
// independent Schedulers.
package sched

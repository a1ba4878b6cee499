// Package harness measures a workload against an OpenAI-compatible endpoint
// in real time, and condenses what every request did into a Summary that
// real runs and virtual-time runs (sim/cluster) share.
//
// Run is open loop: every request is sent at its scheduled time whatever
// the earlier ones are doing, its TTFT and end-to-end latency are counted
// from that time, and the gap between it and the actual send is recorded as
// send lag, so that neither a server that falls behind nor a client that
// stalls can hide its queueing (coordinated omission). Responses are read
// as server-sent events over fasthttp; TPOT counts tokens from usage, not
// chunks; the engines' own prefix cache counters are read from their
// /metrics before and after the measured part.
//
// Run starts a goroutine per request and joins them all before it
// returns; nothing outlives it. Summaries are pure functions of records.
package harness

// Package workload makes the benchmark plan's traffic as text: seeded,
// deterministic streams of chat and completion requests (W1 to W8, mix and
// hot) and of Anthropic Messages requests (claude-code, Claude Code's agent
// sessions), each with its arrival time, conversation and max_tokens, arriving as
// a Poisson process, in Gamma bursts of a chosen coefficient of variation, or
// over a diurnal ramp. A Trace replays a recorded workload instead (Mooncake's
// JSON lines or the gateway's request log) as completions whose prompts are
// token ids, made from the trace's block hash ids.
//
// Lengths are counted in the simulator's tokens (token.Sim, builtin:sim):
// generated text is made of 1 to 3 letter words each followed by a space,
// which the simulator's tokenizer reads as exactly one token each, so a
// 2,000-token system prompt is 2,000 words. Conversations (W2) and agent
// loops (W3) resend the simulator's own answers: the simulator answers a
// prompt with text seeded by the prompt's token ids (sim.seedOf), so Answer
// computes an answer before it is sent, and a real run and a virtual-time run
// (sim/cluster) send the same bytes and compute the same token ids.
//
// The same workload, seed and rate always give the same requests at the same
// times. workload starts no goroutines and keeps no globals; the only I/O is
// reading a ShareGPT file in Conversations.Load and a trace in LoadTrace. A
// Source is owned by one goroutine.
package workload

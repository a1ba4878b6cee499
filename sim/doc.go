// Package sim is a simulated vLLM engine: an OpenAI-compatible HTTP server in
// front of the continuous-batching scheduler in sim/engine, with vLLM's wire
// format, metrics and KV events.
//
// Every test, CI run and benchmark of Inferrail runs against it, so it has to
// behave like vLLM where a router can tell the difference: which prompts hit
// the prefix cache, how time to first token grows with queued prefill, what the
// metrics page and the KV event stream say.
//
// A Server owns one driver goroutine (the engine loop), a fasthttp server and,
// when KV events are on, a publisher. Start and Close are its lifecycle; Kill,
// Restart and SetFault let tests break it on purpose. A Server is safe for
// concurrent use.
package sim

// Package calibrate measures an engine's prefill for inferrail calibrate: it
// sends an idle vLLM engine prompts of known cached and uncached length, one
// at a time, and reads what each prefill cost off the engine's own /metrics
// page, for model/cost.Fit.
//
// Each probe of a cost.Plan is preceded by its cached part sent alone, so
// that the engine holds it when the probe comes. The probe's time is the
// change of vLLM's TTFT histogram (vllm:time_to_first_token_seconds _sum
// over _count) across it, so that network and HTTP time stay out of the
// fit; the time the client saw is reported apart. Its cached tokens are the
// change of vllm:prefix_cache_hits, and its prompt length the response's
// usage.prompt_tokens, so an engine that cached less than planned, or whose
// tokenizer cut the text differently, is fitted on what it computed.
// Between requests the engine must be idle (vllm:num_requests_running and
// vllm:num_requests_waiting at 0) with every request counted; a request of
// anyone else's that shows in the counters fails the run.
//
// Prompts are random three-letter words drawn from the run's seed, so
// nothing of them is cached from an earlier run. Each word and its space is
// one token of the simulator's tokenizer (model/token.Sim), so against the
// simulator the planned sizes are exact; against a real tokenizer the words
// per token are learned from the responses as the run goes.
//
// CheckTokens, for inferrail check --url, tests a tokenizer against a live
// engine before traffic flows: it sends a few prompts of different sizes,
// as completions and as chats, and returns each one's usage.prompt_tokens
// beside the gateway's own count, the comparison the gateway also makes on
// every response it relays. The engine need not be idle for it.
//
// calibrate makes no routing decision and keeps nothing past Run or
// CheckTokens. Each owns one fasthttp client and closes its connections
// before returning; neither starts a goroutine of its own (fasthttp's client
// keeps an idle-connection cleaner, which ends by itself). Responses'
// usage is read with openai.FindUsage, the gateway's one usage parser. It is
// the only I/O of inferrail calibrate and of check --url.
package calibrate

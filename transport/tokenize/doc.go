// Package tokenize is the gateway's edge tokenizer: it loads each model's
// tokenizer and chat template (a model directory, a repository already in
// the local Hugging Face cache, or the simulator's builtin:sim), and
// prepares request bodies into what the engine will compute, the prompt's
// token ids and block hashes (model/prompt), for the cache-aware policies.
//
// Loading reads files, never the network, and never the environment: the
// hub cache directory is passed in (HubCache computes it from a getenv
// cmd/ hands over). A model whose tokenizer fails to load is reported in
// Status and its requests route without predictions.
//
// A configured model without a loaded tokenizer still has its completions
// whose prompt is token ids prepared (hashed with its block size and the
// body's cache_salt); its other bodies answer NoTokenizer.
//
// A Pool owns a fixed set of worker goroutines, started by New and stopped
// and joined by Close. Small bodies are prepared on the caller's goroutine;
// larger ones go through a bounded queue to the workers, and Prepare never
// waits longer than tokenizer.max_wait for one: a full queue or a late
// worker answers at once without a prediction. Each model keeps a cache of
// the prompt pieces it has tokenized (tokenizer.cache_tokens), so a
// repeated system prompt or conversation history is tokenized once.
// Outcomes are counted in inferrail_tokenized_requests_total{result} and
// the time of predicted ones in inferrail_tokenize_seconds.
//
// tokenize makes no routing decision: what a prediction is worth is the
// routing actor's to decide.
package tokenize

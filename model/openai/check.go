package openai

import "strconv"

// Check returns what vLLM rejects after the model check, then what this
// simulator does not implement; nil when the request can be served. Call it
// after ParseChat and after answering an unknown model with ModelNotFound,
// so the status codes come in vLLM's order. A non-nil error is an *Error
// with status 400.
//
// vLLM's own checks here are SamplingParams._verify_args' (n first, then
// max_tokens); the effective max_tokens is max_completion_tokens if set,
// else max_tokens, and vLLM names it "max_tokens" either way. Limits that
// need the prompt length (max_model_len) are the caller's.
func (r *ChatRequest) Check() error {
	if r.N < 1 {
		return engineError("n must be at least 1, got "+strconv.FormatInt(r.N, 10)+".", "", "")
	}
	if mt, ok := r.MaxOutputTokens(); ok && mt < 1 {
		v := strconv.FormatInt(mt, 10)
		return engineError("max_tokens must be at least 1, got "+v+".", "max_tokens", v)
	}
	if err := checkCommon(r.N, r.BestOf); err != nil {
		return err
	}
	if r.Logprobs {
		return unsupported("logprobs", "logprobs is not supported by this simulator; omit it or set it to false.")
	}
	if r.TopLogprobs > 0 || r.TopLogprobs == -1 {
		return unsupported("top_logprobs", "top_logprobs is not supported by this simulator; omit it or set it to 0.")
	}
	if r.Echo {
		return unsupported("echo", "echo is not supported by this simulator; omit it or set it to false.")
	}
	return nil
}

// Check is ChatRequest.Check for completions. A max_tokens of 0 is allowed
// with echo, as vLLM allows it (the prompt is returned without generating).
func (r *CompletionRequest) Check() error {
	if r.N < 1 {
		return engineError("n must be at least 1, got "+strconv.FormatInt(r.N, 10)+".", "", "")
	}
	if r.MaxTokens < 1 && !(r.Echo && r.MaxTokens == 0) {
		v := strconv.FormatInt(r.MaxTokens, 10)
		return engineError("max_tokens must be at least 1, got "+v+".", "max_tokens", v)
	}
	if r.PromptEmbeds {
		return unsupported("prompt_embeds", "prompt_embeds is not supported by this simulator; send prompt as text or token ids.")
	}
	if r.Prompt.Count == 0 || (r.Prompt.Kind == PromptTokens && len(r.Prompt.Tokens) == 0) {
		return ErrEmptyPrompt
	}
	if err := checkCommon(r.N, r.BestOf); err != nil {
		return err
	}
	if r.Logprobs.Set {
		return unsupported("logprobs", "logprobs is not supported by this simulator; omit it or set it to null.")
	}
	if r.Echo {
		return unsupported("echo", "echo is not supported by this simulator; omit it or set it to false.")
	}
	return nil
}

func checkCommon(n int64, bestOf Opt[int64]) *Error {
	if n > 1 {
		return unsupported("n", "n > 1 is not supported by this simulator, which returns one choice per request; set n to 1 or omit it.")
	}
	if bestOf.Set && bestOf.Value > 1 {
		return unsupported("best_of", "best_of > 1 is not supported by this simulator; set best_of to 1 or omit it.")
	}
	return nil
}

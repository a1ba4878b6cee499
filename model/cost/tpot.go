package cost

import "time"

// The estimate of time per output token (TPOT). vLLM's scheduler, with
// chunked prefill, fills each step's token budget with one token per
// decoding sequence first and then with chunks of the prompts being
// prefilled, so a step costs the decode of its n sequences plus the
// chunk it carries (sim/engine: Decode(n) + Chunk, Engine.cost). A stream's
// next tokens therefore take Step(n) each, and whatever prefill runs
// while it decodes adds its whole compute time to them, spread over the
// steps it is chunked into. The requests queued ahead of a new one are
// prefilled before its first token, so they slow the streams already
// running and, once they decode, every stream by one sequence each.

// Step returns the time of a decode step of n sequences,
// DecodeTokenSecs + DecodeInterferenceSecs·(n−1), or 0 when n <= 0.
func (m *Model) Step(n int) time.Duration {
	if n <= 0 {
		return 0
	}
	return secs(m.DecodeTokenSecs + m.DecodeInterferenceSecs*float64(n-1))
}

// TPOT estimates the mean time per output token, over its next tokens
// output tokens, of a stream that decodes alongside others more
// sequences, while prefill of prefill compute time is chunked into the
// same steps: Step(others+1) + prefill/tokens. It is non-decreasing in
// others and prefill. tokens < 1 is taken as 1, negative others and
// prefill as 0.
//
// The prefill is taken to fit within those steps: a step carries at most
// max_num_batched_tokens less its decodes of prefill (vLLM's token
// budget), so a prompt longer than tokens such steps spills past the
// window and the estimate overstates the window's TPOT.
//
// For a request placed on a replica, others is the replica's running
// requests plus those queued ahead of it (Candidate.Running + Pending) and
// prefill is 0: the queued prefill runs before its first token. For a
// stream already running there, prefill is the queued prefill plus the new
// prompt's, and others counts the new request too.
func (m *Model) TPOT(others int, prefill time.Duration, tokens int) time.Duration {
	tokens = max(tokens, 1)
	return m.Step(max(others, 0)+1) + max(prefill, 0)/time.Duration(tokens)
}

// Harm estimates the delay a placement inflicts on each stream already
// decoding on the replica, over that stream's next tokens output tokens:
// they wait for the new prompt's prefill chunks, P(u, c) in all for u =
// prompt − cached, and each of those steps decodes one more sequence,
// DecodeInterferenceSecs each. Divided by tokens, it is the rise of the
// stream's TPOT (TPOT with the placement less TPOT without). A prompt all
// cached still pays d, as Estimate prices it. tokens < 1 is taken as 1;
// cached is clamped to [0, prompt].
func (m *Model) Harm(prompt, cached, tokens int) time.Duration {
	prompt = max(prompt, 0)
	cached = min(max(cached, 0), prompt)
	tokens = max(tokens, 1)
	return secs(m.DecodeInterferenceSecs*float64(tokens) + m.prefill(float64(prompt-cached), float64(cached)))
}

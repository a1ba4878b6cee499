package frontend

import (
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/inferrail/inferrail/model/limit"
	"github.com/inferrail/inferrail/model/openai"
	"github.com/inferrail/inferrail/transport/ratelimit"
)

// reasonRateLimited names a request a rate limit refused in
// inferrail_request_errors_total; ratelimit.MetricThrottled says which.
const reasonRateLimited = "rate_limited"

// codeRateLimited is OpenAI's error.code on a 429 for a rate limit.
const codeRateLimited = "rate_limit_exceeded"

// bytesPerToken estimates a prompt the gateway did not tokenize: OpenAI's
// rule of thumb of about four characters a token.
const bytesPerToken = 4

// limits is a request's part in its tenant's rate limits.
type limits struct {
	ticket ratelimit.Ticket
	// used is the tokens the engine reported in usage; -1 until it does.
	used int64
	// committed: an engine's response head went to the client.
	committed bool
}

// admitLimits counts r against its tenant's rate limits, reserving its
// prompt's tokens and its completion budget, and names the limits in the
// response headers. It reports false once it has answered 429.
func (s *Server) admitLimits(r *request) bool {
	r.lim.used = -1
	tenant := tenantOf(r.who)
	t := s.limits.Tenant(tenant)
	if t == nil {
		return true
	}
	var tokens int64
	if t.CountsTokens() {
		tokens = int64(len(r.body) / bytesPerToken)
		if r.tokenized {
			tokens = int64(r.policy.PromptTokens)
		}
		if n, ok := openai.FindMaxTokens(r.body); ok {
			tokens += n
		}
	}
	k, v := t.Admit(tokens, s.limits.Now())
	h := &r.ctx.Response.Header
	setLimitHeaders(h, &v)
	if v.OK {
		r.lim.ticket = k
		return true
	}
	r.fail(reasonRateLimited, nil)
	writeError(r.ctx, rateLimitError(tenant, &v))
	if v.TooLarge {
		// No wait admits it.
		h.Del("Retry-After")
		return false
	}
	h.Set("Retry-After", strconv.FormatInt(int64((v.RetryAfter+time.Second-1)/time.Second), 10))
	// OpenAI's SDKs read retry-after-ms before Retry-After.
	h.Set("Retry-After-Ms", strconv.FormatInt(int64((v.RetryAfter+time.Millisecond-1)/time.Millisecond), 10))
	return false
}

// settleLimits settles r's reservation when the request ends: to the
// engine's usage when it reported one, to nothing when no engine answered
// or it answered an error (4xx, 5xx) whole, else (a stream without usage,
// or one cut short) the reservation stands.
func (s *Server) settleLimits(r *request) {
	switch {
	case !r.lim.ticket.Limited():
	case r.lim.used >= 0:
		s.limits.Settle(r.lim.ticket, r.lim.used)
	case !r.lim.committed:
		s.limits.Settle(r.lim.ticket, 0)
	}
}

// wantsUsage reports whether r's response's usage is read: to check the
// tokenizer, or to settle a reservation.
func (r *request) wantsUsage() bool { return r.tokenized || r.lim.ticket.Limited() }

// usage notes the engine's count of r's tokens.
func (r *request) usage(u openai.Usage) { r.lim.used = int64(u.PromptTokens + u.CompletionTokens) }

// The x-ratelimit-* headers, canonical, so fasthttp need not normalize
// them per request.
var (
	hdrLimitRequests     = []byte("X-Ratelimit-Limit-Requests")
	hdrRemainingRequests = []byte("X-Ratelimit-Remaining-Requests")
	hdrResetRequests     = []byte("X-Ratelimit-Reset-Requests")
	hdrLimitTokens       = []byte("X-Ratelimit-Limit-Tokens")
	hdrRemainingTokens   = []byte("X-Ratelimit-Remaining-Tokens")
	hdrResetTokens       = []byte("X-Ratelimit-Reset-Tokens")
)

// setLimitHeaders names the limits that apply, as OpenAI's headers do.
func setLimitHeaders(h *fasthttp.ResponseHeader, v *limit.Verdict) {
	var buf [32]byte
	set := func(k []byte, n int64) { h.SetCanonical(k, strconv.AppendInt(buf[:0], n, 10)) }
	if v.Requests.On {
		set(hdrLimitRequests, v.Requests.Limit)
		set(hdrRemainingRequests, v.Requests.Remaining)
		h.SetCanonical(hdrResetRequests, appendReset(buf[:0], v.Requests.Reset))
	}
	if v.Tokens.On {
		set(hdrLimitTokens, v.Tokens.Limit)
		set(hdrRemainingTokens, v.Tokens.Remaining)
		h.SetCanonical(hdrResetTokens, appendReset(buf[:0], v.Tokens.Reset))
	}
}

// resetFormat writes a reset time as OpenAI does ("1s", "6m0s", "120ms"),
// rounded up to the millisecond so it is never early.
func resetFormat(d time.Duration) string { return string(appendReset(nil, d)) }

// appendReset appends resetFormat(d): Go's Duration format of d rounded up
// to the millisecond, without allocating.
func appendReset(dst []byte, d time.Duration) []byte {
	ms := int64((max(d, 0) + time.Millisecond - 1) / time.Millisecond)
	switch {
	case ms == 0:
		return append(dst, "0s"...)
	case ms < 1000:
		return append(strconv.AppendInt(dst, ms, 10), "ms"...)
	}
	if h := ms / 3_600_000; h > 0 {
		dst = append(strconv.AppendInt(dst, h, 10), 'h')
	}
	if m := ms / 60_000 % 60; m > 0 || ms >= 3_600_000 {
		dst = append(strconv.AppendInt(dst, m, 10), 'm')
	}
	dst = strconv.AppendInt(dst, ms/1000%60, 10)
	if frac := ms % 1000; frac > 0 {
		dst = append(dst, '.')
		digits := [3]byte{byte('0' + frac/100), byte('0' + frac/10%10), byte('0' + frac%10)}
		n := 3
		for digits[n-1] == '0' {
			n--
		}
		dst = append(dst, digits[:n]...)
	}
	return append(dst, 's')
}

// rateLimitError is OpenAI's answer over a limit: 429, type the limit
// ("requests" or "tokens"), code rate_limit_exceeded.
func rateLimitError(tenant string, v *limit.Verdict) *openai.Error {
	e := &openai.Error{Status: fasthttp.StatusTooManyRequests, Type: string(v.Reason), Code: codeRateLimited}
	who := ""
	if tenant != "" {
		who = " of tenant " + tenant
	}
	switch {
	case v.TooLarge:
		e.Message = "Request too large for tokens per minute (TPM)" + who + ": Limit " + strconv.FormatInt(v.Tokens.Limit, 10) +
			", Requested " + strconv.FormatInt(v.Asked, 10) + ". The input or output tokens must be reduced in order to run successfully."
	case v.Reason == limit.ReasonRequests:
		e.Message = "Rate limit reached for requests per second (RPS)" + who + ": Limit " + strconv.FormatInt(v.Requests.Limit, 10) +
			", Remaining " + strconv.FormatInt(v.Requests.Remaining, 10) + ". Please try again in " + resetFormat(v.RetryAfter) + "."
	default:
		e.Message = "Rate limit reached for tokens per minute (TPM)" + who + ": Limit " + strconv.FormatInt(v.Tokens.Limit, 10) +
			", Remaining " + strconv.FormatInt(v.Tokens.Remaining, 10) + ", Requested " + strconv.FormatInt(v.Asked, 10) +
			". Please try again in " + resetFormat(v.RetryAfter) + "."
	}
	return e
}

package flow

import (
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/inferrail/inferrail/model/policy"
)

// MaxSLO bounds the objective a header may set on either measure: an
// objective past an hour is a mistake (seconds or microseconds written for
// milliseconds), and the gateway says so rather than route on it.
const MaxSLO = time.Hour

// SLOHeaders are the raw values of a request's SLO headers (HeaderSLOTTFT,
// HeaderSLOTPOT and their deprecated aliases); nil or empty when absent,
// as llm-d takes an empty header.
type SLOHeaders struct {
	TTFT, TPOT, TTFTAlias, TPOTAlias []byte
}

// Set keeps value when name (in any case) is one of the SLO headers, and
// reports whether it was. value is kept, not copied.
func (h *SLOHeaders) Set(name string, value []byte) bool {
	switch strings.ToLower(name) {
	case HeaderSLOTTFT:
		h.TTFT = value
	case HeaderSLOTPOT:
		h.TPOT = value
	case HeaderSLOTTFTAlias:
		h.TTFTAlias = value
	case HeaderSLOTPOTAlias:
		h.TPOTAlias = value
	default:
		return false
	}
	return true
}

// SLOError is a malformed SLO header: the client's mistake, answered with
// a 400 that names the header.
type SLOError struct {
	Header string // the header's name
	Value  string // its value, cut to 64 bytes
}

func (e *SLOError) Error() string {
	return "header " + e.Header + ": " + strconv.Quote(e.Value) +
		" is not a positive number of milliseconds up to " + strconv.FormatInt(MaxSLO.Milliseconds(), 10)
}

// ParseSLO is a request's latency objective: each measure from its
// header, else from its deprecated alias (the header wins when both are
// given, as in llm-d), else def's, the model's default. A value is a
// positive decimal number of milliseconds (llm-d writes whole ones; a
// fraction or an exponent is taken too) up to MaxSLO, with optional
// surrounding spaces; anything else is an *SLOError.
func ParseSLO(h SLOHeaders, def policy.SLO) (policy.SLO, error) {
	slo := def
	for _, m := range [...]struct {
		dst       *time.Duration
		name      string
		v, alias  []byte
		aliasName string
	}{
		{&slo.TTFT, HeaderSLOTTFT, h.TTFT, h.TTFTAlias, HeaderSLOTTFTAlias},
		{&slo.TPOT, HeaderSLOTPOT, h.TPOT, h.TPOTAlias, HeaderSLOTPOTAlias},
	} {
		name, v := m.name, m.v
		if len(v) == 0 {
			name, v = m.aliasName, m.alias
		}
		if len(v) == 0 {
			continue
		}
		d, ok := millis(v)
		if !ok {
			return policy.SLO{}, &SLOError{Header: name, Value: string(v[:min(len(v), 64)])}
		}
		*m.dst = d
	}
	return slo, nil
}

// millis parses one SLO header value.
func millis(v []byte) (time.Duration, bool) {
	s := strings.TrimSpace(string(v))
	if s == "" || s[0] < '0' || s[0] > '9' && s[0] != '.' {
		// No sign, and none of ParseFloat's words (inf, nan) or hex.
		return 0, false
	}
	if strings.ContainsAny(s, "xXpP_") {
		return 0, false
	}
	ms, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(ms) || ms <= 0 || ms > float64(MaxSLO.Milliseconds()) {
		return 0, false
	}
	d := time.Duration(ms * float64(time.Millisecond))
	return d, d > 0
}

// The results inferrail_slo_requests_total counts a request that carried
// an objective under: it met it, missed it by its time to first token or
// (its first token in time) by its time per output token, was refused
// because no replica could meet it (policy.ErrNotAdmitted), was refused
// for another reason before reaching an engine (flow control, no
// replica), or its engine failed it (a 5xx or a response broken off).
const (
	SLOMet         = "met"
	SLOTTFTMissed  = "ttft_missed"
	SLOTPOTMissed  = "tpot_missed"
	SLONotAdmitted = "not_admitted"
	SLORefused     = "refused"
	SLOFailed      = "failed"
)

// SLOResults are the results, in the order the metric lists them.
var SLOResults = [...]string{SLOMet, SLOTTFTMissed, SLOTPOTMissed, SLONotAdmitted, SLORefused, SLOFailed}

// Attained judges a request that ended in a complete response against
// slo: ttft is the time from its arrival to the first byte the client got,
// decode the time from that byte to the last, and outputTokens the
// tokens the engine reported generating (0 when it did not say). Its time
// per output token is decode/(outputTokens−1), as vLLM's benchmarks
// measure it, and is judged only with two tokens or more: a response
// whose usage is unknown is judged by its TTFT alone. A TTFT miss is
// named before a TPOT miss. A zero measure of slo is not judged.
func Attained(slo policy.SLO, ttft, decode time.Duration, outputTokens int) string {
	if slo.TTFT > 0 && ttft > slo.TTFT {
		return SLOTTFTMissed
	}
	if slo.TPOT > 0 && outputTokens >= 2 && decode/time.Duration(outputTokens-1) > slo.TPOT {
		return SLOTPOTMissed
	}
	return SLOMet
}

package flow

import (
	"math"
	"strconv"
	"strings"
	"time"
)

// slo-deadline-ordering-policy (llm-d-router
// pkg/epp/framework/plugins/flowcontrol/ordering/slodeadline) orders a
// flow's requests by the time their first token is due: when the gateway
// received the request plus its x-llm-d-slo-ttft-ms. A request without a
// valid header comes after every request with one; ties, and requests
// without one, go by arrival. Bands orders so under Options.EDF when Push
// is given SLODeadline.

// NoDeadline is the deadline of a request without a valid TTFT objective:
// after every other (llm-d's time.Unix(0, 1<<63-1)).
var NoDeadline = time.Unix(0, math.MaxInt64)

// ParseSLOMillis reads an SLO header's value as slo-deadline-ordering-policy
// reads x-llm-d-slo-ttft-ms: a whole number of milliseconds, at least 0,
// surrounding white space ignored. ok is false for an empty, malformed or
// negative value, and for one too large for a Duration.
func ParseSLOMillis(v []byte) (d time.Duration, ok bool) {
	s := strings.TrimSpace(string(v))
	if s == "" {
		return 0, false
	}
	ms, err := strconv.ParseInt(s, 10, 64)
	if err != nil || ms < 0 || ms > math.MaxInt64/int64(time.Millisecond) {
		return 0, false
	}
	return time.Duration(ms) * time.Millisecond, true
}

// SLODeadline returns the deadline slo-deadline-ordering-policy orders a
// request by: received plus the x-llm-d-slo-ttft-ms value ttft, or
// NoDeadline when ttft is not valid (ParseSLOMillis).
func SLODeadline(received time.Time, ttft []byte) time.Time {
	d, ok := ParseSLOMillis(ttft)
	if !ok {
		return NoDeadline
	}
	if at := received.Add(d); at.Before(NoDeadline) {
		return at
	}
	return NoDeadline
}

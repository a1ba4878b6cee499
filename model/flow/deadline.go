package flow

import (
	"math"
	"time"
)

// slo-deadline-ordering-policy (llm-d-router
// pkg/epp/framework/plugins/flowcontrol/ordering/slodeadline) orders a
// flow's requests by the time their first token is due: when the gateway
// received the request plus its x-llm-d-slo-ttft-ms. A request without an
// objective comes after every request with one; ties, and requests
// without one, go by arrival. Bands orders so under Options.EDF when Push
// is given SLODeadline.

// NoDeadline is the deadline of a request without a valid TTFT objective:
// after every other (llm-d's time.Unix(0, 1<<63-1)).
var NoDeadline = time.Unix(0, math.MaxInt64)

// SLODeadline returns the deadline slo-deadline-ordering-policy orders a
// request by: received plus its TTFT objective ttft (ParseSLO, which reads
// x-llm-d-slo-ttft-ms), or NoDeadline for a request without one (ttft ≤ 0).
func SLODeadline(received time.Time, ttft time.Duration) time.Time {
	if ttft <= 0 {
		return NoDeadline
	}
	if at := received.Add(ttft); at.Before(NoDeadline) {
		return at
	}
	return NoDeadline
}

package harness

import (
	"strconv"
	"time"

	"github.com/inferrail/inferrail/sim/cluster"
)

// Virtual turns a virtual-time fleet run into a Run as the harness would
// have measured it: TTFT and E2E from arrival (there is no network and no
// send lag), replicas named sim-0, sim-1… as inferrail launch names them,
// a prediction wherever the KV index priced the decision, and a request
// refused with every replica full as a failure (the gateway's 503).
func Virtual(res *cluster.Result, warmUp, duration time.Duration) *Run {
	run := &Run{Records: make([]Record, len(res.Requests)), WarmUp: warmUp, Duration: duration, Oracle: true}
	for i := range res.Requests {
		f := &res.Requests[i]
		r := &run.Records[i]
		r.Class, r.Due, r.WarmUp = f.Class, f.Arrival, f.WarmUp
		if f.Rejected {
			r.Err = "status 503"
			continue
		}
		r.TTFT, r.E2E = max(f.TTFT(), 1), f.E2E()
		r.PromptTokens, r.OutputTokens, r.CachedTokens = f.PromptTokens, f.OutputTokens, f.CachedTokens
		r.PredictedTokens, r.Predicted = f.PredictedTokens, f.Predicted
		r.Replica = "sim-" + strconv.Itoa(f.Replica)
		r.Preemptions, r.OracleTokens = f.Preemptions, f.OracleTokens
	}
	return run
}

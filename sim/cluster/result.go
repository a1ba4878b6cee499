package cluster

import (
	"fmt"
	"slices"
	"time"
)

// Record is what one request did. Times are on the run's virtual clock.
type Record struct {
	// Class is the part of the workload that made it (Request.Class).
	Class string
	// Arrival is when it arrived and was routed; FirstToken when its first
	// token came out; Finished when its last did.
	Arrival, FirstToken, Finished time.Duration
	// PromptTokens is the prompt's length; OutputTokens what it generated.
	PromptTokens, OutputTokens int
	// CachedTokens is the engine's prefix cache hit at admission, as vLLM
	// reports it in usage.prompt_tokens_details.cached_tokens.
	CachedTokens int
	// PredictedTokens is what the winner's candidate predicted it held
	// (policy.Candidate.CachedTokens); Predicted reports that the KV index
	// priced the decision, as the gateway then names the prediction in
	// x-inferrail-cached-tokens.
	PredictedTokens int
	Predicted       bool
	// OracleTokens is what an infinite cache with perfect placement would
	// serve: the longest prefix of full blocks shared with any earlier
	// request of the run, stopping one token short of the whole prompt.
	OracleTokens int
	// Replica is the index of the replica it went to, -1 when rejected.
	Replica int
	// Instance is the gateway instance the load balancer gave it to
	// (Config.Instances). Asked counts the other instances asked where
	// they would have sent it, and Disagreed those that would have picked
	// another replica than Replica.
	Instance, Asked, Disagreed int
	// Lost reports that its instance was killed while it was in flight
	// (Faults.KillAt): its client got an error, whatever the engine did.
	Lost bool
	// Preemptions counts the times the engine preempted it.
	Preemptions int
	// WarmUp reports that it arrived before the warm-up ended.
	WarmUp bool
	// Rejected reports that the request was refused as the gateway answers
	// 503: every replica was at MaxConcurrency, or the scheduling
	// profile's filters left none.
	Rejected bool
}

// TTFT is the time to first token, from arrival.
func (r *Record) TTFT() time.Duration { return r.FirstToken - r.Arrival }

// E2E is the end-to-end latency, from arrival to the last token.
func (r *Record) E2E() time.Duration { return r.Finished - r.Arrival }

// Result is one run: every request, and the summary of those that count.
// A Result is a value the caller owns.
type Result struct {
	// Policy is the run's policy, or its scheduling profile's name
	// (Config.Name).
	Policy, Workload string
	Replicas         int
	// Instances is how many gateway instances routed the run.
	Instances int
	// Requests lists every request in arrival order, warm-up and rejected
	// ones included.
	Requests []Record
	// Summary covers the requests that arrived after the warm-up.
	Summary Summary
	// End is the virtual time the last request finished; Steps counts the
	// engine steps of every replica.
	End   time.Duration
	Steps int
	// Estimates holds, per request of Requests, the cost model's estimate
	// of its time to first token on its replica (W + P), 0 when the
	// decision was not priced.
	Estimates []time.Duration
	// Fits traces, per replica, the online fit of the first instance's
	// shadow of it (Config.AutoCalibrate): a point at every FitEvery-th
	// request routed there, and one at the end. Nil when off.
	Fits [][]FitPoint
}

// Summary condenses a set of requests.
type Summary struct {
	// Requests counts them, Rejected those refused with every replica full
	// or filtered out (left out of everything below). Lost counts those a
	// killed instance had in flight (Faults.KillAt), which the engines
	// still served and which count below.
	Requests, Rejected, Lost int
	// Time to first token and end to end latency.
	MeanTTFT, P50TTFT, P90TTFT, P99TTFT, MaxTTFT time.Duration
	MeanE2E, P99E2E                              time.Duration
	// PromptTokens and CachedTokens sum the prompts and the engines' hits.
	PromptTokens, CachedTokens int64
	// HitRate is CachedTokens / PromptTokens; PredictedHitRate the same
	// with the predictions; OracleHitRate with the oracle's hits.
	HitRate, PredictedHitRate, OracleHitRate float64
	// Accuracy is the share of requests whose prediction was exact; Over
	// and Under the shares that predicted more or fewer tokens than the
	// engine found.
	Accuracy, Over, Under float64
	// Shares is each replica's share of the requests; BusiestShare the
	// largest.
	Shares       []float64
	BusiestShare float64
	// Preemptions sums the engines' preemptions of these requests.
	Preemptions int
	// Disagreement is, with several gateway instances, the share of the
	// other instances asked about a request that would have sent it to
	// another replica than the instance that routed it (Record.Disagreed
	// over Record.Asked); 0 with one instance.
	Disagreement float64
}

func (r *run) result() Result {
	res := Result{
		Policy:    r.cfg.Name(),
		Workload:  r.cfg.Workload.Name(),
		Replicas:  len(r.reps),
		Instances: len(r.gates),
		Requests:  r.recs,
		Estimates: r.estimates,
		End:       r.now,
		Steps:     r.steps,
	}
	if r.cfg.AutoCalibrate {
		for _, sh := range r.gates[0].reps {
			sh.trace(epoch.Add(r.now))
			res.Fits = append(res.Fits, sh.fits)
		}
	}
	res.Summary = res.Summarize(func(rec *Record) bool { return !rec.WarmUp })
	return res
}

// Summarize condenses the requests keep selects, such as one class of a
// mix.
func (res *Result) Summarize(keep func(*Record) bool) Summary {
	s := Summary{Shares: make([]float64, res.Replicas)}
	var ttft []time.Duration
	var sumTTFT, sumE2E time.Duration
	var e2e []time.Duration
	var predicted, oracle int64
	exact, over, under := 0, 0, 0
	asked, disagreed := 0, 0
	for i := range res.Requests {
		rec := &res.Requests[i]
		if !keep(rec) {
			continue
		}
		s.Requests++
		if rec.Rejected {
			s.Rejected++
			continue
		}
		if rec.Lost {
			s.Lost++
		}
		ttft = append(ttft, rec.TTFT())
		e2e = append(e2e, rec.E2E())
		sumTTFT += rec.TTFT()
		sumE2E += rec.E2E()
		s.PromptTokens += int64(rec.PromptTokens)
		s.CachedTokens += int64(rec.CachedTokens)
		predicted += int64(rec.PredictedTokens)
		oracle += int64(rec.OracleTokens)
		switch {
		case rec.PredictedTokens == rec.CachedTokens:
			exact++
		case rec.PredictedTokens > rec.CachedTokens:
			over++
		default:
			under++
		}
		s.Shares[rec.Replica]++
		s.Preemptions += rec.Preemptions
		asked += rec.Asked
		disagreed += rec.Disagreed
	}
	n := len(ttft)
	if n == 0 {
		return s
	}
	slices.Sort(ttft)
	slices.Sort(e2e)
	s.MeanTTFT = sumTTFT / time.Duration(n)
	s.P50TTFT = nearestRank(ttft, 50)
	s.P90TTFT = nearestRank(ttft, 90)
	s.P99TTFT = nearestRank(ttft, 99)
	s.MaxTTFT = ttft[n-1]
	s.MeanE2E = sumE2E / time.Duration(n)
	s.P99E2E = nearestRank(e2e, 99)
	if s.PromptTokens > 0 {
		pt := float64(s.PromptTokens)
		s.HitRate = float64(s.CachedTokens) / pt
		s.PredictedHitRate = float64(predicted) / pt
		s.OracleHitRate = float64(oracle) / pt
	}
	if asked > 0 {
		s.Disagreement = float64(disagreed) / float64(asked)
	}
	s.Accuracy = float64(exact) / float64(n)
	s.Over = float64(over) / float64(n)
	s.Under = float64(under) / float64(n)
	for i := range s.Shares {
		s.Shares[i] /= float64(n)
		s.BusiestShare = max(s.BusiestShare, s.Shares[i])
	}
	return s
}

// nearestRank returns the nearest-rank p-th percentile of sorted.
func nearestRank(sorted []time.Duration, p float64) time.Duration {
	k := int(float64(len(sorted))*p/100+0.999999999) - 1
	return sorted[min(max(k, 0), len(sorted)-1)]
}

// String is a one-line summary for logs.
func (s Summary) String() string {
	return fmt.Sprintf("n=%d mean=%v p50=%v p99=%v hit=%.3f oracle=%.3f exact=%.3f busiest=%.3f preempt=%d rejected=%d",
		s.Requests, s.MeanTTFT.Round(time.Millisecond), s.P50TTFT.Round(time.Millisecond), s.P99TTFT.Round(time.Millisecond),
		s.HitRate, s.OracleHitRate, s.Accuracy, s.BusiestShare, s.Preemptions, s.Rejected)
}

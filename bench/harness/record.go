package harness

import (
	"maps"
	"math"
	"slices"
	"sort"
	"time"
)

// SLO is a request's service level objective: it counts towards goodput
// when it succeeded with its first token within TTFT and every later token
// within TPOT on average.
type SLO struct {
	TTFT time.Duration `json:"ttft"`
	TPOT time.Duration `json:"tpot"`
}

// DefaultSLO is the benchmark plan's: TTFT at most 2 s, TPOT at most 100 ms.
func DefaultSLO() SLO { return SLO{TTFT: 2 * time.Second, TPOT: 100 * time.Millisecond} }

// Record is what one request did. Times count from its scheduled time.
type Record struct {
	// Class is the part of the workload that made it (workload.Request).
	Class string
	// Due is when it was scheduled, from the start of the run; Lag how
	// long after that it was sent.
	Due, Lag time.Duration
	// TTFT is from Due to its first generated token, E2E to its last.
	TTFT, E2E time.Duration
	// PromptTokens, OutputTokens and CachedTokens are the engine's usage
	// (prompt_tokens_details.cached_tokens for the last).
	PromptTokens, OutputTokens, CachedTokens int
	// PredictedTokens is the gateway's prediction of CachedTokens
	// (x-inferrail-cached-tokens), when Predicted.
	PredictedTokens int
	Predicted       bool
	// Replica is the replica that served it (x-inferrail-replica), Policy
	// the routing policy that chose it (x-inferrail-policy): an A/B split's
	// arm.
	Replica, Policy string
	// Preemptions counts the engine's preemptions of it, and OracleTokens
	// what an infinite cache with perfect placement would have served of
	// its prompt; both known in virtual runs only.
	Preemptions, OracleTokens int
	// Err says why it failed; "" for a success.
	Err string
	// WarmUp reports that it was due before the warm-up ended: it is left
	// out of the summary.
	WarmUp bool
}

// TPOT is the time per output token after the first, from usage tokens.
func (r *Record) TPOT() time.Duration {
	if r.OutputTokens < 2 {
		return 0
	}
	return (r.E2E - r.TTFT) / time.Duration(r.OutputTokens-1)
}

// Good reports that r succeeded within slo.
func (r *Record) Good(slo SLO) bool {
	return r.Err == "" && r.TTFT <= slo.TTFT && r.TPOT() <= slo.TPOT
}

// Counters are the engines' prefix cache counters over the measured part
// of a run (vllm:prefix_cache_queries and _hits, in tokens), summed over
// the engines.
type Counters struct {
	Queries     float64 `json:"queries"`
	Hits        float64 `json:"hits"`
	Preemptions float64 `json:"preemptions"`
}

// Run is everything one run measured.
type Run struct {
	// Records lists every request in schedule order, warm-up included.
	Records []Record
	// ITL holds the gaps between consecutive tokens of the measured
	// requests, as the client received them; empty for virtual runs.
	ITL []time.Duration
	// WarmUp and Duration bound the measured requests' due times.
	WarmUp, Duration time.Duration
	// Engine holds the engines' counters after the warm-up, when read.
	Engine *Counters
	// Oracle reports that the records carry OracleTokens.
	Oracle bool
}

// Dist is a distribution of durations, in seconds.
type Dist struct {
	Mean float64 `json:"mean"`
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	Max  float64 `json:"max"`
}

func dist(xs []time.Duration) Dist {
	if len(xs) == 0 {
		return Dist{}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	var sum float64
	for _, x := range s {
		sum += x.Seconds()
	}
	return Dist{
		Mean: round(sum / float64(len(s))),
		P50:  nearestRank(s, 50).Seconds(),
		P90:  nearestRank(s, 90).Seconds(),
		P99:  nearestRank(s, 99).Seconds(),
		Max:  s[len(s)-1].Seconds(),
	}
}

// nearestRank is the smallest value with at least p% of the sorted values
// at or below it.
func nearestRank(sorted []time.Duration, p float64) time.Duration {
	k := int(math.Ceil(p/100*float64(len(sorted))-1e-9)) - 1
	return sorted[min(max(k, 0), len(sorted)-1)]
}

// round keeps 9 significant digits, so that summaries written as JSON do
// not depend on the order floating-point sums were taken in.
func round(x float64) float64 {
	if x == 0 || math.IsInf(x, 0) || math.IsNaN(x) {
		return x
	}
	p := math.Pow(10, 8-math.Floor(math.Log10(math.Abs(x))))
	return math.Round(x*p) / p
}

// Prediction is how the gateway's cache predictions compared with what the
// engines found.
type Prediction struct {
	// Requests counts the measured requests with a prediction.
	Requests int `json:"requests"`
	// Exact, Over and Under are the shares predicted exactly, too high and
	// too low; MeanError the mean absolute error in tokens.
	Exact     float64 `json:"exact"`
	Over      float64 `json:"over"`
	Under     float64 `json:"under"`
	MeanError float64 `json:"mean_error_tokens"`
	// HitRate is the predicted cached tokens over those requests' prompt
	// tokens, ActualHitRate the engines' over the same.
	HitRate       float64 `json:"hit_rate"`
	ActualHitRate float64 `json:"actual_hit_rate"`
}

// Share is one replica's share of the measured requests.
type Share struct {
	Replica string  `json:"replica"`
	Share   float64 `json:"share"`
}

// Summary condenses the measured requests of a run.
type Summary struct {
	// Requests counts the measured requests, Errors the failed ones (left
	// out of everything but the counts and the send lag).
	Requests int            `json:"requests"`
	Errors   int            `json:"errors"`
	ErrKinds map[string]int `json:"error_kinds,omitempty"`
	// Latencies, in seconds: TTFT and E2E from the scheduled time, TPOT
	// from usage tokens, ITL between received tokens (real runs), and the
	// send lag.
	TTFT    Dist `json:"ttft"`
	TPOT    Dist `json:"tpot"`
	ITL     Dist `json:"itl"`
	E2E     Dist `json:"e2e"`
	SendLag Dist `json:"send_lag"`
	// Offered is the measured requests per second of the measured window;
	// Throughput the successes per second from its start to the last
	// one's end, OutputTokens their generated tokens per second over the
	// same; Goodput the successes within the SLO per second of the
	// window, and GoodShare their share of the measured requests.
	Offered      float64 `json:"offered_rps"`
	Throughput   float64 `json:"throughput_rps"`
	OutputTokens float64 `json:"output_tokens_per_s"`
	Goodput      float64 `json:"goodput_rps"`
	GoodShare    float64 `json:"good_share"`
	SLO          SLO     `json:"slo"`
	// PromptTokens and CachedTokens sum usage; HitRate is their ratio.
	// EngineHitRate is the engines' own counters' (nil when not read),
	// OracleHitRate an infinite, perfectly placed cache's (virtual runs).
	PromptTokens  int64    `json:"prompt_tokens"`
	CachedTokens  int64    `json:"cached_tokens"`
	HitRate       float64  `json:"hit_rate"`
	EngineHitRate *float64 `json:"engine_hit_rate,omitempty"`
	OracleHitRate *float64 `json:"oracle_hit_rate,omitempty"`
	// Prediction compares the gateway's predictions with usage; nil when
	// it predicted none.
	Prediction *Prediction `json:"prediction,omitempty"`
	// Shares are the replicas' shares of the successes, by replica name;
	// BusiestShare the largest.
	Shares       []Share `json:"shares"`
	BusiestShare float64 `json:"busiest_share"`
	// Preemptions counts the engines' preemptions: of the measured
	// requests in virtual runs, from their counters after the warm-up in
	// real ones.
	Preemptions int64 `json:"preemptions"`
	// Policies compares the arms of an A/B split (routing.split), by
	// policy name, when the measured requests were routed by more than one
	// policy; nil otherwise.
	Policies []PolicySummary `json:"policies,omitempty"`
}

// PolicySummary is one policy's part of a run routed by a split: the
// measured requests it routed and how they fared.
type PolicySummary struct {
	Policy    string  `json:"policy"`
	Requests  int     `json:"requests"`
	Errors    int     `json:"errors"`
	TTFT      Dist    `json:"ttft"`
	HitRate   float64 `json:"hit_rate"`
	GoodShare float64 `json:"good_share"`
}

// Summarize condenses the measured requests of run against slo.
func (run *Run) Summarize(slo SLO) Summary {
	s := run.summarize(slo, func(*Record) bool { return true }, true)
	seen := map[string]bool{}
	for i := range run.Records {
		if r := &run.Records[i]; !r.WarmUp && r.Policy != "" {
			seen[r.Policy] = true
		}
	}
	if len(seen) > 1 {
		for _, p := range slices.Sorted(maps.Keys(seen)) {
			ps := run.summarize(slo, func(r *Record) bool { return r.Policy == p }, false)
			s.Policies = append(s.Policies, PolicySummary{Policy: p, Requests: ps.Requests, Errors: ps.Errors,
				TTFT: ps.TTFT, HitRate: ps.HitRate, GoodShare: ps.GoodShare})
		}
	}
	return s
}

// SummarizeClass condenses the measured requests of one class, such as W6
// in mix. The engines' counters and ITL cover the whole run and are left
// out.
func (run *Run) SummarizeClass(slo SLO, class string) Summary {
	return run.summarize(slo, func(r *Record) bool { return r.Class == class }, false)
}

// Classes lists the classes of the run's requests, sorted.
func (run *Run) Classes() []string {
	seen := map[string]bool{}
	for i := range run.Records {
		seen[run.Records[i].Class] = true
	}
	out := make([]string, 0, len(seen))
	for c := range seen {
		out = append(out, c)
	}
	sort.Strings(out)
	return out
}

func (run *Run) summarize(slo SLO, keep func(*Record) bool, whole bool) Summary {
	s := Summary{SLO: slo}
	window := run.Duration - run.WarmUp
	var ttft, tpot, e2e, lag []time.Duration
	var good, outTokens int
	var lastEnd time.Duration
	var pr Prediction
	var predTokens, predPrompt, predCached, absErr, oracle int64
	shares := map[string]int{}
	for i := range run.Records {
		r := &run.Records[i]
		if r.WarmUp || !keep(r) {
			continue
		}
		s.Requests++
		lag = append(lag, r.Lag)
		if r.Err != "" {
			s.Errors++
			if s.ErrKinds == nil {
				s.ErrKinds = map[string]int{}
			}
			if _, ok := s.ErrKinds[r.Err]; ok || len(s.ErrKinds) < 10 {
				s.ErrKinds[r.Err]++
			}
			continue
		}
		ttft = append(ttft, r.TTFT)
		e2e = append(e2e, r.E2E)
		if r.OutputTokens >= 2 {
			tpot = append(tpot, r.TPOT())
		}
		if r.Good(slo) {
			good++
		}
		outTokens += r.OutputTokens
		lastEnd = max(lastEnd, r.Due+r.E2E)
		s.PromptTokens += int64(r.PromptTokens)
		s.CachedTokens += int64(r.CachedTokens)
		s.Preemptions += int64(r.Preemptions)
		oracle += int64(r.OracleTokens)
		shares[r.Replica]++
		if r.Predicted {
			pr.Requests++
			predTokens += int64(r.PredictedTokens)
			predPrompt += int64(r.PromptTokens)
			predCached += int64(r.CachedTokens)
			d := r.PredictedTokens - r.CachedTokens
			absErr += int64(max(d, -d))
			switch {
			case d == 0:
				pr.Exact++
			case d > 0:
				pr.Over++
			default:
				pr.Under++
			}
		}
	}
	s.TTFT, s.TPOT, s.E2E, s.SendLag = dist(ttft), dist(tpot), dist(e2e), dist(lag)
	if whole {
		s.ITL = dist(run.ITL)
	}
	ok := len(ttft)
	if window > 0 {
		s.Offered = round(float64(s.Requests) / window.Seconds())
		s.Goodput = round(float64(good) / window.Seconds())
		span := max(window, lastEnd-run.WarmUp)
		s.Throughput = round(float64(ok) / span.Seconds())
		s.OutputTokens = round(float64(outTokens) / span.Seconds())
	}
	if s.Requests > 0 {
		s.GoodShare = round(float64(good) / float64(s.Requests))
	}
	if s.PromptTokens > 0 {
		s.HitRate = round(float64(s.CachedTokens) / float64(s.PromptTokens))
		if run.Oracle {
			o := round(float64(oracle) / float64(s.PromptTokens))
			s.OracleHitRate = &o
		}
	}
	if whole && run.Engine != nil {
		// The engines count every preemption, of requests measured or not.
		s.Preemptions = int64(run.Engine.Preemptions)
		if run.Engine.Queries > 0 {
			h := round(run.Engine.Hits / run.Engine.Queries)
			s.EngineHitRate = &h
		}
	}
	if pr.Requests > 0 {
		n := float64(pr.Requests)
		pr.Exact, pr.Over, pr.Under = round(pr.Exact/n), round(pr.Over/n), round(pr.Under/n)
		pr.MeanError = round(float64(absErr) / n)
		if predPrompt > 0 {
			pr.HitRate = round(float64(predTokens) / float64(predPrompt))
			pr.ActualHitRate = round(float64(predCached) / float64(predPrompt))
		}
		s.Prediction = &pr
	}
	names := make([]string, 0, len(shares))
	for k := range shares {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		sh := round(float64(shares[k]) / float64(ok))
		s.Shares = append(s.Shares, Share{Replica: k, Share: sh})
		s.BusiestShare = max(s.BusiestShare, sh)
	}
	return s
}

package sched

import (
	"math"
	"time"

	"github.com/inferrail/inferrail/model/cost"
	"github.com/inferrail/inferrail/model/policy"
)

// The scorers and filters of load. Where llm-d reads an endpoint's scraped
// metrics, these read the candidate's engine load report, which the
// routing actor passes only while it is fresh (load.max_age); where llm-d
// reads its in-flight counts, these read the gateway's own.

var queueScorer = Type{
	Name: "queue-scorer", Kind: KindScorer, Signals: SignalLoad,
	Doc: "Scores the engines' waiting queues, min-max normalized: the shortest 1, the longest 0, " +
		"all equal 1. A replica with no fresh load report scores 0 and does not count in the range.",
	New: func(*Fields) any { return queueDepth{} },
}

type queueDepth struct{}

func (queueDepth) Score(c *Cycle, in []int, scores []float64) {
	for k, i := range in {
		if c.Cands[i].Fresh {
			scores[k] = float64(c.Cands[i].Waiting)
		} else {
			scores[k] = math.NaN()
		}
	}
	lowerIsBetter(scores)
}

var runningRequestsSizeScorer = Type{
	Name: "running-requests-size-scorer", Kind: KindScorer, Signals: SignalLoad,
	Doc: "Scores the requests running on each replica (as its engine reports, else the gateway's " +
		"count of those past their first byte), min-max normalized: the fewest 1, the most 0, all equal 1.",
	New: func(*Fields) any { return runningRequests{} },
}

type runningRequests struct{}

func (runningRequests) Score(c *Cycle, in []int, scores []float64) {
	for k, i := range in {
		scores[k] = float64(c.Cands[i].Running)
	}
	lowerIsBetter(scores)
}

// lowerIsBetter turns values (NaN for none) into scores in place: the
// lowest 1, the highest 0, linear between, 1 when all are equal, 0 for
// none. Equal values get equal scores and the order is kept exactly, for
// values below 2^53.
func lowerIsBetter(v []float64) {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, x := range v {
		if !math.IsNaN(x) {
			lo, hi = min(lo, x), max(hi, x)
		}
	}
	for k, x := range v {
		switch {
		case math.IsNaN(x):
			v[k] = 0
		case hi == lo:
			v[k] = 1
		default:
			v[k] = (hi - x) / (hi - lo)
		}
	}
}

var kvCacheUtilizationScorer = Type{
	Name: "kv-cache-utilization-scorer", Kind: KindScorer, Signals: SignalLoad,
	Doc: "Scores 1 minus the share of the engine's KV cache in use; 0 for a replica with no fresh " +
		"load report.",
	New: func(*Fields) any { return kvUtilization{} },
}

type kvUtilization struct{}

func (kvUtilization) Score(c *Cycle, in []int, scores []float64) {
	for k, i := range in {
		if c.Cands[i].Fresh {
			scores[k] = 1 - c.Cands[i].KVUsage
		}
	}
}

var loadAwareScorer = Type{
	Name: "load-aware-scorer", Kind: KindScorer, Signals: SignalLoad,
	Doc: "Scores an empty waiting queue 0.5, falling linearly to 0 at threshold waiting requests " +
		"(llm-d's scale: its best is 0.5). A replica with no fresh load report counts as empty.",
	Params: []Param{{Name: "threshold", Default: 128, Doc: "Waiting requests that score 0."}},
	New: func(f *Fields) any {
		t := f.Int("threshold")
		if t < 1 {
			f.Fail("threshold", "want at least 1, got %d", t)
		}
		return loadAware{threshold: float64(t)}
	},
}

type loadAware struct{ threshold float64 }

func (s loadAware) Score(c *Cycle, in []int, scores []float64) {
	for k, i := range in {
		w := 0.0
		if c.Cands[i].Fresh {
			w = min(float64(c.Cands[i].Waiting), s.threshold)
		}
		scores[k] = 0.5 * (1 - w/s.threshold)
	}
}

var activeRequestScorer = Type{
	Name: "active-request-scorer", Kind: KindScorer,
	Doc: "Scores the gateway's requests in flight to each replica: at most idleThreshold scores 1, " +
		"the busiest 0, the others maxBusyScore·(busiest − n)/busiest.",
	Params: []Param{
		{Name: "idleThreshold", Default: 0, Doc: "Requests in flight up to which a replica is idle and scores 1."},
		{Name: "maxBusyScore", Default: 1.0, Doc: "The best score of a replica that is not idle, 0 to 1."},
		{Name: "requestTimeout", Default: "", Doc: "Deprecated by llm-d and ignored; accepted with a warning."},
		producerParam("inFlightLoadProducerName", "in-flight load"),
	},
	New: func(f *Fields) any {
		s := activeRequests{idle: f.Int("idleThreshold"), maxBusy: f.Float("maxBusyScore")}
		if s.idle < 0 {
			f.Fail("idleThreshold", "want at least 0, got %d", s.idle)
		}
		if s.maxBusy < 0 || s.maxBusy > 1 {
			f.Fail("maxBusyScore", "want 0 to 1, got %v", s.maxBusy)
		}
		if f.String("requestTimeout") != "" {
			f.Warn("requestTimeout", "deprecated by llm-d and ignored: the gateway counts requests in flight until they end")
		}
		f.String("inFlightLoadProducerName")
		return s
	},
}

type activeRequests struct {
	idle    int
	maxBusy float64
}

func (s activeRequests) Score(c *Cycle, in []int, scores []float64) {
	busiest := 0
	for _, i := range in {
		busiest = max(busiest, c.Cands[i].InFlight)
	}
	for k, i := range in {
		n := c.Cands[i].InFlight
		if n <= s.idle {
			scores[k] = 1
			continue
		}
		scores[k] = float64(busiest-n) / float64(busiest) * s.maxBusy
	}
}

var tokenLoadScorer = Type{
	Name: "token-load-scorer", Kind: KindScorer, Signals: SignalEstimates | SignalTokens,
	Doc: "Scores 1 − load/queueThresholdTokens (at least 0), where load is the replica's pending " +
		"tokens (uncached prompt tokens of the requests still waiting for their first byte there) plus " +
		"this prompt's tokens it does not hold.",
	Params: []Param{
		{Name: "queueThresholdTokens", Default: 4194304, Doc: "Tokens of load that score 0."},
		producerParam("inFlightLoadProducerName", "in-flight load"),
	},
	New: func(f *Fields) any {
		t := f.Int("queueThresholdTokens")
		if t < 1 {
			f.Fail("queueThresholdTokens", "want at least 1, got %d", t)
		}
		f.String("inFlightLoadProducerName")
		return tokenLoad{threshold: float64(t)}
	},
}

type tokenLoad struct{ threshold float64 }

func (s tokenLoad) Score(c *Cycle, in []int, scores []float64) {
	prompt := max(c.Req.PromptTokens, 0)
	for k, i := range in {
		cd := &c.Cands[i]
		load := float64(max(cd.PendingTokens, 0) + prompt - min(max(cd.CachedTokens, 0), prompt))
		scores[k] = 1 - min(load, s.threshold)/s.threshold
	}
}

var utilizationFilter = Type{
	Name: "utilization-filter", Kind: KindFilter, Signals: SignalLoad,
	Doc: "Sets aside the replicas over any condition's maxValue: active-requests (the gateway's in " +
		"flight), running-requests, waiting-queue or kv-cache-utilization (the engine's, 0 without a " +
		"fresh report). When that sets aside all, keeps all if fallbackOnEmpty.",
	Params: []Param{
		{Name: "conditions", Doc: "At least one condition.", Elem: []Param{
			{Name: "metric", Doc: "active-requests, running-requests, waiting-queue or kv-cache-utilization."},
			{Name: "maxValue", Doc: "The most a replica may have and be kept."},
		}},
		{Name: "fallbackOnEmpty", Default: false, Doc: "Keep every replica when every one is over."},
		producerParam("inFlightLoadProducerName", "in-flight load"),
	},
	New: newUtilization,
}

// The utilization-filter's metrics.
const (
	metricActive = iota
	metricRunning
	metricWaiting
	metricKV
)

var metricNames = []string{"active-requests", "running-requests", "waiting-queue", "kv-cache-utilization"}

type condition struct {
	metric int
	max    float64
}

type utilization struct {
	conds    []condition
	fallback bool
}

func newUtilization(f *Fields) any {
	u := &utilization{fallback: f.Bool("fallbackOnEmpty")}
	f.String("inFlightLoadProducerName")
	conds := f.List("conditions")
	if len(conds) == 0 {
		f.Fail("conditions", "want at least one condition")
	}
	for _, e := range conds {
		name := e.String("metric")
		m := -1
		for k, n := range metricNames {
			if n == name {
				m = k
			}
		}
		if m < 0 {
			e.Fail("metric", "want active-requests, running-requests, waiting-queue or kv-cache-utilization, got %q", name)
		}
		u.conds = append(u.conds, condition{metric: m, max: e.Float("maxValue")})
	}
	return u
}

func (u *utilization) value(c *policy.Candidate, metric int) float64 {
	switch metric {
	case metricActive:
		return float64(c.InFlight)
	case metricRunning:
		return float64(c.Running)
	case metricWaiting:
		if c.Fresh {
			return float64(c.Waiting)
		}
	case metricKV:
		if c.Fresh {
			return c.KVUsage
		}
	}
	return 0
}

func (u *utilization) Filter(c *Cycle, in, out []int) []int {
next:
	for _, i := range in {
		for _, cd := range u.conds {
			if u.value(&c.Cands[i], cd.metric) > cd.max {
				continue next
			}
		}
		out = append(out, i)
	}
	if len(out) == 0 && u.fallback {
		return append(out, in...)
	}
	return out
}

var estimatedTTFTScorer = Type{
	Name: "estimated-ttft-scorer", Kind: KindScorer, Own: true, Signals: SignalEstimates | SignalTokens,
	Doc: "cost_model's estimate of each replica's time to first token (its queued prefill and " +
		"running requests, plus this prompt's prefill after what it holds), min-max normalized: the " +
		"fastest 1, the slowest 0, all equal 1. It orders replicas as cost_model's estimate does, " +
		"without its hot-prefix credit.",
	Params: costModelParams,
	New:    func(f *Fields) any { return ttftScorer{m: decodeCostModel(f)} },
}

type ttftScorer struct{ m cost.Model }

func (s ttftScorer) Score(c *Cycle, in []int, scores []float64) {
	for k, i := range in {
		cd := &c.Cands[i]
		scores[k] = float64(cd.Cost(&s.m).Estimate(c.Req.PromptTokens, cd.CachedTokens, cd.QueuedPrefill, cd.Running).Total())
	}
	lowerIsBetter(scores)
}

// costModelParams are cost_model's prefill model (routing.cost_model).
var costModelParams = []Param{
	{Name: "prefillTokenSecs", Default: cost.Default().PrefillTokenSecs, Doc: "Seconds of prefill per computed token (cost_model's a)."},
	{Name: "prefillPairSecs", Default: cost.Default().PrefillPairSecs, Doc: "Seconds per pair of computed and attended tokens (b)."},
	{Name: "prefillFixedSecs", Default: cost.Default().PrefillFixedSecs, Doc: "Seconds per prefill (d)."},
	{Name: "decodeInterferenceSecs", Default: cost.Default().DecodeInterferenceSecs, Doc: "Delay each running request adds to a prefill."},
}

// decodeTokenParam is the decode step's time, for the plugins that
// estimate time per output token (cost.Model.TPOT).
var decodeTokenParam = Param{Name: "decodeTokenSecs", Default: cost.Default().DecodeTokenSecs,
	Doc: "Seconds of a decode step of one sequence (routing.cost_model.decode_token_secs)."}

// decodeTokenSecs reads decodeTokenParam.
func decodeTokenSecs(f *Fields) float64 {
	v := f.Float(decodeTokenParam.Name)
	if !(v >= 0) || math.IsInf(v, 0) {
		f.Fail(decodeTokenParam.Name, "want a finite number, at least 0, got %v", v)
	}
	return v
}

func decodeCostModel(f *Fields) cost.Model {
	m := cost.Model{
		PrefillTokenSecs:       f.Float("prefillTokenSecs"),
		PrefillPairSecs:        f.Float("prefillPairSecs"),
		PrefillFixedSecs:       f.Float("prefillFixedSecs"),
		DecodeInterferenceSecs: f.Float("decodeInterferenceSecs"),
	}
	for _, p := range costModelParams {
		if v := f.Float(p.Name); v < 0 {
			f.Fail(p.Name, "want at least 0, got %v", v)
		}
	}
	return m
}

// seconds converts float seconds from a document to a Duration.
func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

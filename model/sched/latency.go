package sched

import (
	"time"

	"github.com/inferrail/inferrail/model/cost"
)

// llm-d's latency-based scheduling (llm-d-router
// pkg/epp/framework/plugins/requestcontrol/dataproducer/predictedlatency):
// a data producer predicts each candidate's time to first token and time
// per output token, and its consumers compare them with the request's SLO.
// llm-d predicts with models its sidecars train online; Inferrail predicts
// with cost_model's estimates (model/cost), per replica where the online
// fit prices it. The consumers (slo-headroom-tier-filter, latency-scorer,
// latency-slo-admitter, prefix-cache-affinity-filter's latencyPredictor
// source) are llm-d's, reading Cycle.Latency.

// Prediction is one candidate's predicted latency against the request's
// SLO: llm-d's LatencyPredictionInfo. It is a value.
type Prediction struct {
	// TTFT and TPOT are the predicted time to first token and time per
	// output token there.
	TTFT, TPOT time.Duration
	// TTFTHeadroom is the TTFT SLO less TTFT, negative when the request
	// sets none. TPOTHeadroom is the buffered TPOT SLO less TPOT in
	// streaming mode, else 0.
	TTFTHeadroom, TPOTHeadroom time.Duration
	// TTFTValid and TPOTValid report a prediction strictly within the SLO
	// (TPOTValid always outside streaming mode and on a prefill replica).
	TTFTValid, TPOTValid bool
}

// Valid reports whether the candidate is predicted to meet both SLOs.
func (p *Prediction) Valid() bool { return p.TTFTValid && p.TPOTValid }

// The sidecar's training parameters, which Inferrail accepts and does not
// use: it trains nothing.
var (
	samplingMeanParam = Param{Name: "samplingMean", Default: 1000.0, Doc: "Mean tokens between the sidecar's TPOT training samples, above 0; accepted and unused (no training)."}
	trainingParams    = []Param{
		{Name: "maxDecodeTokenSamplesForPrediction", Default: 0, Doc: "TPOT samples a request sends for prediction; accepted and unused."},
		{Name: "contextTTL", Default: 5 * time.Minute, Doc: "Lifetime of a request's training context; accepted and unused."},
	}
)

// predictedParams are llm-d's producer's parameters, then cost_model's
// estimate's, which stand for its sidecar's trained model.
var predictedParams = append(append([]Param{samplingMeanParam}, trainingParams...), append([]Param{
	{Name: "sloBufferFactor", Default: 1.0, Doc: "Factor on the TPOT SLO a prediction must stay under, above 0."},
	{Name: "streamingMode", Default: false, Doc: "Predict and check TPOT; when false TPOT is always within the SLO (llm-d trains none)."},
	{Name: "endpointRoleLabel", Default: "", Doc: "Replica label whose value prefill marks a prefill replica, whose TPOT is not checked."},
	{Name: "predictInProduce", Default: true, Doc: "Predict at all; when false the consumers fall back as without predictions."},
	producerParam("prefixMatchInfoProducerName", "prefix match"),
}, append(costModelParams[:len(costModelParams):len(costModelParams)], decodeTokenParam)...)...)

var predictedLatencyProducer = Type{
	Name: "predicted-latency-producer", Kind: KindProducer, Signals: SignalEstimates | SignalLoad | SignalTokens,
	Doc: "Predicts each replica's time to first token and time per output token and their headroom " +
		"against the request's SLO (`x-llm-d-slo-ttft-ms`, `x-llm-d-slo-tpot-ms`), for the latency " +
		"plugins. **Inferrail's predictions are cost_model's estimates, not llm-d's sidecar models:** " +
		"TTFT is cost_model's `W + P(u, c)` (`estimated-ttft-scorer`'s), TPOT is " +
		"`decodeTokenSecs + decodeInterferenceSecs·(running + pending)`, the decode step the request " +
		"shares with the replica's running requests and those queued ahead of it; each replica's online " +
		"fit prices it where `cost_model: auto` has one. llm-d's TPOT check also lowers the SLO to the " +
		"strictest TPOT SLO running on the replica, which Inferrail does not track (equal when every " +
		"request has the same SLO). The sidecar's training parameters are accepted and unused.",
	Params: predictedParams,
	New: func(f *Fields) any {
		const untrained = "Inferrail predicts with cost_model's estimate and trains no sidecar"
		noEffect(f, untrained, trainingParams)
		switch v := f.Float(samplingMeanParam.Name); {
		case !(v > 0):
			f.Fail(samplingMeanParam.Name, "want more than 0, got %v", v)
		case v != samplingMeanParam.Default:
			f.Warn(samplingMeanParam.Name, "has no effect in Inferrail: %s", untrained)
		}
		f.String("prefixMatchInfoProducerName")
		p := &predictedLatency{
			m:         decodeCostModel(f),
			buffer:    f.Float("sloBufferFactor"),
			streaming: f.Bool("streamingMode"),
			role:      f.String("endpointRoleLabel"),
			predict:   f.Bool("predictInProduce"),
		}
		p.m.DecodeTokenSecs = decodeTokenSecs(f)
		if !(p.buffer > 0) {
			f.Fail("sloBufferFactor", "want more than 0, got %v", p.buffer)
		}
		if v := f.Int("maxDecodeTokenSamplesForPrediction"); v < 0 {
			f.Fail("maxDecodeTokenSamplesForPrediction", "want at least 0, got %d", v)
		}
		return p
	},
}

type predictedLatency struct {
	m                  cost.Model
	buffer             float64
	streaming, predict bool
	role               string
	// buf is the memory Cycle.Latency is filled in, reused.
	buf []Prediction
}

var _ Producer = (*predictedLatency)(nil)

// Produce predicts every candidate, as llm-d's validatePrediction judges
// its sidecar's predictions: TTFT is within the SLO when strictly under it
// (never without one); in streaming mode TPOT is when strictly under the
// TPOT SLO times sloBufferFactor, and is not judged otherwise.
func (p *predictedLatency) Produce(c *Cycle) {
	if !p.predict {
		return
	}
	if cap(p.buf) < len(c.Cands) {
		p.buf = make([]Prediction, len(c.Cands))
	}
	out := p.buf[:len(c.Cands)]
	slo := c.Req.SLO
	tpotSLO := time.Duration(float64(slo.TPOT) * p.buffer)
	for i := range c.Cands {
		cd := &c.Cands[i]
		m := cd.Cost(&p.m)
		pr := Prediction{
			TTFT: m.Estimate(c.Req.PromptTokens, cd.CachedTokens, cd.QueuedPrefill, cd.Running).Total(),
			TPOT: m.TPOT(max(cd.Running, 0)+max(cd.Pending, 0), 0, 1),
		}
		pr.TTFTHeadroom = slo.TTFT - pr.TTFT
		pr.TTFTValid = pr.TTFT < slo.TTFT
		pr.TPOTValid = true
		if p.streaming && !(p.role != "" && cd.Labels[p.role] == "prefill") {
			pr.TPOTHeadroom = tpotSLO - pr.TPOT
			pr.TPOTValid = pr.TPOT < tpotSLO
		}
		out[i] = pr
	}
	c.Latency = out
}

var sloHeadroomTierFilter = Type{
	Name: "slo-headroom-tier-filter", Kind: KindFilter, Signals: SignalEstimates | SignalLoad | SignalTokens,
	Doc: "Splits the replicas into those predicted within both SLOs (headroom at least 0) and the " +
		"others, and keeps the first tier, or the second with probability epsilonExploreNeg so that " +
		"overloaded replicas see some traffic; the one tier there is when there is one, and every " +
		"replica without predictions (no predicted-latency-producer).",
	Params: []Param{
		{Name: "epsilonExploreNeg", Default: 0.01, Doc: "Chance of keeping the replicas outside the SLO when both tiers have some, 0 to 1."},
	},
	New: func(f *Fields) any {
		t := &headroomTier{explore: f.Float("epsilonExploreNeg")}
		if !(t.explore >= 0 && t.explore <= 1) {
			f.Fail("epsilonExploreNeg", "want 0 to 1, got %v", t.explore)
		}
		return t
	},
}

type headroomTier struct{ explore float64 }

func (t *headroomTier) Filter(c *Cycle, in, out []int) []int {
	if len(in) <= 1 || c.Latency == nil {
		return append(out, in...)
	}
	pos, neg := 0, 0
	for _, i := range in {
		if positive(&c.Latency[i]) {
			pos++
		} else {
			neg++
		}
	}
	keep := pos > 0
	if pos > 0 && neg > 0 && c.Rng.Float64() < t.explore {
		keep = false
	}
	for _, i := range in {
		if positive(&c.Latency[i]) == keep {
			out = append(out, i)
		}
	}
	return out
}

// positive reports headroom on both SLOs, as the tier filter counts it
// (at least 0; validity is strictly within).
func positive(p *Prediction) bool { return p.TTFTHeadroom >= 0 && p.TPOTHeadroom >= 0 }

var latencySLOAdmitter = Type{
	Name: "latency-slo-admitter", Kind: KindAdmitter, Signals: SignalEstimates | SignalLoad | SignalTokens,
	Doc: "Refuses a request that sets an SLO when no replica is predicted within it, none is idle " +
		"(no running request) and none is cold (KV cache under 2% used, or no fresh load report): the " +
		"decision returns policy.ErrNotAdmitted. Without predictions it admits everything. llm-d " +
		"refuses only sheddable requests (negative priority); Inferrail's decision does not see flow " +
		"control's priority, so it takes every request with an SLO as sheddable.",
	Params: []Param{producerParam("latencyPredictionInfoProducerName", "latency prediction")},
	New: func(f *Fields) any {
		f.String("latencyPredictionInfoProducerName")
		return latencySLO{}
	},
}

type latencySLO struct{}

var _ Admitter = latencySLO{}

// coldKVUsage is llm-d's KV cache use under which a replica is cold and
// its predictions not trusted.
const coldKVUsage = 0.02

func (latencySLO) Admit(c *Cycle) bool {
	if c.Latency == nil || c.Req.SLO.TTFT <= 0 && c.Req.SLO.TPOT <= 0 {
		return true
	}
	for i := range c.Cands {
		cd := &c.Cands[i]
		if c.Latency[i].Valid() || cd.Running == 0 || !cd.Fresh || cd.KVUsage < coldKVUsage {
			return true
		}
	}
	return false
}

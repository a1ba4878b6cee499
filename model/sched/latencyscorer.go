package sched

import (
	"math"
	"time"
)

// latency-scorer (llm-d-router
// pkg/epp/framework/plugins/scheduling/scorer/latency): scores the
// headroom predicted-latency-producer predicts.

// The headroom selection strategies.
const (
	// strategyLeast prefers the replicas closest to the SLO, packing
	// requests to keep others free for later ones.
	strategyLeast = "least"
	// strategyMost prefers the replicas with the most headroom.
	strategyMost = "most"
)

// latencyLevels is llm-d's score resolution: a score is a whole number
// of levels from 1 to latencyLevels+1. llm-d divides by latencyLevels,
// which puts the best at 1.01; Inferrail divides by latencyLevels+1 so
// that scores stay within [0, 1], which keeps their ratios (all the
// weighted-random picker reads) and their order.
const latencyLevels = 100

var latencyScorer = Type{
	Name: "latency-scorer", Kind: KindScorer, Signals: SignalEstimates | SignalLoad | SignalTokens,
	Doc: "Scores the predicted headroom (SLO − predicted, from predicted-latency-producer): when some " +
		"replicas are within both SLOs only those are scored, by the blend ttftWeight·TTFT + " +
		"tpotWeight·TPOT of their headrooms normalized min-max, closest to the SLO best (`least`) or " +
		"farthest (`most`); when none is, the idle replicas (nothing in flight) if any, else the least " +
		"severe group (only TPOT missed, then only TTFT, then both), closest to the SLO best. A " +
		"dimension whose headrooms are all equal drops out of the blend. Without predictions it scores " +
		"compositeKVWeight·free KV cache + compositeQueueWeight·(1 − waiting / most waiting) + " +
		"compositePrefixWeight·prefix match, the weights normalized. Scores are whole levels of 1/101.",
	Params: []Param{
		{Name: "ttftWeight", Default: 0.8, Doc: "Weight of the TTFT headroom, at least 0."},
		{Name: "tpotWeight", Default: 0.2, Doc: "Weight of the TPOT headroom, at least 0."},
		{Name: "headroomSelectionStrategy", Default: strategyLeast, Doc: "least (closest to the SLO) or most (most headroom)."},
		{Name: "compositeKVWeight", Default: 1.0, Doc: "Weight of the free KV cache without predictions."},
		{Name: "compositeQueueWeight", Default: 1.0, Doc: "Weight of the waiting queue without predictions."},
		{Name: "compositePrefixWeight", Default: 1.0, Doc: "Weight of the prefix match without predictions."},
		producerParam("latencyPredictionInfoProducerName", "latency prediction"),
		producerParam("prefixMatchInfoProducerName", "prefix match"),
	},
	New: func(f *Fields) any {
		s := &latencyScore{
			ttft: f.Float("ttftWeight"), tpot: f.Float("tpotWeight"),
			most: f.String("headroomSelectionStrategy") == strategyMost,
			kv:   f.Float("compositeKVWeight"), queue: f.Float("compositeQueueWeight"), prefix: f.Float("compositePrefixWeight"),
		}
		for _, k := range []string{"ttftWeight", "tpotWeight", "compositeKVWeight", "compositeQueueWeight", "compositePrefixWeight"} {
			if v := f.Float(k); !(v >= 0) {
				f.Fail(k, "want at least 0, got %v", v)
			}
		}
		if st := f.String("headroomSelectionStrategy"); st != strategyLeast && st != strategyMost {
			f.Fail("headroomSelectionStrategy", "want %s or %s, got %q", strategyLeast, strategyMost, st)
		}
		f.String("latencyPredictionInfoProducerName")
		f.String("prefixMatchInfoProducerName")
		return s
	},
}

type latencyScore struct {
	ttft, tpot, kv, queue, prefix float64
	most                          bool
	// group is the memory for the positions scored, reused.
	group []int
}

func (s *latencyScore) Score(c *Cycle, in []int, scores []float64) {
	if c.Latency == nil {
		s.composite(c, in, scores)
		return
	}
	// Positions in in, of the group that is scored; the rest score 0.
	g := s.group[:0]
	for k, i := range in {
		if positive(&c.Latency[i]) {
			g = append(g, k)
		}
	}
	least := !s.most
	if len(g) == 0 {
		least = true // "most" would prefer the most overloaded
		for k, i := range in {
			if c.Cands[i].InFlight == 0 {
				g = append(g, k)
			}
		}
	}
	if len(g) == 0 {
		// The least severe deficit: only TPOT missed, then only TTFT.
		for _, want := range [...][2]bool{{false, true}, {true, false}, {true, true}} {
			for k, i := range in {
				p := &c.Latency[i]
				if (p.TTFTHeadroom < 0) == want[0] && (p.TPOTHeadroom < 0) == want[1] {
					g = append(g, k)
				}
			}
			if len(g) > 0 {
				break
			}
		}
	}
	s.group = g
	s.bucket(c, in, g, scores, least)
}

// bucket scores the group g (positions in in) by its normalized headroom.
func (s *latencyScore) bucket(c *Cycle, in, g []int, scores []float64, least bool) {
	alpha, beta := 1.0, 0.0
	if sum := s.ttft + s.tpot; sum > 0 {
		alpha, beta = s.ttft/sum, s.tpot/sum
	}
	minT, maxT := math.Inf(1), math.Inf(-1)
	minP, maxP := math.Inf(1), math.Inf(-1)
	for _, k := range g {
		p := &c.Latency[in[k]]
		t, q := absMs(p.TTFTHeadroom), absMs(p.TPOTHeadroom)
		minT, maxT = min(minT, t), max(maxT, t)
		minP, maxP = min(minP, q), max(maxP, q)
	}
	const eps = 1e-9 // llm-d's, in milliseconds
	rangeT, rangeP := maxT-minT, maxP-minP
	switch {
	case rangeT <= eps && rangeP > eps:
		alpha, beta = 0, 1
	case rangeP <= eps && rangeT > eps:
		alpha, beta = 1, 0
	}
	for _, k := range g {
		p := &c.Latency[in[k]]
		nT, nP := 0.5, 0.5
		if rangeT > eps {
			nT = (absMs(p.TTFTHeadroom) - minT) / rangeT
		}
		if rangeP > eps {
			nP = (absMs(p.TPOTHeadroom) - minP) / rangeP
		}
		combined := alpha*nT + beta*nP
		if least {
			combined = 1 - combined
		}
		scores[k] = float64(int(combined*latencyLevels)+1) / (latencyLevels + 1)
	}
}

// absMs is |d| in milliseconds, llm-d's unit.
func absMs(d time.Duration) float64 { return math.Abs(float64(d) / float64(time.Millisecond)) }

// composite is llm-d's fallback without predictions.
func (s *latencyScore) composite(c *Cycle, in []int, scores []float64) {
	kv, queue, prefix := s.kv, s.queue, s.prefix
	if sum := kv + queue + prefix; sum > 0 {
		kv, queue, prefix = kv/sum, queue/sum, prefix/sum
	} else {
		kv, queue, prefix = 1, 0, 0
	}
	most := 0
	for _, i := range in {
		most = max(most, c.Cands[i].Waiting)
	}
	for k, i := range in {
		cd := &c.Cands[i]
		rel := 1.0
		if most > 0 {
			rel = float64(most-cd.Waiting) / float64(most)
		}
		v := kv*(1-cd.KVUsage) + queue*rel + prefix*matchRatio(c, i)
		scores[k] = math.Round(latencyLevels*v) / latencyLevels
	}
}

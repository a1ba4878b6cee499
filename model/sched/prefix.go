package sched

import (
	"cmp"
	"slices"
)

// The plugins that route on a candidate's prefix match: llm-d's
// PrefixCacheMatchInfo (matched and total blocks) is, here, the prompt's
// full blocks (policy.Request.Blocks) and the blocks of them the candidate
// is predicted to hold (CachedTokens, from the shadow index or, where the
// replica follows its engine's KV events, the KV-event index).

// producerParam is the name of the producer a plugin reads from, which
// llm-d configs may set. Inferrail has one producer per signal, so any
// name reads the same data.
func producerParam(name, data string) Param {
	return Param{Name: name, Default: "", Doc: "The producer of the " + data + " llm-d reads; " +
		"accepted for compatibility: Inferrail has one source of it."}
}

// prefixMatch returns how many of the prompt's full blocks candidate i is
// predicted to hold, and how many full blocks the prompt has.
func prefixMatch(c *Cycle, i int) (match, total int) {
	total = len(c.Req.Blocks)
	bs := c.Req.BlockSize
	if bs <= 0 {
		bs = 16 // vLLM's default, as policy.Request documents
	}
	return min(max(c.Cands[i].CachedTokens, 0)/bs, total), total
}

// blockSize is the request's block size, 16 when unset.
func blockSize(c *Cycle) int {
	if c.Req.BlockSize > 0 {
		return c.Req.BlockSize
	}
	return 16
}

// matchRatio is the share of the prompt's blocks candidate i holds, 0 for
// a prompt of no full block.
func matchRatio(c *Cycle, i int) float64 {
	m, t := prefixMatch(c, i)
	if t == 0 {
		return 0
	}
	return float64(m) / float64(t)
}

var prefixCacheScorer = Type{
	Name: "prefix-cache-scorer", Kind: KindScorer, Signals: SignalEstimates | SignalTokens,
	Doc: "Scores the share of the prompt's blocks a replica is predicted to hold, " +
		"`w·min(1, matched tokens / matchLengthScaleTokens)² + (1−w)·matched blocks / prompt blocks` " +
		"with w = matchLengthWeight. The prediction is the shadow index's, or the KV-event index's " +
		"where the replica follows its engine's events.",
	Params: []Param{
		{Name: "matchLengthWeight", Default: 0.0, Doc: "Weight of the matched length against the matched share, 0 to 1."},
		{Name: "matchLengthScaleTokens", Default: 8192, Doc: "Matched tokens that make the length term 1; above 0 when matchLengthWeight is."},
		producerParam("prefixMatchInfoProducerName", "prefix match"),
	},
	New: func(f *Fields) any {
		s := &prefixScorer{weight: f.Float("matchLengthWeight"), scale: f.Int("matchLengthScaleTokens")}
		f.String("prefixMatchInfoProducerName")
		if s.weight < 0 || s.weight > 1 {
			f.Fail("matchLengthWeight", "want 0 to 1, got %v", s.weight)
		}
		if s.weight > 0 && s.scale <= 0 {
			f.Fail("matchLengthScaleTokens", "want more than 0 when matchLengthWeight is, got %d", s.scale)
		}
		return s
	},
}

type prefixScorer struct {
	weight float64
	scale  int
}

func (s *prefixScorer) Score(c *Cycle, in []int, scores []float64) {
	bs := blockSize(c)
	for k, i := range in {
		m, t := prefixMatch(c, i)
		if t == 0 {
			continue
		}
		length := 0.0
		if s.weight > 0 {
			length = min(1, float64(m*bs)/float64(s.scale))
			length *= length
		}
		scores[k] = s.weight*length + (1-s.weight)*float64(m)/float64(t)
	}
}

var prefixCacheAffinityFilter = Type{
	Name: "prefix-cache-affinity-filter", Kind: KindFilter, Signals: SignalEstimates | SignalTokens,
	Doc: "Keeps only the sticky replicas, those holding at least affinityThreshold of the prompt's " +
		"blocks, when there are any; keeps every replica instead with probability " +
		"explorationProbability, or when the best sticky replica's time to first token, estimated as " +
		"its pending tokens over peakPrefillThroughput (or predicted by predicted-latency-producer, " +
		"ttftSource latencyPredictor), exceeds the best other's by more than " +
		"maxTTFTPenaltyMs (llm-d's \"sticky until saturated\").",
	Params: []Param{
		{Name: "affinityThreshold", Default: 0.80, Doc: "Share of the prompt's blocks that makes a replica sticky, 0 to 1."},
		{Name: "explorationProbability", Default: 0.0, Doc: "Chance of skipping the filter, 0 to 1."},
		{Name: "maxTTFTPenaltyMs", Default: 18000.0, Doc: "Time to first token, in ms, the sticky replicas may lose before the filter keeps all; 0 always sticks."},
		{Name: "ttftSource", Default: ttftThroughput, Doc: "How the time to first token is estimated: prefillThroughput, or latencyPredictor (predicted-latency-producer's prediction; without one every replica is kept, as llm-d does on a missing signal)."},
		{Name: "peakPrefillThroughput", Default: 15928.0, Doc: "Prefill tokens per second of one replica, for prefillThroughput."},
		{Name: "prefillCalibrationFile", Default: "", Doc: "Refused when set: set peakPrefillThroughput instead."},
		{Name: "prefillCalibrationFingerprint", Default: "", Doc: "Refused when set, as prefillCalibrationFile."},
		{Name: "prefillCalibrationRequired", Default: false, Doc: "Refused when true, as prefillCalibrationFile."},
		producerParam("prefixMatchInfoProducerName", "prefix match"),
		producerParam("latencyPredictionInfoProducerName", "latency prediction"),
		producerParam("inFlightLoadProducerName", "in-flight load"),
	},
	New: newPrefixAffinity,
}

// The prefix-cache-affinity-filter's TTFT sources.
const (
	ttftThroughput = "prefillThroughput"
	ttftPredictor  = "latencyPredictor"
)

type prefixAffinity struct {
	threshold, explore, maxPenaltyMs, peak float64
	// predictor reads the TTFT from Cycle.Latency (ttftSource
	// latencyPredictor).
	predictor bool
}

func newPrefixAffinity(f *Fields) any {
	p := &prefixAffinity{
		threshold:    f.Float("affinityThreshold"),
		explore:      f.Float("explorationProbability"),
		maxPenaltyMs: f.Float("maxTTFTPenaltyMs"),
		peak:         f.Float("peakPrefillThroughput"),
	}
	if p.threshold < 0 || p.threshold > 1 {
		f.Fail("affinityThreshold", "want 0 to 1, got %v", p.threshold)
	}
	if p.explore < 0 || p.explore > 1 {
		f.Fail("explorationProbability", "want 0 to 1, got %v", p.explore)
	}
	if p.maxPenaltyMs < 0 {
		f.Fail("maxTTFTPenaltyMs", "want at least 0, got %v", p.maxPenaltyMs)
	}
	switch src := f.String("ttftSource"); src {
	case ttftThroughput:
	case ttftPredictor:
		p.predictor = true
	default:
		f.Fail("ttftSource", "want %s or %s, got %q", ttftThroughput, ttftPredictor, src)
	}
	if p.maxPenaltyMs > 0 && !p.predictor && !(p.peak > 0) {
		f.Fail("peakPrefillThroughput", "want more than 0 when maxTTFTPenaltyMs is, got %v", p.peak)
	}
	for _, k := range []string{"prefillCalibrationFile", "prefillCalibrationFingerprint"} {
		if f.String(k) != "" {
			f.Fail(k, "not supported: set peakPrefillThroughput")
		}
	}
	if f.Bool("prefillCalibrationRequired") {
		f.Fail("prefillCalibrationRequired", "not supported: set peakPrefillThroughput")
	}
	for _, k := range []string{"prefixMatchInfoProducerName", "latencyPredictionInfoProducerName", "inFlightLoadProducerName"} {
		f.String(k)
	}
	return p
}

func (p *prefixAffinity) Filter(c *Cycle, in, out []int) []int {
	if len(in) <= 1 || p.threshold <= 0 || p.explore > 0 && c.Rng.Float64() < p.explore {
		return append(out, in...)
	}
	// The best (lowest) estimated time to first token of the sticky and
	// of the other replicas, in ms.
	bestSticky, bestOther, others := 0.0, 0.0, 0
	// Without predictions the latencyPredictor signal is missing, and
	// llm-d then keeps every replica (when the gate would run).
	missing := p.predictor && c.Latency == nil
	for _, i := range in {
		var ttft float64
		switch {
		case missing:
		case p.predictor:
			ttft = absMs(c.Latency[i].TTFT)
		default:
			ttft = float64(max(c.Cands[i].PendingTokens, 0)) / p.peak * 1000
		}
		if matchRatio(c, i) >= p.threshold {
			if len(out) == 0 || ttft < bestSticky {
				bestSticky = ttft
			}
			out = append(out, i)
			continue
		}
		if others == 0 || ttft < bestOther {
			bestOther = ttft
		}
		others++
	}
	if len(out) == 0 || p.maxPenaltyMs > 0 && others > 0 && (missing || bestSticky-bestOther > p.maxPenaltyMs) {
		return append(out[:0], in...)
	}
	return out
}

var noHitLRUScorer = Type{
	Name: "no-hit-lru-scorer", Kind: KindScorer, Signals: SignalEstimates | SignalTokens,
	Doc: "For a cold request (no replica holds a block of the prompt), scores the replicas by how " +
		"long ago they last took a cold request: never first (1.0), then least recently, so new " +
		"prefixes spread; for any other request, 0.5 for every replica.",
	Params: []Param{
		{Name: "lruSize", Default: 1024, Doc: "Replicas the recency list remembers."},
		{Name: "prefixPluginType", Default: "", Doc: "Deprecated by llm-d and never used; accepted with a warning."},
		{Name: "prefixPluginName", Default: "", Doc: "Deprecated by llm-d and never used; accepted with a warning."},
		producerParam("prefixMatchInfoProducerName", "prefix match"),
	},
	New: func(f *Fields) any {
		s := &noHitLRU{size: f.Int("lruSize"), tick: map[uint64]uint64{}}
		if s.size < 1 {
			f.Fail("lruSize", "want at least 1, got %d", s.size)
		}
		for _, k := range []string{"prefixPluginType", "prefixPluginName"} {
			if f.String(k) != "" {
				f.Warn(k, "deprecated by llm-d and never used")
			}
		}
		f.String("prefixMatchInfoProducerName")
		return s
	},
}

// noHitLRU remembers, per replica key, when it last took a cold
// request: order holds the remembered replicas oldest first, by an
// increasing tick, so a replica's place in the recency order is a binary
// search. isCold is Score's finding, kept for Picked.
type noHitLRU struct {
	size   int
	tick   map[uint64]uint64
	order  []lruEntry
	now    uint64
	isCold bool
}

type lruEntry struct{ tick, key uint64 }

// cold reports that no candidate of in holds a block of the prompt.
func cold(c *Cycle, in []int) bool {
	for _, i := range in {
		if m, _ := prefixMatch(c, i); m > 0 {
			return false
		}
	}
	return true
}

// place returns where the entry of tick t is in order.
func (s *noHitLRU) place(t uint64) int {
	k, _ := slices.BinarySearchFunc(s.order, t, func(e lruEntry, t uint64) int { return cmp.Compare(e.tick, t) })
	return k
}

func (s *noHitLRU) Score(c *Cycle, in []int, scores []float64) {
	n := len(in)
	s.isCold = cold(c, in)
	switch {
	case !s.isCold:
		for k := range scores {
			scores[k] = 0.5
		}
		return
	case n == 1:
		scores[0] = 1
		return
	}
	// Never-used replicas first, in order, then the used ones from the
	// least recently used: rank r scores 1 - r/(n-1), as llm-d.
	never := 0
	for k, i := range in {
		if _, ok := s.tick[replicaKey(&c.Cands[i])]; !ok {
			scores[k] = 1 - float64(never)/float64(n-1)
			never++
		}
	}
	for k, i := range in {
		if t, ok := s.tick[replicaKey(&c.Cands[i])]; ok {
			scores[k] = max(0, 1-float64(never+s.place(t))/float64(n-1))
		}
	}
}

// Picked moves a cold request's replica to the most recent place.
func (s *noHitLRU) Picked(c *Cycle, winner int) {
	if !s.isCold {
		return
	}
	key := replicaKey(&c.Cands[winner])
	if t, ok := s.tick[key]; ok {
		k := s.place(t)
		s.order = append(s.order[:k], s.order[k+1:]...)
	} else if len(s.order) == s.size {
		delete(s.tick, s.order[0].key)
		s.order = append(s.order[:0], s.order[1:]...)
	}
	s.now++
	s.tick[key] = s.now
	s.order = append(s.order, lruEntry{s.now, key})
}

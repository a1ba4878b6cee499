package whatif

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/inferrail/inferrail/model/cost"
)

// ParseFragment reads the cost_model fragment inferrail calibrate writes
// (cost.Fragment): a cost_model mapping at the top, or under routing:, with
// prefill_token_secs, prefill_pair_secs and prefill_fixed_secs.
func ParseFragment(b []byte) (cost.Model, error) {
	var doc struct {
		CostModel *fragment `yaml:"cost_model"`
		Routing   struct {
			CostModel *fragment `yaml:"cost_model"`
		} `yaml:"routing"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return cost.Model{}, fmt.Errorf("cost_model fragment: %w", err)
	}
	f := doc.CostModel
	if f == nil {
		f = doc.Routing.CostModel
	}
	if f == nil {
		return cost.Model{}, errors.New("cost_model fragment: no cost_model mapping (at the top or under routing:)")
	}
	var errs []error
	for _, kv := range []struct {
		key string
		v   *float64
	}{{"prefill_token_secs", f.Token}, {"prefill_pair_secs", f.Pair}, {"prefill_fixed_secs", f.Fixed}} {
		switch {
		case kv.v == nil:
			errs = append(errs, fmt.Errorf("cost_model.%s: missing", kv.key))
		case !(*kv.v >= 0) || math.IsInf(*kv.v, 0) || *kv.v > 10:
			errs = append(errs, fmt.Errorf("cost_model.%s: %v: want seconds from 0 to 10", kv.key, *kv.v))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return cost.Model{}, err
	}
	return cost.Model{PrefillTokenSecs: *f.Token, PrefillPairSecs: *f.Pair, PrefillFixedSecs: *f.Fixed}, nil
}

type fragment struct {
	Token *float64 `yaml:"prefill_token_secs"`
	Pair  *float64 `yaml:"prefill_pair_secs"`
	Fixed *float64 `yaml:"prefill_fixed_secs"`
}

// WithPrefill returns base with its prefill latency (a, b and d) replaced by
// m's: a calibrated or fitted engine keeps its decode step times and KV
// capacity from base. name and source label it.
func WithPrefill(base Engine, m cost.Model, name, source string) Engine {
	e := base
	e.Name, e.Source = name, source
	e.Config.Latency.PrefillToken = secs(m.PrefillTokenSecs)
	e.Config.Latency.PrefillPair = m.PrefillPairSecs * 1e9
	e.Config.Latency.PrefillFixed = secs(m.PrefillFixedSecs)
	return e
}

func secs(s float64) time.Duration { return time.Duration(math.Round(s * 1e9)) }

// Logged is what a request log says of one request (the request log's
// fields, observability.request_log): what FitLog and the fidelity check
// read.
type Logged struct {
	// Policy and Replica are the policy that routed it and the replica that
	// served it.
	Policy, Replica string
	// Input is its prompt's tokens, Cached those the engine found cached
	// (HasCached: the engine reported it).
	Input, Cached int
	HasCached     bool
	// TTFT is its measured time to first token (Measured: it has one).
	TTFT     time.Duration
	Measured bool
}

// FitOptions tune FitLog.
type FitOptions struct {
	// Quantile is the share of each size bucket's fastest requests kept;
	// 0 takes 0.1.
	Quantile float64
	// MinPerBucket is how many requests a bucket needs to count; 0 takes 5.
	MinPerBucket int
}

// FitReport says what FitLog kept.
type FitReport struct {
	Requests, Kept, Buckets int
	// RelError is the fit's RMS relative error over the kept requests.
	RelError float64
}

// FitLog fits the prefill parameters a, b and d to a request log's own
// times to first token, with model/cost's Fit on samples u = input - cached,
// c = cached, over the requests with a measured TTFT whose engine reported
// cached_tokens (without it, u would count cached tokens as computed).
//
// A logged TTFT is the prefill plus everything before it: the wait in the
// engine's queue, the decode steps it shared, the gateway and the network.
// Fitting every request would price prefill with the queueing of the
// traffic the log saw, which is what a whatif varies. So the requests are
// bucketed by u (powers of two) and c (none, or some cached), and only the
// fastest Quantile of each bucket is kept: requests of one size that found
// the engine idle, whose TTFT is the closest to the prefill alone. Their
// bias remains upward (network, gateway, a decode step in flight), so the
// fit prices prefill a little high: a conservative whatif. The minimum of a
// bucket would be the least biased, but one request whose cached_tokens
// was misreported would then decide it; a low quantile is robust to that.
func FitLog(obs []Logged, o FitOptions) (cost.Model, FitReport, error) {
	q := o.Quantile
	if q == 0 {
		q = 0.1
	}
	minN := o.MinPerBucket
	if minN == 0 {
		minN = 5
	}
	if !(q > 0 && q <= 1) || minN < 1 {
		return cost.Model{}, FitReport{}, fmt.Errorf("fit: quantile %v, minimum per bucket %d: want a quantile in (0, 1] and a minimum of at least 1", q, minN)
	}
	type key struct{ bits, cached int }
	buckets := map[key][]Logged{}
	rep := FitReport{}
	for _, ob := range obs {
		u := ob.Input - ob.Cached
		if !ob.Measured || !ob.HasCached || u < 1 || ob.Cached < 0 || ob.TTFT <= 0 {
			continue
		}
		rep.Requests++
		k := key{bits: bitLen(u), cached: min(ob.Cached, 1)}
		buckets[k] = append(buckets[k], ob)
	}
	var samples []cost.Sample
	keys := make([]key, 0, len(buckets))
	for k := range buckets {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b key) int { return (a.bits*2 + a.cached) - (b.bits*2 + b.cached) })
	for _, k := range keys {
		b := buckets[k]
		if len(b) < minN {
			continue
		}
		slices.SortFunc(b, func(x, y Logged) int { return int(x.TTFT - y.TTFT) })
		keep := max(int(float64(len(b))*q), 1)
		for _, ob := range b[:keep] {
			samples = append(samples, cost.Sample{Computed: ob.Input - ob.Cached, Cached: ob.Cached, Secs: ob.TTFT.Seconds()})
		}
		rep.Buckets++
	}
	rep.Kept = len(samples)
	m, err := cost.Fit(samples)
	if err != nil {
		return cost.Model{}, rep, fmt.Errorf("fit: %d requests with a measured TTFT, %d kept in %d buckets of at least %d: %w",
			rep.Requests, rep.Kept, rep.Buckets, minN, err)
	}
	rep.RelError = cost.RelError(m, samples)
	return m, rep, nil
}

func bitLen(n int) int {
	b := 0
	for ; n > 0; n >>= 1 {
		b++
	}
	return b
}

// WithBlockSize returns e with KV blocks of size tokens, its KV capacity in
// tokens kept (rounded down to whole blocks).
//
// Coarser blocks simulate faster: the engines, the gateway's shadow
// indexes and the oracle hash and look up one entry per block, so 256-token
// blocks do about a sixteenth of the work of vLLM's 16 on a long-prompt
// trace. On a trace whose hash ids name 512-token blocks (Mooncake's) two
// prompts share prefixes in whole 512-token blocks anyway, so the hits
// barely change; what changes is that a sequence holds up to a block of
// unused KV and that a prompt's partial last block is not cached. Measured
// on the first 2,000 requests of the Mooncake conversation trace, h100-8b,
// cost_model on 6 replicas: blocks of 16 took 2.85 s and gave a hit rate of
// 0.113, p50 TTFT 436 ms, p99 TTFT 7.26 s; blocks of 256 took 0.61 s and
// gave 0.116, 427 ms and 7.26 s.
func (e Engine) WithBlockSize(size int) (Engine, error) {
	old := e.Config.BlockSize
	if size < 1 || old < 1 {
		return e, fmt.Errorf("engine block size %d: want at least 1", size)
	}
	if size == old {
		return e, nil
	}
	n := e.Config.NumBlocks * old / size
	if n < 1 {
		return e, fmt.Errorf("engine block size %d: the KV cache of %d tokens holds no block", size, e.Config.NumBlocks*old)
	}
	e.Config.BlockSize, e.Config.NumBlocks = size, n
	e.Source += fmt.Sprintf("; KV blocks of %d tokens instead of %d, the same capacity in tokens, to simulate faster", size, old)
	return e, nil
}

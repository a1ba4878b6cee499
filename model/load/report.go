package load

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Engines, as Report.Engine names them.
const (
	EngineVLLM   = "vllm"
	EngineSGLang = "sglang"
)

// ErrUnreadable means a page could not be read as an engine's load: it lacks
// a family the Report needs (a *MissingError), belongs to no known engine,
// or a line of a family read is malformed. The error wrapping it names what
// was wrong. An unreadable page says nothing about the engine's load; it
// must never be taken for an idle engine.
var ErrUnreadable = errors.New("load: unreadable page")

// MissingError is the error of a page that lacks families routing needs:
// running, waiting or KV usage. It wraps ErrUnreadable.
type MissingError struct {
	// Engine is EngineVLLM or EngineSGLang.
	Engine string
	// Families are the missing families' names, such as
	// vllm:kv_cache_usage_perc, in a fixed order.
	Families []string
}

func (e *MissingError) Error() string {
	return fmt.Sprintf("%v: %s: missing %s", ErrUnreadable, e.Engine, strings.Join(e.Families, ", "))
}

func (e *MissingError) Unwrap() error { return ErrUnreadable }

// Families is a set of the optional families of a page that Report.Missing
// reports. Report.MissingNames spells them in the engine's names.
type Families uint8

const (
	// FamPrefixQueries: vllm:prefix_cache_queries.
	FamPrefixQueries Families = 1 << iota
	// FamPrefixHits: vllm:prefix_cache_hits.
	FamPrefixHits
	// FamPreemptions: vllm:num_preemptions.
	FamPreemptions
	// FamCapacity: vllm:cache_config_info; sglang:max_total_num_tokens.
	FamCapacity
)

// Field is a set of the optional parts of a Report.
type Field uint8

const (
	// FieldPrefix: PrefixQueries and PrefixHits were on the page (for
	// SGLang, prompt_tokens_total; its cached_tokens_total comes with the
	// first cache hit).
	FieldPrefix Field = 1 << iota
	// FieldPreemptions: Preemptions was on the page.
	FieldPreemptions
	// FieldCapacity: the KV capacity is known for every rank:
	// KVCapacityTokens, and for vLLM also KVCapacityBlocks and BlockSize.
	FieldCapacity
)

// Report is one engine's load as its metrics page showed it. Counts are
// float64 because that is how Prometheus carries them; the sums are exact
// below 2^53. A Report is a plain value.
type Report struct {
	// Engine is EngineVLLM or EngineSGLang.
	Engine string
	// Ranks is how many data-parallel ranks reported running requests.
	Ranks int
	// Running and Waiting are the requests running and waiting, summed over
	// the ranks (vllm:num_requests_running and vllm:num_requests_waiting;
	// sglang:num_running_reqs and sglang:num_queue_reqs).
	Running, Waiting float64
	// KVUsage is the fraction of the KV cache in use, 0 to 1
	// (vllm:kv_cache_usage_perc, sglang:token_usage), the mean over the
	// ranks. Every rank of an engine has a KV pool of the same size, so
	// the mean is the fraction of the engine's whole pool in use; the engine
	// places each new request on one rank itself, so one full rank does not
	// make the replica full. KVUsageMax is the fullest rank, for a guard
	// that wants it. Values above 1 are read as 1.
	KVUsage, KVUsageMax float64
	// PrefixQueries and PrefixHits are the prefix cache counters in tokens,
	// summed over the ranks: vllm:prefix_cache_queries and
	// vllm:prefix_cache_hits; for SGLang, sglang:prompt_tokens_total and
	// sglang:cached_tokens_total, since its cache_hit_rate gauge only
	// describes the last logged batch (shared/reference/vllm.md §4).
	// Valid when Fields has FieldPrefix.
	PrefixQueries, PrefixHits float64
	// Preemptions counts preempted requests (vllm:num_preemptions;
	// SGLang's retractions, sglang:num_retracted_requests_total). Valid
	// when Fields has FieldPreemptions.
	Preemptions float64
	// KVCapacityBlocks is the KV cache size in blocks of BlockSize tokens,
	// summed over the ranks (vLLM's num_gpu_blocks in
	// vllm:cache_config_info). SGLang does not show its page size, so for
	// SGLang both are 0. Valid when Fields has FieldCapacity.
	KVCapacityBlocks int
	BlockSize        int
	// KVCapacityTokens is the KV cache size in tokens, summed over the
	// ranks: KVCapacityBlocks*BlockSize for vLLM,
	// sglang:max_total_num_tokens for SGLang. Valid when Fields has
	// FieldCapacity.
	KVCapacityTokens int64
	// Fields says which optional parts were on the page.
	Fields Field
	// Missing is the optional families the engine creates at start-up
	// beside the required ones and the page lacked: a vLLM started
	// without prefix caching, or an exporter that leaves them out. The
	// Report is read without them: Fields says what that cost. Families
	// an engine creates on first use (SGLang's counters) are never
	// missing.
	Missing Families
}

// Has reports whether r carries every part in f.
func (r Report) Has(f Field) bool { return r.Fields&f == f }

// Restarted reports whether the engine behind cur is not the process that
// produced prev: a counter that only grows went backwards (the prefix cache
// counters, or preemptions), or the engine changed kind. Counters are
// compared only where prev had them; a counter prev had and cur lacks reads
// as zero, as SGLang creates its counters anew after a restart. A zero prev
// (no earlier report) never signals a restart. A restart empties the
// engine's prefix cache, so the caller forgets what it predicted there.
//
// Both reports must come from Parse without error, for the same replica.
// A restart that races ahead of the old counters between two scrapes is not
// seen.
func Restarted(prev, cur Report) bool {
	if prev.Engine == "" {
		return false
	}
	if prev.Engine != cur.Engine {
		return true
	}
	if prev.Has(FieldPrefix) {
		q, h := cur.PrefixQueries, cur.PrefixHits
		if !cur.Has(FieldPrefix) {
			q, h = 0, 0
		}
		if q < prev.PrefixQueries || h < prev.PrefixHits {
			return true
		}
	}
	if prev.Has(FieldPreemptions) {
		p := cur.Preemptions
		if !cur.Has(FieldPreemptions) {
			p = 0
		}
		if p < prev.Preemptions {
			return true
		}
	}
	return false
}

// Fresh reports whether a report taken at at may still be used at now:
// load.max_age (250 ms by default) is the oldest a report may be. Older
// reports, and the zero time of a replica never read, count as missing, and
// routing falls back to the gateway's own counts (reference, "Freshness").
func Fresh(at, now time.Time, maxAge time.Duration) bool {
	return !at.IsZero() && now.Sub(at) <= maxAge
}

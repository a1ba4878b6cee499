package vllmmetrics

import (
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// ContentType is the Content-Type vLLM's /metrics answers with
// (prometheus_client.CONTENT_TYPE_LATEST).
const ContentType = "text/plain; version=0.0.4; charset=utf-8"

// Label is one name="value" pair. It is a plain value.
type Label struct {
	Name, Value string
}

// RequestTimes describes one finished request, as vLLM's FinishedRequestStats
// and the per-token timestamps of its RequestStateStats do. Durations are
// rendered in seconds. It is a plain value owned by the caller.
type RequestTimes struct {
	// Queue is the time from the request's first QUEUED event to its first
	// SCHEDULED event (vllm:request_queue_time_seconds).
	Queue time.Duration
	// Prefill is the time from the first SCHEDULED event to the first output
	// token, preemptions included (vllm:request_prefill_time_seconds).
	Prefill time.Duration
	// Decode is the time from the first output token to the last one
	// (vllm:request_decode_time_seconds). vllm:request_inference_time_seconds
	// is Prefill+Decode, and vllm:request_time_per_output_token_seconds is
	// Decode/(GenerationTokens-1), or 0 with fewer than two tokens.
	Decode time.Duration
	// E2E is the time from arrival to finish (vllm:e2e_request_latency_seconds).
	E2E time.Duration
	// TTFT is the time from arrival to the first output token
	// (vllm:time_to_first_token_seconds). It is observed only when
	// GenerationTokens > 0: vLLM records it when the first token arrives.
	TTFT time.Duration
	// InterTokenGaps holds one entry per output token after the first: the
	// time since the previous token (vllm:inter_token_latency_seconds).
	// ObserveRequest does not keep the slice.
	InterTokenGaps []time.Duration

	PromptTokens     int // vllm:request_prompt_tokens
	CachedTokens     int // prompt tokens found in the prefix cache; PromptTokens-CachedTokens feeds vllm:request_prefill_kv_computed_tokens
	GenerationTokens int // vllm:request_generation_tokens and vllm:request_max_num_generation_tokens
	MaxTokens        int // the max_tokens parameter (vllm:request_params_max_tokens); 0 means unset and is not observed, as in vLLM
}

// Option changes how New builds a Metrics.
type Option func(*options)

type options struct {
	created   time.Time
	noCreated bool
	omit      map[string]bool // family names left off the page
}

// WithCreated sets the timestamp of every _created sample. prometheus_client
// stamps each series with time.time() when vLLM creates it at startup; the
// default is time.Now() in New. Tests pass a fixed time.
func WithCreated(t time.Time) Option {
	return func(o *options) { o.created = t }
}

// WithoutCreated leaves out the _created gauges, as vLLM does when
// PROMETHEUS_DISABLE_CREATED_SERIES=true or in multiprocess mode
// (api_server_count > 1).
func WithoutCreated() Option {
	return func(o *options) { o.noCreated = true }
}

// WithoutFamilies leaves the named families (vllm:prefix_cache_queries,
// vllm:cache_config_info, …) off the page, as engines that lack them do:
// llm-d's inference simulator publishes no prefix-cache counters, for one.
// Names the page does not have are ignored.
func WithoutFamilies(names ...string) Option {
	return func(o *options) {
		if o.omit == nil {
			o.omit = make(map[string]bool, len(names))
		}
		for _, n := range names {
			o.omit[n] = true
		}
	}
}

// Metrics holds the vLLM metrics of one simulated engine (engine="0") and
// renders its /metrics page.
//
// Metrics is safe for concurrent use. It is meant for one writer (the
// simulator's driver goroutine) and many renderers (HTTP handlers): every
// method takes one mutex for a few hundred nanoseconds at most; a render holds
// it only to copy the values (a few KiB) and formats outside it, so
// scrapers never stall the writer for the length of a render.
type Metrics struct {
	page *page // immutable after New

	mu sync.Mutex
	st state // guarded by mu

	lastSize atomic.Int64 // length of the last page rendered, a buffer-size hint
}

// state is every value on the page. It is copied by value on each render.
type state struct {
	scalars [numScalars]float64
	hists   [numHists]hist
}

// hist is one histogram: per-bucket (not cumulative) counts, the last bucket
// being +Inf, and the sum of observations, as prometheus_client keeps them.
type hist struct {
	counts [maxBuckets]uint64
	sum    float64
}

// observe adds v as prometheus_client's Histogram.observe does: sum first,
// then the first bucket whose upper bound is >= v. A NaN lands in no bucket
// but poisons the sum, as in Python.
func (h *hist) observe(bounds []float64, v float64) {
	h.sum += v
	lo, hi := 0, len(bounds)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if bounds[mid] >= v {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	if lo < len(bounds) {
		h.counts[lo]++
	}
}

// New returns the metrics of an engine serving modelName (the served model
// name, vLLM's model_name label) with the given max_model_len, which sets the
// 1-2-5 buckets of the token histograms. cacheInfo becomes the labels of
// vllm:cache_config_info: every CacheConfig field with its Python str()
// ("16", "True", "None", "0.92"); vLLM adds engine itself, so an "engine"
// entry is ignored. Label order does not matter: the page sorts labels.
//
// New panics if maxModelLen < 1 (prometheus_client refuses a histogram with
// only the +Inf bucket) or a label name is not a valid Prometheus label name.
func New(modelName string, maxModelLen int, cacheInfo []Label, opts ...Option) *Metrics {
	o := options{created: time.Now()}
	for _, opt := range opts {
		opt(&o)
	}
	if maxModelLen < 1 {
		panic(fmt.Sprintf("BUG: vllmmetrics: max_model_len %d < 1", maxModelLen))
	}
	m := &Metrics{page: buildPage(modelName, maxModelLen, cacheInfo, o)}
	m.st.scalars[sSleepAwake] = 1 // PrometheusStatLogger.record_sleep_state() at startup
	m.st.scalars[sCacheConfigInfo] = 1
	return m
}

// SetRunning sets vllm:num_requests_running, the length of the scheduler's
// running list.
func (m *Metrics) SetRunning(n int) { m.set(sRunning, float64(n)) }

// SetWaiting sets vllm:num_requests_waiting and its "capacity" share in
// vllm:num_requests_waiting_by_reason. The simulator defers no request (no
// LoRA budget, no KV transfer), so the "deferred" share stays 0.
func (m *Metrics) SetWaiting(n int) {
	m.mu.Lock()
	m.st.scalars[sWaiting] = float64(n)
	m.st.scalars[sWaitingCapacity] = float64(n)
	m.st.scalars[sWaitingDeferred] = 0
	m.mu.Unlock()
}

// SetKVUsage sets vllm:kv_cache_usage_perc, the fraction (0..1) of KV blocks
// in use.
func (m *Metrics) SetKVUsage(f float64) { m.set(sKVUsage, f) }

// SetSleepLevel sets vllm:engine_sleep_state as vLLM's record_sleep_state
// does: level 0 is awake (awake=1); 1 is asleep with weights offloaded
// (weights_offloaded=1); 2 is asleep with everything discarded
// (discard_all=1); any other level is asleep with neither flag.
func (m *Metrics) SetSleepLevel(level int) {
	awake, offloaded, discarded := 0.0, 0.0, 0.0
	switch level {
	case 0:
		awake = 1
	case 1:
		offloaded = 1
	case 2:
		discarded = 1
	}
	m.mu.Lock()
	m.st.scalars[sSleepAwake] = awake
	m.st.scalars[sSleepWeightsOffloaded] = offloaded
	m.st.scalars[sSleepDiscardAll] = discarded
	m.mu.Unlock()
}

// AddPrefixQueries adds to vllm:prefix_cache_queries: prompt tokens looked up
// in the prefix cache by new (not resumed-after-preemption) requests.
func (m *Metrics) AddPrefixQueries(n int64) { m.add(sPrefixQueries, n) }

// AddPrefixHits adds to vllm:prefix_cache_hits: tokens those lookups found.
func (m *Metrics) AddPrefixHits(n int64) { m.add(sPrefixHits, n) }

// AddPreemptions adds to vllm:num_preemptions.
func (m *Metrics) AddPreemptions(n int64) { m.add(sPreemptions, n) }

// AddPromptTokens counts n prompt tokens the engine computed (prefilled): it
// adds to vllm:prompt_tokens and to vllm:prompt_tokens_by_source with
// source="local_compute". vLLM counts a request's prompt once, when its first
// token comes out; prompt tokens found in the prefix cache go to
// AddCachedPromptTokens instead, so that both calls together add the whole
// prompt to vllm:prompt_tokens.
func (m *Metrics) AddPromptTokens(n int64) {
	checkInc(n)
	m.mu.Lock()
	m.st.scalars[sPromptTokens] += float64(n)
	m.st.scalars[sPromptLocalCompute] += float64(n)
	m.mu.Unlock()
}

// AddCachedPromptTokens counts n prompt tokens served from the local prefix
// cache: it adds to vllm:prompt_tokens, to vllm:prompt_tokens_by_source with
// source="local_cache_hit" and to vllm:prompt_tokens_cached.
func (m *Metrics) AddCachedPromptTokens(n int64) {
	checkInc(n)
	m.mu.Lock()
	m.st.scalars[sPromptTokens] += float64(n)
	m.st.scalars[sPromptLocalCacheHit] += float64(n)
	m.st.scalars[sPromptCached] += float64(n)
	m.mu.Unlock()
}

// AddGenerationTokens adds to vllm:generation_tokens.
func (m *Metrics) AddGenerationTokens(n int64) { m.add(sGenerationTokens, n) }

// IncRequestSuccess adds one to vllm:request_success for a finished request.
// reason is a vLLM finish reason: "stop", "length", "abort", "error" or
// "repetition"; any other value is a bug in the caller and panics. vLLM
// counts every finished request here, aborted ones included; call it next to
// ObserveRequest.
func (m *Metrics) IncRequestSuccess(reason string) {
	slot := -1
	for i, r := range finishReasons {
		if r == reason {
			slot = sSuccessFirst + i
			break
		}
	}
	if slot < 0 {
		panic(fmt.Sprintf("BUG: vllmmetrics: unknown finish reason %q", reason))
	}
	m.mu.Lock()
	m.st.scalars[slot]++
	m.mu.Unlock()
}

// ObserveIterationTokens observes one engine step in vllm:iteration_tokens_total.
// vLLM observes, per batch of engine outputs, the prompt tokens computed for
// requests whose first token came out in it plus the tokens generated in it.
func (m *Metrics) ObserveIterationTokens(n int) {
	m.mu.Lock()
	m.st.hists[hIterationTokens].observe(m.page.bounds[hIterationTokens], float64(n))
	m.mu.Unlock()
}

// ObserveRequest records a finished request in the per-request histograms.
// It treats the request as one with n=1 (vllm:request_params_n observes 1,
// vllm:request_max_num_generation_tokens its own GenerationTokens). It does
// not count the request in vllm:request_success: see IncRequestSuccess.
func (m *Metrics) ObserveRequest(r RequestTimes) {
	b := &m.page.bounds
	tpot := 0.0
	if r.GenerationTokens > 1 {
		tpot = r.Decode.Seconds() / float64(r.GenerationTokens-1)
	}
	kvComputed := r.PromptTokens - max(r.CachedTokens, 0)

	m.mu.Lock()
	defer m.mu.Unlock()
	h := &m.st.hists
	// vLLM records these when the request's last output is processed
	// (ParentRequest.observe_finished_request and the first-token and
	// inter-token stats of IterationStats) ...
	h[hMaxNumGenerationTokens].observe(b[hMaxNumGenerationTokens], float64(r.GenerationTokens))
	h[hParamsN].observe(b[hParamsN], 1)
	if r.GenerationTokens > 0 {
		h[hTTFT].observe(b[hTTFT], r.TTFT.Seconds())
	}
	for _, gap := range r.InterTokenGaps {
		h[hITL].observe(b[hITL], gap.Seconds())
	}
	// ... and these from its FinishedRequestStats, in loggers.py's order.
	h[hE2E].observe(b[hE2E], r.E2E.Seconds())
	h[hQueue].observe(b[hQueue], r.Queue.Seconds())
	h[hPrefill].observe(b[hPrefill], r.Prefill.Seconds())
	h[hInference].observe(b[hInference], (r.Prefill + r.Decode).Seconds())
	h[hDecode].observe(b[hDecode], r.Decode.Seconds())
	h[hPrefillKVComputed].observe(b[hPrefillKVComputed], float64(kvComputed))
	h[hPromptTokens].observe(b[hPromptTokens], float64(r.PromptTokens))
	h[hGenerationTokens].observe(b[hGenerationTokens], float64(r.GenerationTokens))
	h[hTPOT].observe(b[hTPOT], tpot)
	if r.MaxTokens != 0 {
		h[hParamsMaxTokens].observe(b[hParamsMaxTokens], float64(r.MaxTokens))
	}
}

// AppendText appends the page to dst and returns the result. It allocates
// nothing when dst has room for the page.
func (m *Metrics) AppendText(dst []byte) []byte {
	m.mu.Lock()
	st := m.st
	m.mu.Unlock()
	start := len(dst)
	dst = m.page.render(dst, &st)
	m.lastSize.Store(int64(len(dst) - start))
	return dst
}

// WritePrometheus writes the page to w. Serve it with Content-Type
// ContentType.
func (m *Metrics) WritePrometheus(w io.Writer) error {
	hint := m.lastSize.Load()
	buf := m.AppendText(make([]byte, 0, hint+hint/8+512))
	if _, err := w.Write(buf); err != nil {
		return fmt.Errorf("vllmmetrics: write page: %w", err)
	}
	return nil
}

func (m *Metrics) set(slot int, v float64) {
	m.mu.Lock()
	m.st.scalars[slot] = v
	m.mu.Unlock()
}

func (m *Metrics) add(slot int, n int64) {
	checkInc(n)
	m.mu.Lock()
	m.st.scalars[slot] += float64(n)
	m.mu.Unlock()
}

// checkInc enforces what prometheus_client's Counter.inc enforces with a
// ValueError: counters never go down.
func checkInc(n int64) {
	if n < 0 {
		panic(fmt.Sprintf("BUG: vllmmetrics: negative counter increment %d", n))
	}
}

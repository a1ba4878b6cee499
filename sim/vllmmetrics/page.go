package vllmmetrics

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// Scalar slots: one per gauge or counter series on the page.
const (
	sFlops = iota
	sReadBytes
	sWriteBytes
	sRunning
	sWaiting
	sWaitingCapacity
	sWaitingDeferred
	sSleepAwake
	sSleepWeightsOffloaded
	sSleepDiscardAll
	sKVUsage
	sPrefixQueries
	sPrefixHits
	sExternalPrefixQueries
	sExternalPrefixHits
	sMMCacheQueries
	sMMCacheHits
	sPreemptions
	sPromptTokens
	sPromptLocalCompute
	sPromptLocalCacheHit
	sPromptExternalKVTransfer
	sPromptCached
	sGenerationTokens
	sSuccessFirst    // one slot per finishReasons entry
	sCacheConfigInfo = sSuccessFirst + len(finishReasons)
	numScalars       = sCacheConfigInfo + 1
)

// Histograms.
const (
	hPromptTokens = iota
	hGenerationTokens
	hIterationTokens
	hMaxNumGenerationTokens
	hParamsN
	hParamsMaxTokens
	hTTFT
	hITL
	hTPOT
	hE2E
	hQueue
	hInference
	hPrefill
	hDecode
	hPrefillKVComputed
	numHists
)

// maxBuckets bounds a histogram's bucket count, +Inf included. The largest is
// build_1_2_5_buckets(max int64): 19 decades of 3, plus +Inf.
const maxBuckets = 64

// finishReasons is vLLM's FINISH_REASON_STRINGS, in FinishReason order; vLLM
// creates one vllm:request_success series per reason at startup.
var finishReasons = [...]string{"stop", "length", "abort", "error", "repetition"}

// Buckets from PrometheusStatLogger.__init__.
var (
	ttftBuckets = []float64{
		0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75,
		1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
	}
	itlBuckets = []float64{ // also request_time_per_output_token_seconds
		0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75,
		1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0,
	}
	requestLatencyBuckets = []float64{
		0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0,
		40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0,
	}
	iterationTokenBuckets = []float64{1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384}
	paramsNBuckets        = []float64{1, 2, 5, 10, 20}
)

// buckets125 is vLLM's build_1_2_5_buckets(max): 1, 2, 5, 10, 20, 50, ...
// while the value is <= max.
func buckets125(max int) []float64 {
	var b []float64
	for p := 1; ; p *= 10 {
		for _, m := range [...]int{1, 2, 5} {
			if p > max/m { // m*p > max, without overflowing
				return b
			}
			b = append(b, float64(m*p))
		}
		if p > max/10 { // the next decade starts past max
			return b
		}
	}
}

type kind uint8

const (
	gauge kind = iota
	counter
	histogram
)

func (k kind) String() string {
	return [...]string{"gauge", "counter", "histogram"}[k]
}

// family is one metric family as PrometheusStatLogger registers it.
type family struct {
	name, help string
	kind       kind
	series     []series // gauge and counter: one per child, in creation order
	hist       int      // histogram: which one
	buckets    []float64
}

// series is one child of a gauge or counter: the extra label beyond
// model_name and engine (if any) and its slot.
type series struct {
	label, value string
	slot         int
}

func one(slot int) []series { return []series{{slot: slot}} }

// families returns the page's families in vLLM's registration order, which
// is the order prometheus_client renders them in. The text is vLLM's,
// including its grammar.
func families(maxModelLen int) []family {
	tok := buckets125(maxModelLen)
	success := make([]series, len(finishReasons))
	for i, r := range finishReasons {
		success[i] = series{"finished_reason", r, sSuccessFirst + i}
	}
	return []family{
		// PerfMetricsProm, constructed before the scheduler gauges.
		{name: "vllm:estimated_flops_per_gpu", kind: counter, series: one(sFlops),
			help: "Estimated number of floating point operations per GPU (for Model Flops Utilization calculations)."},
		{name: "vllm:estimated_read_bytes_per_gpu", kind: counter, series: one(sReadBytes),
			help: "Estimated number of bytes read from memory per GPU (for Model Flops Utilization calculations)."},
		{name: "vllm:estimated_write_bytes_per_gpu", kind: counter, series: one(sWriteBytes),
			help: "Estimated number of bytes written to memory per GPU (for Model Flops Utilization calculations)."},

		{name: "vllm:num_requests_running", kind: gauge, series: one(sRunning),
			help: "Number of requests in model execution batches."},
		{name: "vllm:num_requests_waiting", kind: gauge, series: one(sWaiting),
			help: "Number of requests waiting to be processed."},
		{name: "vllm:num_requests_waiting_by_reason", kind: gauge,
			series: []series{{"reason", "capacity", sWaitingCapacity}, {"reason", "deferred", sWaitingDeferred}},
			help: "Number of waiting requests by reason. Reason labels: 'capacity' = waiting for scheduling capacity; " +
				"'deferred' = deferred by transient constraints (LoRA budget, KV transfer, blocked status). " +
				"Sum of all reasons equals vllm:num_requests_waiting."},
		{name: "vllm:engine_sleep_state", kind: gauge,
			series: []series{
				{"sleep_state", "awake", sSleepAwake},
				{"sleep_state", "weights_offloaded", sSleepWeightsOffloaded},
				{"sleep_state", "discard_all", sSleepDiscardAll},
			},
			help: "Engine sleep state; awake = 0 means engine is sleeping; awake = 1 means engine is awake; " +
				"weights_offloaded = 1 means sleep level 1; discard_all = 1 means sleep level 2."},
		{name: "vllm:kv_cache_usage_perc", kind: gauge, series: one(sKVUsage),
			help: "KV-cache usage. 1 means 100 percent usage."},
		{name: "vllm:prefix_cache_queries", kind: counter, series: one(sPrefixQueries),
			help: "Prefix cache queries, in terms of number of queried tokens."},
		{name: "vllm:prefix_cache_hits", kind: counter, series: one(sPrefixHits),
			help: "Prefix cache hits, in terms of number of cached tokens."},
		{name: "vllm:external_prefix_cache_queries", kind: counter, series: one(sExternalPrefixQueries),
			help: "External prefix cache queries from KV connector cross-instance cache sharing, in terms of number of queried tokens."},
		{name: "vllm:external_prefix_cache_hits", kind: counter, series: one(sExternalPrefixHits),
			help: "External prefix cache hits from KV connector cross-instance cache sharing, in terms of number of cached tokens."},
		{name: "vllm:mm_cache_queries", kind: counter, series: one(sMMCacheQueries),
			help: "Multi-modal cache queries, in terms of number of queried items."},
		{name: "vllm:mm_cache_hits", kind: counter, series: one(sMMCacheHits),
			help: "Multi-modal cache hits, in terms of number of cached items."},
		{name: "vllm:num_preemptions", kind: counter, series: one(sPreemptions),
			help: "Cumulative number of preemption from the engine."},
		{name: "vllm:prompt_tokens", kind: counter, series: one(sPromptTokens),
			help: "Number of prefill tokens processed."},
		{name: "vllm:prompt_tokens_by_source", kind: counter,
			series: []series{ // PromptTokenStats.ALL_SOURCES
				{"source", "local_compute", sPromptLocalCompute},
				{"source", "local_cache_hit", sPromptLocalCacheHit},
				{"source", "external_kv_transfer", sPromptExternalKVTransfer},
			},
			help: "Number of prompt tokens by source."},
		{name: "vllm:prompt_tokens_cached", kind: counter, series: one(sPromptCached),
			help: "Number of cached prompt tokens (local + external)."},
		{name: "vllm:generation_tokens", kind: counter, series: one(sGenerationTokens),
			help: "Number of generation tokens processed."},
		{name: "vllm:request_success", kind: counter, series: success,
			help: "Count of successfully processed requests."},

		{name: "vllm:request_prompt_tokens", kind: histogram, hist: hPromptTokens, buckets: tok,
			help: "Number of prefill tokens processed."},
		{name: "vllm:request_generation_tokens", kind: histogram, hist: hGenerationTokens, buckets: tok,
			help: "Number of generation tokens processed."},
		{name: "vllm:iteration_tokens_total", kind: histogram, hist: hIterationTokens, buckets: iterationTokenBuckets,
			help: "Histogram of number of tokens per engine_step."},
		{name: "vllm:request_max_num_generation_tokens", kind: histogram, hist: hMaxNumGenerationTokens, buckets: tok,
			help: "Histogram of maximum number of requested generation tokens."},
		{name: "vllm:request_params_n", kind: histogram, hist: hParamsN, buckets: paramsNBuckets,
			help: "Histogram of the n request parameter."},
		{name: "vllm:request_params_max_tokens", kind: histogram, hist: hParamsMaxTokens, buckets: tok,
			help: "Histogram of the max_tokens request parameter."},
		{name: "vllm:time_to_first_token_seconds", kind: histogram, hist: hTTFT, buckets: ttftBuckets,
			help: "Histogram of time to first token in seconds."},
		{name: "vllm:inter_token_latency_seconds", kind: histogram, hist: hITL, buckets: itlBuckets,
			help: "Histogram of inter-token latency in seconds."},
		{name: "vllm:request_time_per_output_token_seconds", kind: histogram, hist: hTPOT, buckets: itlBuckets,
			help: "Histogram of time_per_output_token_seconds per request."},
		{name: "vllm:e2e_request_latency_seconds", kind: histogram, hist: hE2E, buckets: requestLatencyBuckets,
			help: "Histogram of e2e request latency in seconds."},
		{name: "vllm:request_queue_time_seconds", kind: histogram, hist: hQueue, buckets: requestLatencyBuckets,
			help: "Histogram of time spent in WAITING phase for request."},
		{name: "vllm:request_inference_time_seconds", kind: histogram, hist: hInference, buckets: requestLatencyBuckets,
			help: "Histogram of time spent in RUNNING phase for request."},
		{name: "vllm:request_prefill_time_seconds", kind: histogram, hist: hPrefill, buckets: requestLatencyBuckets,
			help: "Histogram of time spent in PREFILL phase for request."},
		{name: "vllm:request_decode_time_seconds", kind: histogram, hist: hDecode, buckets: requestLatencyBuckets,
			help: "Histogram of time spent in DECODE phase for request."},
		{name: "vllm:request_prefill_kv_computed_tokens", kind: histogram, hist: hPrefillKVComputed, buckets: tok,
			help: "Histogram of new KV tokens computed during prefill (excluding cached tokens)."},
		// vllm:cache_config_info is registered later, by log_engine_initialized;
		// buildPage appends it.
	}
}

// op says which value a part of the page renders.
type op uint8

const (
	opScalar op = iota // st.scalars[idx]
	opBucket           // cumulative count of hist idx up to bucket b
	opCount            // total count of hist idx
	opSum              // sum of hist idx
)

// part is static text followed by one value and a newline.
type part struct {
	text []byte
	op   op
	idx  int
	b    int
}

// page is the compiled page: every byte that never changes is in the parts'
// text or the tail, so a render only formats numbers. Immutable after New.
type page struct {
	parts  []part
	tail   []byte
	bounds [numHists][]float64 // upper bounds, +Inf last
}

func (p *page) render(dst []byte, st *state) []byte {
	var acc uint64
	for i := range p.parts {
		pt := &p.parts[i]
		dst = append(dst, pt.text...)
		switch pt.op {
		case opScalar:
			dst = appendSample(dst, st.scalars[pt.idx])
		case opBucket:
			if pt.b == 0 {
				acc = 0
			}
			acc += st.hists[pt.idx].counts[pt.b]
			dst = appendSample(dst, float64(acc))
		case opCount: // follows the hist's buckets, as _count follows _bucket
			dst = appendSample(dst, float64(acc))
		case opSum:
			dst = appendSample(dst, st.hists[pt.idx].sum)
		}
		dst = append(dst, '\n')
	}
	return append(dst, p.tail...)
}

// builder accumulates static text until a value is needed.
type builder struct {
	parts   []part
	pending []byte
}

func (b *builder) text(s ...string) {
	for _, x := range s {
		b.pending = append(b.pending, x...)
	}
}

func (b *builder) value(o op, idx, bucket int) {
	b.parts = append(b.parts, part{text: b.pending, op: o, idx: idx, b: bucket})
	b.pending = nil
}

func buildPage(modelName string, maxModelLen int, cacheInfo []Label, o options) *page {
	var b builder
	var p page
	base := []Label{{"model_name", modelName}, {"engine", "0"}}
	with := func(extra ...Label) string { return labelText(append(slices.Clip(base), extra...)) }
	var created string
	if !o.noCreated {
		// CPython's time.time() is float(ns)/1e9 too.
		created = string(appendSample(nil, float64(o.created.UnixNano())/1e9))
	}

	for _, f := range families(maxModelLen) {
		if o.omit[f.name] {
			continue
		}
		sample := f.name // a counter's samples and header carry _total
		if f.kind == counter {
			sample += "_total"
		}
		b.text("# HELP ", sample, " ", escapeHelp(f.help), "\n# TYPE ", sample, " ", f.kind.String(), "\n")
		var createdLines []string // generate_latest moves _created samples to a gauge after the family
		switch f.kind {
		case gauge, counter:
			for _, s := range f.series {
				var ls string
				if s.label == "" {
					ls = with()
				} else {
					ls = with(Label{s.label, s.value})
				}
				b.text(sample, ls, " ")
				b.value(opScalar, s.slot, 0)
				if f.kind == counter {
					createdLines = append(createdLines, f.name+"_created"+ls+" "+created+"\n")
				}
			}
		case histogram:
			bounds := append(slices.Clone(f.buckets), math.Inf(1))
			if len(bounds) > maxBuckets {
				panic(fmt.Sprintf("BUG: vllmmetrics: %s has %d buckets", f.name, len(bounds)))
			}
			p.bounds[f.hist] = bounds
			for i, ub := range bounds {
				b.text(f.name, "_bucket", with(Label{"le", string(appendSample(nil, ub))}), " ")
				b.value(opBucket, f.hist, i)
			}
			ls := with()
			b.text(f.name, "_count", ls, " ")
			b.value(opCount, f.hist, 0)
			b.text(f.name, "_sum", ls, " ")
			b.value(opSum, f.hist, 0)
			createdLines = append(createdLines, f.name+"_created"+ls+" "+created+"\n")
		}
		if !o.noCreated && len(createdLines) > 0 {
			b.text("# HELP ", f.name, "_created ", escapeHelp(f.help), "\n# TYPE ", f.name, "_created gauge\n")
			b.text(createdLines...)
		}
	}

	// vllm:cache_config_info: a gauge set to 1 whose labels are CacheConfig's
	// fields plus engine, and no model_name.
	info := make([]Label, 0, len(cacheInfo)+1)
	seen := map[string]bool{}
	for _, l := range cacheInfo {
		if l.Name == "engine" {
			continue
		}
		if !validLabelName(l.Name) || seen[l.Name] {
			panic(fmt.Sprintf("BUG: vllmmetrics: bad or repeated cache_config_info label %q", l.Name))
		}
		seen[l.Name] = true
		info = append(info, l)
	}
	info = append(info, Label{"engine", "0"})
	if o.omit["vllm:cache_config_info"] {
		p.parts = b.parts
		p.tail = b.pending
		return &p
	}
	b.text("# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig\n",
		"# TYPE vllm:cache_config_info gauge\n", "vllm:cache_config_info", labelText(info), " ")
	b.value(opScalar, sCacheConfigInfo, 0)

	p.parts = b.parts
	p.tail = b.pending
	return &p
}

// labelText renders {name="value",...} with names sorted and values escaped,
// as generate_latest does.
func labelText(ls []Label) string {
	ls = slices.Clone(ls)
	slices.SortFunc(ls, func(a, b Label) int { return strings.Compare(a.Name, b.Name) })
	var sb strings.Builder
	sb.WriteByte('{')
	for i, l := range ls {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(l.Name)
		sb.WriteString(`="`)
		sb.WriteString(labelValueEscaper.Replace(l.Value))
		sb.WriteByte('"')
	}
	sb.WriteByte('}')
	return sb.String()
}

var (
	labelValueEscaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`)
	helpEscaper       = strings.NewReplacer(`\`, `\\`, "\n", `\n`)
)

func escapeHelp(s string) string { return helpEscaper.Replace(s) }

// validLabelName is prometheus_client's METRIC_LABEL_NAME_RE
// ([a-zA-Z_][a-zA-Z0-9_]*) minus the reserved "__" prefix.
func validLabelName(s string) bool {
	if s == "" || strings.HasPrefix(s, "__") {
		return false
	}
	for i, c := range s {
		switch {
		case c == '_', 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case i > 0 && '0' <= c && c <= '9':
		default:
			return false
		}
	}
	return true
}

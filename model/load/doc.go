// Package load reads an engine's load from its Prometheus /metrics page:
// vLLM's and SGLang's pages are read natively into a Report (running and
// waiting requests, KV cache usage, prefix cache counters, preemptions and
// KV capacity).
//
// load is pure: it starts no goroutines, does no I/O and keeps no globals.
// transport/scrape fetches the page and feeds it to a Parser; the replica
// actors keep the reports, compare successive ones with Restarted and judge
// their age with Fresh.
//
// # Reading a page
//
// The engine is recognised by its metric prefix (vllm: or sglang:). A page
// with the families of both is unreadable. Series are grouped by
// data-parallel rank, the engine label for vLLM (vllm/v1/metrics/loggers.py
// labels every series with the DP engine index) and the dp_rank label for
// SGLang (python/sglang/srt/managers/scheduler_metrics_mixin.py adds it only
// when a DP rank exists). Ranks are summed, except KV usage (see
// Report.KVUsage). Several series of one rank are views of one scheduler
// (SGLang's TP/PP ranks with --enable-metrics-for-all-schedulers, or the same
// series written twice) and count once: a series that repeats another's
// label set exactly is dropped, the first one wins; series of one rank that
// differ in other labels are folded by their maximum. SGLang's per-priority
// series (priority="high", ...) are skipped: only the base series, with
// priority="" or no priority label, are read.
//
// Required families are the ones routing reads (Report.Running and
// Report.KVUsage, in actors/routing's candidates and the policies' KV
// guard) and Waiting, which vLLM and SGLang publish beside running from the
// same scheduler stats and which the admin API and calibrate's idle check
// read. Without one of them a page is unreadable (a *MissingError, which
// wraps ErrUnreadable and names them) and never taken for an idle engine:
//
//   - vLLM: vllm:num_requests_running, vllm:num_requests_waiting and
//     vllm:kv_cache_usage_perc (vllm:gpu_cache_usage_perc before v0.11).
//   - SGLang: sglang:num_running_reqs, sglang:num_queue_reqs and
//     sglang:token_usage. Its scheduler gauges appear only after the first
//     batch is logged, so a fresh SGLang engine reads as unreadable until
//     it has served one request.
//
// Every other family is optional: the Report is read without it, and
// Report.Fields says which optional parts were there. An optional family
// the engine creates at start-up beside the required ones is reported in
// Report.Missing when the page lacks it, since its absence means an engine
// started without prefix caching, a renamed metric or an exporter that
// leaves it out (llm-d-inference-sim has no prefix cache counters), and the
// replica actor warns about it: vLLM's vllm:prefix_cache_queries and
// vllm:prefix_cache_hits (vllm:gpu_prefix_cache_* before v0.11; the restart
// check needs both), vllm:num_preemptions and vllm:cache_config_info (the
// KV capacity), and SGLang's sglang:max_total_num_tokens. SGLang's counters
// are created lazily, on first use (prometheus_client's .labels(...) in
// collector.py), so their absence says nothing and is never reported:
// sglang:prompt_tokens_total and sglang:cached_tokens_total (the prefix
// counters; cached_tokens_total only appears with the first cache hit, and
// the hits read as zero until then) and sglang:num_retracted_requests_total
// (preemptions).
//
// Counters are read under their _total name and, for old exporters, without
// the suffix. Where vLLM renamed a family the new name wins and the legacy
// one is read only when the new one is absent, since v0.10 and v0.11 served
// both. _created samples, histograms, comments and every other family are
// skipped. Histogram reads one histogram's _sum and _count totals from a
// whole page, for inferrail calibrate.
//
// # The text format
//
// The line parser is hand-written and allocation-free: comments and
// HELP/TYPE lines, labels with escapes (any backslash pair is skipped; the
// values that are read, ranks and sizes, never need unescaping), +Inf, -Inf,
// NaN and exponents, a timestamp and an OpenMetrics exemplar after the
// value, CRLF line ends, blanks and tabs between tokens and a last line
// without a newline. A malformed line of a family the Report needs makes the
// page unreadable, and so does a value that is not a finite non-negative
// number; a malformed line of any other family is skipped, as are lines
// that are not samples at all. The work is linear in the page: every byte is
// looked at a bounded number of times, a line is never copied unless it
// spans two writes, and lines longer than MaxLineBytes are not buffered.
// Memory is bounded by MaxLineBytes and by MaxSeries series of the families
// read. The page size itself is the caller's to bound (transport/scrape
// stops at 4 MiB).
package load

// Package vllmmetrics renders the simulator's /metrics page the way a
// single-process vLLM V1 server renders it: the same vllm:* families in the
// same order, the same HELP texts, label sets, bucket bounds and number
// formatting, in the Prometheus text format 0.0.4 as Python's
// prometheus_client writes it.
//
// It owns the metric values of one simulated engine and the text of its
// page. It starts no goroutines and does no I/O of its own: the simulator's
// driver goroutine records into a Metrics, and HTTP handlers render it.
//
// # Sources
//
// Everything here was read from stored copies of the upstream sources; no
// live vLLM was run.
//
//   - Metric names, HELP texts, label names, registration order, buckets and
//     what is observed when: vllm/v1/metrics/loggers.py, PrometheusStatLogger
//     and build_1_2_5_buckets. Read at local-inference-lab/vllm
//     0b33c223e62635914cba92136a385bc039114eb9, a fork of vllm-project/vllm
//     main of May 2026 (see shared/reference/vllm.md §0). That copy adds
//     fork-only families (vllm:scheduler_compute_seconds,
//     vllm:scheduler_prefill_compute_share, vllm:decode_prefill_*); they are
//     left out here, and the rest was checked against a second copy of the
//     upstream file that lacks them.
//   - vllm:estimated_{flops,read_bytes,write_bytes}_per_gpu: PerfMetricsProm
//     in vllm/v1/metrics/perf.py (vllm-project/vllm
//     00cee63e04bf5b7dbaa5f08d6e4360f28777fdc3). It registers its counters
//     unconditionally, before the scheduler gauges, so they lead the page; a
//     v0.30.0 capture shows the same.
//   - Per-request values (queue, prefill, decode, inference, mean time per
//     output token, TTFT, inter-token latency): vllm/v1/metrics/stats.py
//     IterationStats (local-inference-lab/vllm
//     0a887fc20551c3676d4a1a3af33f4a8e7f7e9097); n and
//     max_num_generation_tokens: ParentRequest.observe_finished_request in
//     vllm/v1/engine/parallel_sampling.py.
//   - Finish reasons and their order: FINISH_REASON_STRINGS in
//     vllm/v1/engine/__init__.py ("stop", "length", "abort", "error",
//     "repetition").
//   - /metrics is served by prometheus_fastapi_instrumentator's expose(),
//     which always calls prometheus_client.generate_latest and answers with
//     CONTENT_TYPE_LATEST (vllm/entrypoints/serve/instrumentator/metrics.py,
//     vllm-project/vllm 02a69ad2710b79425c217f79dd4ad8e4ea671ee1), so this
//     package renders only the 0.0.4 text format, never OpenMetrics.
//   - The text format: prometheus_client exposition.generate_latest and
//     utils.floatToGoString (prometheus/client_python
//     021ef048195f1c5f13efce39669ed415b7a76343 and
//     05cd015a5946870daad4d8fd97d27695e198af1c; Debian's 0.16.0 is identical
//     in these functions). In particular: a counter's HELP and TYPE lines and
//     its samples carry the _total suffix; each counter and histogram ends
//     with a separate "<name>_created" gauge block; labels are sorted by
//     name; every number, le bound included, is Python's repr of a float,
//     except that a positive number with more than six integer digits is
//     written as mantissa "e+0" exponent (1e+06, 1.234567e+06, 1e+010).
//
// # What is left out
//
// The rest of a real vLLM page: python_gc_*, python_info and process_*
// from prometheus_client's default collectors, and the http_* families of
// prometheus_fastapi_instrumentator. Also the families vLLM registers only
// when a feature is on: spec decoding, KV connector, LoRA, KV block
// residency (--kv-cache-metrics) and vllm:corrupted_requests. The counters
// the simulator has nothing to feed (external prefix cache, multi-modal
// cache, MFU estimates) are rendered at zero, as vLLM renders them.
package vllmmetrics

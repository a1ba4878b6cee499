"""Render testdata/page.golden with the real prometheus_client.

Not run by `go test`. It mirrors what vLLM's PrometheusStatLogger registers
(vllm/v1/metrics/loggers.py, perf.py; see doc.go for the commits read) and
replays the scripted sequence of TestGolden in metrics_test.go, so the Go
rendering can be checked against Python byte for byte:

    apt-get install python3-prometheus-client   # Debian bookworm: 0.16.0
    /usr/bin/python3 testdata/reference.py > /tmp/ref.txt
    diff /tmp/ref.txt testdata/page.golden

Keep it in step with TestGolden.
"""

import time

CREATED_NS = 1700000000123456000
time.time = lambda: CREATED_NS / 1e9  # CPython's time.time() is float(ns)/1e9

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram  # noqa: E402
from prometheus_client import generate_latest  # noqa: E402

R = CollectorRegistry()
MODEL = "meta-llama/Llama-3.1-8B-Instruct"
MAX_MODEL_LEN = 2048
LN = ["model_name", "engine"]


def build_1_2_5_buckets(max_value):
    exponent = 0
    buckets = []
    while True:
        for m in [1, 2, 5]:
            value = m * 10**exponent
            if value <= max_value:
                buckets.append(value)
            else:
                return buckets
        exponent += 1


def counter(name, doc, labelnames=LN):
    return Counter(name=name, documentation=doc, labelnames=labelnames, registry=R)


def gauge(name, doc, labelnames=LN):
    # vLLM passes multiprocess_mode="mostrecent" (prometheus_client >= 0.17);
    # it changes nothing in single-process mode, and 0.16 rejects it.
    return Gauge(name=name, documentation=doc, labelnames=labelnames, registry=R)


def hist(name, doc, buckets):
    return Histogram(name=name, documentation=doc, buckets=buckets,
                     labelnames=LN, registry=R).labels(MODEL, "0")


flops = counter("vllm:estimated_flops_per_gpu_total",
                "Estimated number of floating point operations per GPU "
                "(for Model Flops Utilization calculations).").labels(MODEL, "0")
read_b = counter("vllm:estimated_read_bytes_per_gpu_total",
                 "Estimated number of bytes read from memory per GPU "
                 "(for Model Flops Utilization calculations).").labels(MODEL, "0")
write_b = counter("vllm:estimated_write_bytes_per_gpu_total",
                  "Estimated number of bytes written to memory per GPU "
                  "(for Model Flops Utilization calculations).").labels(MODEL, "0")

running = gauge("vllm:num_requests_running",
                "Number of requests in model execution batches.").labels(MODEL, "0")
waiting = gauge("vllm:num_requests_waiting",
                "Number of requests waiting to be processed.").labels(MODEL, "0")
wbr = gauge("vllm:num_requests_waiting_by_reason",
            "Number of waiting requests by reason. "
            "Reason labels: 'capacity' = waiting for scheduling capacity; "
            "'deferred' = deferred by transient constraints "
            "(LoRA budget, KV transfer, blocked status). "
            "Sum of all reasons equals vllm:num_requests_waiting.",
            LN + ["reason"])
w_cap = wbr.labels(MODEL, "0", "capacity")
w_def = wbr.labels(MODEL, "0", "deferred")
sleep = gauge("vllm:engine_sleep_state",
              "Engine sleep state; awake = 0 means engine is sleeping; "
              "awake = 1 means engine is awake; "
              "weights_offloaded = 1 means sleep level 1; "
              "discard_all = 1 means sleep level 2.",
              LN + ["sleep_state"])
s = {k: sleep.labels(engine=0, model_name=MODEL, sleep_state=k)
     for k in ["awake", "weights_offloaded", "discard_all"]}
s["discard_all"].set(0)
s["weights_offloaded"].set(0)
s["awake"].set(1)
kv = gauge("vllm:kv_cache_usage_perc",
           "KV-cache usage. 1 means 100 percent usage.").labels(MODEL, "0")
pq = counter("vllm:prefix_cache_queries",
             "Prefix cache queries, in terms of number of queried tokens.").labels(MODEL, "0")
ph = counter("vllm:prefix_cache_hits",
             "Prefix cache hits, in terms of number of cached tokens.").labels(MODEL, "0")
counter("vllm:external_prefix_cache_queries",
        "External prefix cache queries from KV connector "
        "cross-instance cache sharing, in terms of number of queried tokens.").labels(MODEL, "0")
counter("vllm:external_prefix_cache_hits",
        "External prefix cache hits from KV connector "
        "cross-instance cache sharing, in terms of number of cached tokens.").labels(MODEL, "0")
counter("vllm:mm_cache_queries",
        "Multi-modal cache queries, in terms of number of queried items.").labels(MODEL, "0")
counter("vllm:mm_cache_hits",
        "Multi-modal cache hits, in terms of number of cached items.").labels(MODEL, "0")
preempt = counter("vllm:num_preemptions",
                  "Cumulative number of preemption from the engine.").labels(MODEL, "0")
prompt = counter("vllm:prompt_tokens", "Number of prefill tokens processed.").labels(MODEL, "0")
pbs = counter("vllm:prompt_tokens_by_source", "Number of prompt tokens by source.", LN + ["source"])
src = {k: pbs.labels(MODEL, "0", k)
       for k in ("local_compute", "local_cache_hit", "external_kv_transfer")}
cached = counter("vllm:prompt_tokens_cached",
                 "Number of cached prompt tokens (local + external).").labels(MODEL, "0")
gen = counter("vllm:generation_tokens", "Number of generation tokens processed.").labels(MODEL, "0")
succ_base = counter("vllm:request_success", "Count of successfully processed requests.",
                    LN + ["finished_reason"])
succ = {r: succ_base.labels(MODEL, "0", r)
        for r in ("stop", "length", "abort", "error", "repetition")}

tok = build_1_2_5_buckets(MAX_MODEL_LEN)
h_prompt = hist("vllm:request_prompt_tokens", "Number of prefill tokens processed.", tok)
h_gen = hist("vllm:request_generation_tokens", "Number of generation tokens processed.", tok)
h_iter = hist("vllm:iteration_tokens_total", "Histogram of number of tokens per engine_step.",
              [1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384])
h_maxgen = hist("vllm:request_max_num_generation_tokens",
                "Histogram of maximum number of requested generation tokens.", tok)
h_n = hist("vllm:request_params_n", "Histogram of the n request parameter.", [1, 2, 5, 10, 20])
h_maxtok = hist("vllm:request_params_max_tokens",
                "Histogram of the max_tokens request parameter.", tok)
TTFT_B = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5,
          5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0]
ITL_B = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0,
         7.5, 10.0, 20.0, 40.0, 80.0]
REQ_B = [0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0,
         60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0]
h_ttft = hist("vllm:time_to_first_token_seconds",
              "Histogram of time to first token in seconds.", TTFT_B)
h_itl = hist("vllm:inter_token_latency_seconds",
             "Histogram of inter-token latency in seconds.", ITL_B)
h_tpot = hist("vllm:request_time_per_output_token_seconds",
              "Histogram of time_per_output_token_seconds per request.", ITL_B)
h_e2e = hist("vllm:e2e_request_latency_seconds",
             "Histogram of e2e request latency in seconds.", REQ_B)
h_queue = hist("vllm:request_queue_time_seconds",
               "Histogram of time spent in WAITING phase for request.", REQ_B)
h_inf = hist("vllm:request_inference_time_seconds",
             "Histogram of time spent in RUNNING phase for request.", REQ_B)
h_pre = hist("vllm:request_prefill_time_seconds",
             "Histogram of time spent in PREFILL phase for request.", REQ_B)
h_dec = hist("vllm:request_decode_time_seconds",
             "Histogram of time spent in DECODE phase for request.", REQ_B)
h_kvc = hist("vllm:request_prefill_kv_computed_tokens",
             "Histogram of new KV tokens computed during prefill "
             "(excluding cached tokens).", tok)

# log_engine_initialized -> log_metrics_info("cache_config", ...)
info = {
    "block_size": "16", "gpu_memory_utilization": "0.92", "cache_dtype": "auto",
    "is_attention_free": "False", "num_gpu_blocks_override": "None",
    "sliding_window": "None", "enable_prefix_caching": "True",
    "prefix_caching_hash_algo": "sha256", "num_gpu_blocks": "4096",
    "num_cpu_blocks": "None", "kv_cache_memory_bytes": "None",
    "engine": "",
}
g = gauge("vllm:cache_config_info", "Information of the LLMEngine CacheConfig", info.keys())
info["engine"] = "0"
g.labels(**info).set(1)


def sec(ns):  # Go's time.Duration.Seconds()
    return float(ns // 10**9) + float(ns % 10**9) / 1e9


MS, US, S = 10**6, 10**3, 10**9

# The scripted sequence of TestGolden.
running.set(3)
waiting.set(2)
w_cap.set(2)
w_def.set(0)
kv.set(0.4375)
pq.inc(1234567)
ph.inc(512)
preempt.inc(1)
prompt.inc(688)
src["local_compute"].inc(688)
prompt.inc(512)
src["local_cache_hit"].inc(512)
cached.inc(512)
gen.inc(37)
for n in (0, 3, 600, 16384, 20000):
    h_iter.observe(n)
for r in ("stop", "length", "stop", "abort"):
    succ[r].inc()

REQS = [
    dict(queue=2 * MS, prefill=180 * MS, decode=1100 * MS, e2e=1282 * MS, ttft=182 * MS,
         gaps=[100 * MS, 250 * MS, 750 * MS], prompt=700, cached=512, gen=4, max_tokens=16),
    dict(queue=0, prefill=25 * US, decode=0, e2e=30 * US, ttft=27 * US,
         gaps=[], prompt=1, cached=0, gen=1, max_tokens=0),
    dict(queue=9000 * S, prefill=0, decode=0, e2e=9000 * S, ttft=0,
         gaps=[], prompt=2048, cached=0, gen=0, max_tokens=2048),
]
for q in REQS:
    h_maxgen.observe(q["gen"])
    h_n.observe(1)
    if q["gen"] > 0:
        h_ttft.observe(sec(q["ttft"]))
    for gap in q["gaps"]:
        h_itl.observe(sec(gap))
    h_e2e.observe(sec(q["e2e"]))
    h_queue.observe(sec(q["queue"]))
    h_pre.observe(sec(q["prefill"]))
    h_inf.observe(sec(q["prefill"] + q["decode"]))
    h_dec.observe(sec(q["decode"]))
    h_kvc.observe(q["prompt"] - max(q["cached"], 0))
    h_prompt.observe(q["prompt"])
    h_gen.observe(q["gen"])
    h_tpot.observe(sec(q["decode"]) / (q["gen"] - 1) if q["gen"] - 1 > 0 else 0)
    if q["max_tokens"]:
        h_maxtok.observe(q["max_tokens"])

print(generate_latest(R).decode(), end="")

package vllmmetrics_test

import (
	"fmt"
	"strings"
	"time"

	"github.com/inferrail/inferrail/sim/vllmmetrics"
)

func Example() {
	m := vllmmetrics.New("qwen", 8192, []vllmmetrics.Label{{Name: "block_size", Value: "16"}},
		vllmmetrics.WithoutCreated())

	// The driver, after each engine step:
	m.SetRunning(1)
	m.SetWaiting(0)
	m.SetKVUsage(0.125)
	m.AddPromptTokens(96)        // computed
	m.AddCachedPromptTokens(128) // found in the prefix cache
	m.AddGenerationTokens(1)

	// ... and when a request finishes:
	m.IncRequestSuccess("stop")
	m.ObserveRequest(vllmmetrics.RequestTimes{
		Queue: 3 * time.Millisecond, Prefill: 40 * time.Millisecond, E2E: 43 * time.Millisecond,
		TTFT: 43 * time.Millisecond, PromptTokens: 224, CachedTokens: 128, GenerationTokens: 1,
	})

	// An HTTP handler serves m.AppendText (or WritePrometheus) with
	// Content-Type vllmmetrics.ContentType.
	for _, line := range strings.Split(string(m.AppendText(nil)), "\n") {
		if strings.HasPrefix(line, "vllm:prompt_tokens") ||
			strings.HasPrefix(line, `vllm:request_success_total{engine="0",finished_reason="stop"`) ||
			strings.HasPrefix(line, "vllm:time_to_first_token_seconds_sum") ||
			strings.HasPrefix(line, "vllm:cache_config_info") {
			fmt.Println(line)
		}
	}
	// Output:
	// vllm:prompt_tokens_total{engine="0",model_name="qwen"} 224.0
	// vllm:prompt_tokens_by_source_total{engine="0",model_name="qwen",source="local_compute"} 96.0
	// vllm:prompt_tokens_by_source_total{engine="0",model_name="qwen",source="local_cache_hit"} 128.0
	// vllm:prompt_tokens_by_source_total{engine="0",model_name="qwen",source="external_kv_transfer"} 0.0
	// vllm:prompt_tokens_cached_total{engine="0",model_name="qwen"} 128.0
	// vllm:request_success_total{engine="0",finished_reason="stop",model_name="qwen"} 1.0
	// vllm:time_to_first_token_seconds_sum{engine="0",model_name="qwen"} 0.043
	// vllm:cache_config_info{block_size="16",engine="0"} 1.0
}

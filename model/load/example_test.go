package load_test

import (
	"errors"
	"fmt"

	"github.com/inferrail/inferrail/model/load"
)

func ExampleParse() {
	page := []byte(`# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{dp_rank="0",priority=""} 3.0
sglang:num_running_reqs{dp_rank="0",priority="5"} 1.0
sglang:num_running_reqs{dp_rank="1",priority=""} 2.0
sglang:num_queue_reqs{dp_rank="0",priority=""} 1.0
sglang:num_queue_reqs{dp_rank="1",priority=""} 0.0
sglang:token_usage{dp_rank="0",priority=""} 0.25
sglang:token_usage{dp_rank="1",priority=""} 0.75
sglang:prompt_tokens_total{model_name="qwen"} 1000.0
sglang:cached_tokens_total{model_name="qwen"} 600.0
`)
	r, err := load.Parse(page)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%s: %d ranks, running %g, waiting %g, KV %.2f (max %.2f), hits %g/%g\n",
		r.Engine, r.Ranks, r.Running, r.Waiting, r.KVUsage, r.KVUsageMax, r.PrefixHits, r.PrefixQueries)

	// A vLLM without prefix caching: read, with what it lacked.
	r, err = load.Parse([]byte("vllm:num_requests_running 1\nvllm:num_requests_waiting 0\nvllm:kv_cache_usage_perc 0.5\n" +
		"vllm:cache_config_info{block_size=\"16\",num_gpu_blocks=\"100\"} 1\n"))
	fmt.Println(r.Running, r.KVUsage, r.MissingNames(), err)

	// Without what routing needs, the page is unreadable.
	_, err = load.Parse([]byte("vllm:num_requests_running 1\n"))
	var missing *load.MissingError
	fmt.Println(errors.Is(err, load.ErrUnreadable), errors.As(err, &missing) && len(missing.Families) == 2)
	fmt.Println(err)
	// Output:
	// sglang: 2 ranks, running 5, waiting 1, KV 0.50 (max 0.75), hits 600/1000
	// 1 0.5 [vllm:prefix_cache_queries vllm:prefix_cache_hits vllm:num_preemptions] <nil>
	// true true
	// load: unreadable page: vllm: missing vllm:num_requests_waiting, vllm:kv_cache_usage_perc
}

func ExampleRestarted() {
	before, _ := load.Parse([]byte("vllm:num_requests_running 0\nvllm:num_requests_waiting 0\n" +
		"vllm:kv_cache_usage_perc 0\nvllm:prefix_cache_queries_total 9000\nvllm:prefix_cache_hits_total 4000\n"))
	after, _ := load.Parse([]byte("vllm:num_requests_running 0\nvllm:num_requests_waiting 0\n" +
		"vllm:kv_cache_usage_perc 0\nvllm:prefix_cache_queries_total 12\nvllm:prefix_cache_hits_total 0\n"))
	fmt.Println(load.Restarted(before, before), load.Restarted(before, after))
	// Output: false true
}

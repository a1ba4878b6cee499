package load_test

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/inferrail/inferrail/model/load"
)

// FuzzParse: any page, whole or in pieces, never panics, gives the same
// result however it is split, and is either unreadable or a Report within
// its documented ranges.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.prom"))
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, uint8(7))
	}
	f.Add([]byte("vllm:num_requests_running{engine=\"0\\\"\"} 1 17\r\nvllm:num_requests_waiting 2 # {a=\"b\"} 1\n"+
		"vllm:kv_cache_usage_perc +Inf\nvllm:prefix_cache_queries_total 1e+06\nvllm:prefix_cache_hits 0x1p3\n"), uint8(3))
	f.Add([]byte("sglang:num_running_reqs{priority=\"\",dp_rank=\"1\"} 1\nsglang:num_queue_reqs\t{} 0\nsglang:token_usage 2"), uint8(1))
	f.Add([]byte("vllm:cache_config_info{block_size=\"16\",num_gpu_blocks=\"999999999999999999\"} 1\n"), uint8(0))
	// Optional families left out: only the three gauges routing needs, one
	// prefix counter without the other, SGLang without its capacity.
	f.Add([]byte("vllm:num_requests_running 0\nvllm:num_requests_waiting 0\nvllm:kv_cache_usage_perc 0\n"), uint8(2))
	f.Add([]byte("vllm:num_requests_running{engine=\"0\"} 1\nvllm:num_requests_waiting{engine=\"1\"} 1\n"+
		"vllm:gpu_cache_usage_perc 0.5\nvllm:prefix_cache_hits_total 3\nvllm:cache_config_info{num_gpu_blocks=\"None\"} 1\n"), uint8(9))
	f.Add([]byte("sglang:num_running_reqs 1\nsglang:num_queue_reqs 0\nsglang:token_usage 0.1\nsglang:cached_tokens_total 4\n"), uint8(5))
	f.Fuzz(func(t *testing.T, page []byte, step uint8) {
		r, err := load.Parse(page)

		var p load.Parser
		for rest, n := page, 1+int(step); len(rest) > 0; {
			k := min(n, len(rest))
			p.Write(rest[:k])
			rest = rest[k:]
			n = n*5%251 + 1 // pieces of varying size
		}
		r2, err2 := p.Report()
		if r != r2 && !(math.IsNaN(r.KVUsage) && math.IsNaN(r2.KVUsage)) || (err == nil) != (err2 == nil) ||
			err != nil && err.Error() != err2.Error() {
			t.Fatalf("whole: %+v, %v\npieces: %+v, %v", r, err, r2, err2)
		}
		if err != nil {
			if !errors.Is(err, load.ErrUnreadable) {
				t.Fatalf("error %v does not wrap ErrUnreadable", err)
			}
			if r != (load.Report{}) {
				t.Fatalf("report %+v with error %v", r, err)
			}
			return
		}
		if r.Engine != load.EngineVLLM && r.Engine != load.EngineSGLang {
			t.Fatalf("engine %q", r.Engine)
		}
		for _, v := range []float64{r.Running, r.Waiting, r.PrefixQueries, r.PrefixHits, r.Preemptions} {
			if !(v >= 0) {
				t.Fatalf("negative or NaN count in %+v", r)
			}
		}
		if r.Ranks < 1 || !(r.KVUsage >= 0 && r.KVUsage <= r.KVUsageMax*(1+1e-9) && r.KVUsageMax <= 1) {
			t.Fatalf("ranks or KV usage out of range: %+v", r)
		}
		if r.KVCapacityBlocks < 0 || r.BlockSize < 0 || r.KVCapacityTokens < 0 {
			t.Fatalf("negative capacity: %+v", r)
		}
		// A family missing leaves its part unset, and every missing family
		// has a name.
		if r.Missing&(load.FamPrefixQueries|load.FamPrefixHits) != 0 && r.Has(load.FieldPrefix) ||
			r.Missing&load.FamPreemptions != 0 && r.Has(load.FieldPreemptions) ||
			r.Missing&load.FamCapacity != 0 && r.Has(load.FieldCapacity) {
			t.Fatalf("a part read from a missing family: %+v", r)
		}
		n := 0
		for m := r.Missing; m != 0; m &= m - 1 {
			n++
		}
		if names := r.MissingNames(); len(names) != n || slices.Contains(names, "") {
			t.Fatalf("missing %b named %q", r.Missing, names)
		}
	})
}

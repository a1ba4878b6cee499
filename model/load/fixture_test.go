package load_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/inferrail/inferrail/model/load"
)

const all = load.FieldPrefix | load.FieldPreemptions | load.FieldCapacity

func readFixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestParseFixtures reads whole pages: the simulator's golden vLLM page
// (sim/vllmmetrics/testdata/page.golden, copied), hand-made vLLM pages with
// two DP ranks and with the names of before v0.11, and SGLang pages with DP
// ranks, TP ranks, priorities and custom tokenizer labels.
func TestParseFixtures(t *testing.T) {
	f := func(file string, want load.Report) {
		t.Helper()
		got, err := load.Parse(readFixture(t, file))
		if err != nil {
			t.Errorf("%s: %v", file, err)
			return
		}
		if got != want {
			t.Errorf("%s:\n got %+v\nwant %+v", file, got, want)
		}
	}
	f("vllm_sim.prom", load.Report{
		Engine: load.EngineVLLM, Ranks: 1, Running: 3, Waiting: 2,
		KVUsage: 0.4375, KVUsageMax: 0.4375, PrefixQueries: 1234567, PrefixHits: 512,
		Preemptions: 1, KVCapacityBlocks: 4096, BlockSize: 16, KVCapacityTokens: 65536, Fields: all,
	})
	// Two DP engines: summed, KV usage averaged; the external prefix cache
	// counters, _created samples and a NaN histogram sum are not read.
	f("vllm_dp2.prom", load.Report{
		Engine: load.EngineVLLM, Ranks: 2, Running: 8, Waiting: 5,
		KVUsage: 0.5, KVUsageMax: 0.75, PrefixQueries: 3001000, PrefixHits: 1500400,
		Preemptions: 2, KVCapacityBlocks: 16000, BlockSize: 16, KVCapacityTokens: 256000, Fields: all,
	})
	f("vllm_legacy.prom", load.Report{
		Engine: load.EngineVLLM, Ranks: 1, Running: 7, Waiting: 0,
		KVUsage: 0.0625, KVUsageMax: 0.0625, PrefixQueries: 4096, PrefixHits: 2048,
		Preemptions: 5, KVCapacityBlocks: 1500, BlockSize: 32, KVCapacityTokens: 48000, Fields: all,
	})
	// Two DP ranks of two TP ranks each: the TP ranks count once, the
	// priority series not at all, every custom tokenizer label does.
	f("sglang_dp2.prom", load.Report{
		Engine: load.EngineSGLang, Ranks: 2, Running: 10, Waiting: 2,
		KVUsage: 0.7, KVUsageMax: 0.9, PrefixQueries: 123456, PrefixHits: 65432,
		Preemptions: 3, KVCapacityTokens: 200000, Fields: all,
	})
	// No cached_tokens_total yet: hits are zero, the prefix counters are
	// still there. No retraction counter and no capacity.
	f("sglang_old.prom", load.Report{
		Engine: load.EngineSGLang, Ranks: 1, Running: 1, Waiting: 0,
		KVUsage: 0.01, KVUsageMax: 0.01, PrefixQueries: 17, Fields: load.FieldPrefix, Missing: load.FamCapacity,
	})
	// A vLLM started with --no-enable-prefix-caching, as a third-party
	// simulator shows it: no prefix cache counters and no preemptions, but
	// running, waiting and KV usage, which routing needs.
	f("vllm_no_prefix.prom", load.Report{
		Engine: load.EngineVLLM, Ranks: 1, Running: 2, Waiting: 1,
		KVUsage: 0.125, KVUsageMax: 0.125, KVCapacityBlocks: 2048, BlockSize: 16, KVCapacityTokens: 32768,
		Fields: load.FieldCapacity, Missing: load.FamPrefixQueries | load.FamPrefixHits | load.FamPreemptions,
	})
}

// TestParsePages covers what the fixtures do not, one small page each.
func TestParsePages(t *testing.T) {
	f := func(page string, want load.Report) {
		t.Helper()
		got, err := load.Parse([]byte(page))
		if err != nil {
			t.Errorf("%q: %v", page, err)
			return
		}
		if got != want {
			t.Errorf("%q:\n got %+v\nwant %+v", page, got, want)
		}
	}
	const vllmBase = "vllm:num_requests_running 1\nvllm:num_requests_waiting 2\n" +
		"vllm:prefix_cache_queries_total 10\nvllm:prefix_cache_hits_total 5\n"
	base := load.Report{Engine: load.EngineVLLM, Ranks: 1, Running: 1, Waiting: 2,
		PrefixQueries: 10, PrefixHits: 5, Fields: load.FieldPrefix, Missing: load.FamPreemptions | load.FamCapacity}
	with := func(edit func(*load.Report)) load.Report {
		r := base
		edit(&r)
		return r
	}

	// vLLM 0.10 and 0.11 served the old names beside the new ones: the new
	// ones win, and the old are not added to them.
	f(vllmBase+"vllm:gpu_cache_usage_perc 0.9\nvllm:kv_cache_usage_perc 0.5\n"+
		"vllm:gpu_prefix_cache_queries_total 10\nvllm:gpu_prefix_cache_hits_total 5\n",
		with(func(r *load.Report) { r.KVUsage, r.KVUsageMax = 0.5, 0.5 }))
	// Counters without the _total suffix (old exporters).
	f("vllm:num_requests_running 1\nvllm:num_requests_waiting 2\nvllm:kv_cache_usage_perc 0\n"+
		"vllm:prefix_cache_queries 10\nvllm:prefix_cache_hits 5\nvllm:num_preemptions 3\n",
		with(func(r *load.Report) {
			r.Preemptions, r.Fields, r.Missing = 3, load.FieldPrefix|load.FieldPreemptions, load.FamCapacity
		}))
	// CRLF, blanks and tabs, a timestamp, an exemplar, labels in any order
	// with a trailing comma, escapes, no newline at the end.
	f("# a comment\r\n\r\n  vllm:num_requests_running{model_name=\"a\\\"b\\\\\",engine=\"0\",} 1 1700000000000\r\n"+
		"vllm:num_requests_waiting\t{ engine = \"0\" }\t2e0\r\n"+
		"vllm:kv_cache_usage_perc{engine=\"0\"} 0.25 # {trace_id=\"x\"} 1.0 1.7e9\r\n"+
		"vllm:prefix_cache_queries_total{engine=\"0\"} 1e1\nvllm:prefix_cache_hits_total{engine=\"0\"} 5",
		with(func(r *load.Report) { r.KVUsage, r.KVUsageMax = 0.25, 0.25 }))
	// A series written twice counts once; the first wins.
	f(vllmBase+"vllm:kv_cache_usage_perc{engine=\"0\",model_name=\"m\"} 0.5\n"+
		"vllm:num_requests_running{engine=\"7\",model_name=\"m\"} 4\nvllm:num_requests_running{model_name=\"m\",engine=\"7\"} 9\n",
		with(func(r *load.Report) { r.Ranks, r.Running, r.KVUsage, r.KVUsageMax = 2, 5, 0.5, 0.5 }))
	// KV usage above 1 reads as 1; -0 is zero.
	f(vllmBase+"vllm:kv_cache_usage_perc 1.5\nvllm:num_preemptions_total -0\n",
		with(func(r *load.Report) {
			r.KVUsage, r.KVUsageMax, r.Fields, r.Missing = 1, 1, load.FieldPrefix|load.FieldPreemptions, load.FamCapacity
		}))
	// Capacity needs every rank's num_gpu_blocks: "None" leaves it unknown.
	// The family is there all the same: it is not missing.
	f(vllmBase+"vllm:kv_cache_usage_perc 0\n"+
		"vllm:cache_config_info{block_size=\"16\",num_gpu_blocks=\"None\"} 1.0\n",
		with(func(r *load.Report) { r.Missing = load.FamPreemptions }))
	f(vllmBase+"vllm:kv_cache_usage_perc 0\n"+
		"vllm:num_requests_running{engine=\"1\"} 0\nvllm:num_requests_waiting{engine=\"1\"} 0\n"+
		"vllm:cache_config_info{block_size=\"16\",num_gpu_blocks=\"100\"} 1.0\n",
		with(func(r *load.Report) { r.Ranks, r.Missing = 2, load.FamPreemptions }))
	// Other engines' families and unrelated garbage lines are skipped.
	f("<html>\n"+vllmBase+"vllm:kv_cache_usage_perc 0\nnot a metric line {\n{\"utf8.name\"} 1\nx{y=\"} 1\n",
		base)
	// SGLang fresh after a restart: scheduler gauges without any counter.
	// Its counters come on first use: they are not missing.
	f("sglang:num_running_reqs{tp_rank=\"0\"} 0.0\nsglang:num_queue_reqs{tp_rank=\"0\"} 0.0\n"+
		"sglang:token_usage{tp_rank=\"0\"} 0.0\nsglang:max_total_num_tokens{tp_rank=\"0\"} 5000\n",
		load.Report{Engine: load.EngineSGLang, Ranks: 1, KVCapacityTokens: 5000, Fields: load.FieldCapacity})

	// Optional families missing: vLLM before its KV cache is sized (or an
	// exporter that leaves them out) with nothing but the three gauges
	// routing needs. The page is read; Missing says what it lacked.
	f("vllm:num_requests_running 0\nvllm:num_requests_waiting 0\nvllm:kv_cache_usage_perc 0\n",
		load.Report{Engine: load.EngineVLLM, Ranks: 1, Missing: load.FamPrefixQueries | load.FamPrefixHits |
			load.FamPreemptions | load.FamCapacity})
	// One prefix counter without the other is no prefix counter: the
	// restart check compares both.
	f("vllm:num_requests_running 0\nvllm:num_requests_waiting 0\nvllm:gpu_cache_usage_perc 0.5\n"+
		"vllm:gpu_prefix_cache_queries_total 10\nvllm:num_preemptions_total 1\n"+
		"vllm:cache_config_info{block_size=\"16\",num_gpu_blocks=\"10\"} 1\n",
		load.Report{Engine: load.EngineVLLM, Ranks: 1, KVUsage: 0.5, KVUsageMax: 0.5, Preemptions: 1,
			KVCapacityBlocks: 10, BlockSize: 16, KVCapacityTokens: 160,
			Fields: load.FieldPreemptions | load.FieldCapacity, Missing: load.FamPrefixHits})
}

// TestParseUnreadable checks that pages the Report cannot trust are refused
// with ErrUnreadable and a message that says why.
func TestParseUnreadable(t *testing.T) {
	f := func(page, wantMsg string) {
		t.Helper()
		r, err := load.Parse([]byte(page))
		if !errors.Is(err, load.ErrUnreadable) {
			t.Errorf("%.60q: got %+v, %v; want ErrUnreadable", page, r, err)
			return
		}
		if r != (load.Report{}) {
			t.Errorf("%.60q: report %+v with the error", page, r)
		}
		if !strings.Contains(err.Error(), wantMsg) {
			t.Errorf("%.60q: error %q does not mention %q", page, err, wantMsg)
		}
	}
	f("", "no vllm: or sglang: metrics")
	f("\x00\xff garbage\n<html><body>502 Bad Gateway</body></html>\n", "no vllm: or sglang: metrics")
	f("process_cpu_seconds_total 1.5\n", "no vllm: or sglang: metrics")
	f("vllm:num_requests_running 1\nsglang:num_running_reqs 1\n", "both vllm: and sglang: metrics")
	f("vllm:iteration_tokens_total_sum 3\nsglang:gen_throughput 1\n", "both vllm: and sglang: metrics")
	f("vllm:num_requests_running 1\nvllm:prefix_cache_queries_total 1\n",
		"vllm: missing vllm:num_requests_waiting, vllm:kv_cache_usage_perc")
	f("vllm:generation_tokens_total 1\n", "vllm: missing vllm:num_requests_running,")
	f("sglang:num_running_reqs 1\nsglang:num_queue_reqs 1\n", "sglang: missing sglang:token_usage")
	// Only per-priority series: the base series is missing.
	f("sglang:num_running_reqs{priority=\"1\"} 1\nsglang:num_queue_reqs 1\nsglang:token_usage 0\n",
		"sglang: missing sglang:num_running_reqs")
	// A fresh SGLang engine, before its first batch, has HELP and TYPE only.
	f("# HELP sglang:num_running_reqs The number of running requests.\n# TYPE sglang:num_running_reqs gauge\n",
		"no vllm: or sglang: metrics")

	// Malformed lines of the families read.
	f("vllm:num_requests_running{engine=\"0\"} abc\n", `line 1: vllm:num_requests_running: bad value "abc"`)
	f("vllm:num_requests_running{engine=\"0\" 1\n", "line 1: vllm:num_requests_running: malformed sample")
	f("vllm:num_requests_running{engine=0} 1\n", "malformed sample")
	f("vllm:num_requests_running\n", "malformed sample")
	f("vllm:num_requests_running{engine=\"0\"}\n", "malformed sample")
	f("vllm:num_requests_running 1 2 3\n", "malformed sample")
	f("vllm:num_requests_running 1 x\n", `bad timestamp "x"`)
	f("x 1\nvllm:num_requests_running NaN\n", "line 2: vllm:num_requests_running: value NaN is not a count")
	f("vllm:num_requests_waiting +Inf\n", "value +Inf is not a count")
	f("vllm:kv_cache_usage_perc -0.5\n", "value -0.5 is not a count")
	f("vllm:num_requests_running{engine=\""+strings.Repeat("x", load.MaxLineBytes)+"\"} 1\n",
		"vllm:num_requests_running: longer than 65536 bytes")

	var many strings.Builder
	for i := range load.MaxSeries + 1 {
		many.WriteString("vllm:num_requests_running{engine=\"")
		many.WriteString(strings.Repeat("1", 1+i%7))
		many.WriteString("\"} 1\n")
	}
	f(many.String(), "more than 65536 series")
}

// TestParseMissing checks how missing families are named: the required
// ones in the MissingError of an unreadable page, the optional ones in the
// Report's MissingNames, each in its engine's spelling.
func TestParseMissing(t *testing.T) {
	required := func(page string, want ...string) {
		t.Helper()
		_, err := load.Parse([]byte(page))
		var me *load.MissingError
		if !errors.As(err, &me) || !errors.Is(err, load.ErrUnreadable) {
			t.Errorf("%q: %v is not a *MissingError wrapping ErrUnreadable", page, err)
			return
		}
		if !slices.Equal(me.Families, want) {
			t.Errorf("%q: missing %q, want %q", page, me.Families, want)
		}
	}
	// Legacy names stand in for the current ones; optional families never
	// make a page unreadable, and are never named as required.
	required("vllm:gpu_cache_usage_perc 0\n", "vllm:num_requests_running", "vllm:num_requests_waiting")
	required("vllm:num_requests_running 0\nvllm:num_requests_waiting 0\nvllm:prefix_cache_queries 1\n",
		"vllm:kv_cache_usage_perc")
	required("sglang:token_usage 0\nsglang:prompt_tokens_total 5\n", "sglang:num_running_reqs", "sglang:num_queue_reqs")

	optional := func(page string, want ...string) {
		t.Helper()
		r, err := load.Parse([]byte(page))
		if err != nil {
			t.Errorf("%q: %v", page, err)
			return
		}
		if got := r.MissingNames(); !slices.Equal(got, want) {
			t.Errorf("%q: MissingNames %q, want %q", page, got, want)
		}
	}
	optional(string(readFixture(t, "vllm_no_prefix.prom")),
		"vllm:prefix_cache_queries", "vllm:prefix_cache_hits", "vllm:num_preemptions")
	optional(string(readFixture(t, "vllm_sim.prom")))
	optional(string(readFixture(t, "sglang_old.prom")), "sglang:max_total_num_tokens")
	optional(string(readFixture(t, "sglang_dp2.prom")))
	optional("vllm:num_requests_running 0\nvllm:num_requests_waiting 0\nvllm:gpu_cache_usage_perc 0\n"+
		"vllm:gpu_prefix_cache_hits 0\nvllm:num_preemptions 0\n", "vllm:prefix_cache_queries", "vllm:cache_config_info")
}

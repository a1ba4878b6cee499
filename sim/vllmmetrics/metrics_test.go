package vllmmetrics_test

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/inferrail/inferrail/sim/vllmmetrics"
)

var update = flag.Bool("update", false, "rewrite testdata/page.golden")

// Sink keeps benchmark results alive.
var Sink []byte

func TestMain(m *testing.M) {
	flag.Parse()
	before := runtime.NumGoroutine()
	code := m.Run()
	if code == 0 {
		// Goroutines that called wg.Done may still be on their way out.
		deadline := time.Now().Add(2 * time.Second)
		for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
			runtime.Gosched()
		}
		if n := runtime.NumGoroutine(); n > before {
			buf := make([]byte, 1<<16)
			fmt.Fprintf(os.Stderr, "goroutine leak: %d before, %d after\n%s\n", before, n, buf[:runtime.Stack(buf, true)])
			code = 1
		}
	}
	os.Exit(code)
}

const model = "meta-llama/Llama-3.1-8B-Instruct"

var created = time.Unix(1700000000, 123456000)

// cacheInfo is CacheConfig.metrics_info() of a small engine: each field's
// Python str(). Its order is CacheConfig's field order; the page sorts it.
var cacheInfo = []vllmmetrics.Label{
	{Name: "block_size", Value: "16"},
	{Name: "gpu_memory_utilization", Value: "0.92"},
	{Name: "cache_dtype", Value: "auto"},
	{Name: "is_attention_free", Value: "False"},
	{Name: "num_gpu_blocks_override", Value: "None"},
	{Name: "sliding_window", Value: "None"},
	{Name: "enable_prefix_caching", Value: "True"},
	{Name: "prefix_caching_hash_algo", Value: "sha256"},
	{Name: "num_gpu_blocks", Value: "4096"},
	{Name: "num_cpu_blocks", Value: "None"},
	{Name: "kv_cache_memory_bytes", Value: "None"},
	{Name: "engine", Value: ""}, // vLLM overwrites it with the engine index
}

// scripted builds the metrics of TestGolden. testdata/reference.py replays
// the same sequence through prometheus_client; keep the two in step.
func scripted() *vllmmetrics.Metrics {
	m := vllmmetrics.New(model, 2048, cacheInfo, vllmmetrics.WithCreated(created))
	m.SetRunning(3)
	m.SetWaiting(2)
	m.SetKVUsage(0.4375)
	m.AddPrefixQueries(1234567) // > 1e6: rendered 1.234567e+06
	m.AddPrefixHits(512)
	m.AddPreemptions(1)
	m.AddPromptTokens(688)
	m.AddCachedPromptTokens(512)
	m.AddGenerationTokens(37)
	for _, n := range []int{0, 3, 600, 16384, 20000} { // 20000 lands in +Inf
		m.ObserveIterationTokens(n)
	}
	for _, r := range []string{"stop", "length", "stop", "abort"} {
		m.IncRequestSuccess(r)
	}
	for _, r := range scriptedRequests {
		m.ObserveRequest(r)
	}
	return m
}

var scriptedRequests = []vllmmetrics.RequestTimes{
	{ // an ordinary request with a prefix hit
		Queue: 2 * time.Millisecond, Prefill: 180 * time.Millisecond, Decode: 1100 * time.Millisecond,
		E2E: 1282 * time.Millisecond, TTFT: 182 * time.Millisecond,
		InterTokenGaps: []time.Duration{100 * time.Millisecond, 250 * time.Millisecond, 750 * time.Millisecond},
		PromptTokens:   700, CachedTokens: 512, GenerationTokens: 4, MaxTokens: 16,
	},
	{ // one token, microsecond timings (2.5e-05), max_tokens unset
		Prefill: 25 * time.Microsecond, E2E: 30 * time.Microsecond, TTFT: 27 * time.Microsecond,
		PromptTokens: 1, GenerationTokens: 1,
	},
	{ // aborted after 2.5 hours in the queue, before its first token
		Queue: 9000 * time.Second, E2E: 9000 * time.Second,
		PromptTokens: 2048, MaxTokens: 2048,
	},
}

func TestGolden(t *testing.T) {
	got := scripted().AppendText(nil)
	path := filepath.Join("testdata", "page.golden")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
		for i := range min(len(gl), len(wl)) {
			if gl[i] != wl[i] {
				t.Fatalf("page differs from %s at line %d:\n got: %s\nwant: %s", path, i+1, gl[i], wl[i])
			}
		}
		t.Fatalf("page differs from %s: %d lines, want %d", path, len(gl), len(wl))
	}
}

func TestPageParses(t *testing.T) {
	for name, m := range map[string]*vllmmetrics.Metrics{
		"scripted":  scripted(),
		"fresh":     vllmmetrics.New("m", 1, nil),
		"nocreated": vllmmetrics.New("m", 131072, nil, vllmmetrics.WithoutCreated()),
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := parsePage(string(m.AppendText(nil))); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestScriptedValues reads back through the parser what TestGolden pins
// byte for byte, so a wrong golden file cannot hide a wrong value.
func TestScriptedValues(t *testing.T) {
	fams, err := parsePage(string(scripted().AppendText(nil)))
	if err != nil {
		t.Fatal(err)
	}
	f := func(name string, want float64, labels ...vllmmetrics.Label) {
		t.Helper()
		got, err := value(fams, name, labels...)
		if err != nil {
			t.Error(err)
		} else if got != want && !(math.IsNaN(got) && math.IsNaN(want)) {
			t.Errorf("%s%v = %v, want %v", name, labels, got, want)
		}
	}
	l := func(n, v string) vllmmetrics.Label { return vllmmetrics.Label{Name: n, Value: v} }
	f("vllm:num_requests_running", 3)
	f("vllm:num_requests_waiting", 2)
	f("vllm:num_requests_waiting_by_reason", 2, l("reason", "capacity"))
	f("vllm:num_requests_waiting_by_reason", 0, l("reason", "deferred"))
	f("vllm:engine_sleep_state", 1, l("sleep_state", "awake"))
	f("vllm:kv_cache_usage_perc", 0.4375)
	f("vllm:prefix_cache_queries_total", 1234567)
	f("vllm:prefix_cache_hits_total", 512)
	f("vllm:num_preemptions_total", 1)
	f("vllm:prompt_tokens_total", 1200)
	f("vllm:prompt_tokens_by_source_total", 688, l("source", "local_compute"))
	f("vllm:prompt_tokens_by_source_total", 512, l("source", "local_cache_hit"))
	f("vllm:prompt_tokens_by_source_total", 0, l("source", "external_kv_transfer"))
	f("vllm:prompt_tokens_cached_total", 512)
	f("vllm:generation_tokens_total", 37)
	for r, n := range map[string]float64{"stop": 2, "length": 1, "abort": 1, "error": 0, "repetition": 0} {
		f("vllm:request_success_total", n, l("finished_reason", r))
	}
	f("vllm:iteration_tokens_total_count", 5)
	f("vllm:iteration_tokens_total_bucket", 1, l("le", "1.0"))
	f("vllm:iteration_tokens_total_bucket", 4, l("le", "16384.0"))
	f("vllm:iteration_tokens_total_sum", 36987)
	f("vllm:time_to_first_token_seconds_count", 2) // the aborted request had no first token
	f("vllm:time_to_first_token_seconds_bucket", 1, l("le", "0.001"))
	f("vllm:inter_token_latency_seconds_count", 3)
	f("vllm:inter_token_latency_seconds_sum", 1.1)
	f("vllm:request_time_per_output_token_seconds_count", 3)
	f("vllm:request_time_per_output_token_seconds_bucket", 2, l("le", "0.01")) // two zeros
	decode := (1100 * time.Millisecond).Seconds()
	f("vllm:request_time_per_output_token_seconds_sum", decode/3)
	f("vllm:request_queue_time_seconds_bucket", 2, l("le", "7680.0"))
	f("vllm:request_queue_time_seconds_count", 3)
	f("vllm:request_queue_time_seconds_sum", 9000.002)
	f("vllm:request_inference_time_seconds_sum", 1.280025)
	f("vllm:request_prefill_kv_computed_tokens_sum", 188+1+2048)
	f("vllm:request_prompt_tokens_bucket", 2, l("le", "1000.0"))
	f("vllm:request_prompt_tokens_bucket", 2, l("le", "2000.0")) // 2048 > 2000
	f("vllm:request_prompt_tokens_bucket", 3, l("le", "+Inf"))
	f("vllm:request_params_max_tokens_count", 2)
	f("vllm:request_params_n_bucket", 3, l("le", "1.0"))
	f("vllm:request_max_num_generation_tokens_sum", 5)
	f("vllm:cache_config_info", 1, l("block_size", "16"), l("engine", "0"))
	if _, err := value(fams, "vllm:cache_config_info", l("engine", "")); err == nil {
		t.Error(`cache_config_info kept the caller's engine=""`)
	}
	info, _ := familyByName(fams, "vllm:cache_config_info")
	if _, ok := info.samples[0].label("model_name"); ok {
		t.Error("cache_config_info has model_name; vLLM's has none")
	}
	f("vllm:request_success_created", 1.700000000123456e9, l("finished_reason", "repetition"))
}

func TestFamilies(t *testing.T) {
	fams, err := parsePage(string(scripted().AppendText(nil)))
	if err != nil {
		t.Fatal(err)
	}
	var counters, gauges, hists, created int
	for _, f := range fams {
		switch {
		case strings.HasSuffix(f.name, "_created"):
			created++
			if f.typ != "gauge" {
				t.Errorf("%s is a %s", f.name, f.typ)
			}
		case f.typ == "counter":
			counters++
			if !strings.HasSuffix(f.name, "_total") {
				t.Errorf("counter %s lacks _total", f.name)
			}
		case f.typ == "gauge":
			gauges++
		case f.typ == "histogram":
			hists++
		}
		for _, s := range f.samples {
			if f.name == "vllm:cache_config_info" {
				continue
			}
			if m, _ := s.label("model_name"); m != model {
				t.Errorf("%s: model_name=%q", s.name, m)
			}
			if e, _ := s.label("engine"); e != "0" {
				t.Errorf("%s: engine=%q", s.name, e)
			}
		}
	}
	// 6 gauges including cache_config_info; 15 counters; 15 histograms; a
	// _created gauge for each counter and histogram.
	if gauges != 6 || counters != 15 || hists != 15 || created != counters+hists {
		t.Errorf("got %d gauges, %d counters, %d histograms, %d _created; want 6, 15, 15, 30", gauges, counters, hists, created)
	}
	if fams[0].name != "vllm:estimated_flops_per_gpu_total" || fams[len(fams)-1].name != "vllm:cache_config_info" {
		t.Errorf("page starts with %s and ends with %s", fams[0].name, fams[len(fams)-1].name)
	}
}

func TestTokenBuckets(t *testing.T) {
	// vLLM's docstring: build_1_2_5_buckets(100) == [1, 2, 5, 10, 20, 50, 100].
	f := func(maxModelLen int, want string) {
		t.Helper()
		fams, err := parsePage(string(vllmmetrics.New("m", maxModelLen, nil).AppendText(nil)))
		if err != nil {
			t.Fatal(err)
		}
		fam, _ := familyByName(fams, "vllm:request_prompt_tokens")
		var les []string
		for _, s := range fam.samples {
			if le, ok := s.label("le"); ok {
				les = append(les, le)
			}
		}
		if got := strings.Join(les, " "); got != want {
			t.Errorf("max_model_len %d: le = %s, want %s", maxModelLen, got, want)
		}
	}
	f(1, "1.0 +Inf")
	f(4, "1.0 2.0 +Inf")
	f(100, "1.0 2.0 5.0 10.0 20.0 50.0 100.0 +Inf")
	f(2048, "1.0 2.0 5.0 10.0 20.0 50.0 100.0 200.0 500.0 1000.0 2000.0 +Inf")
	f(1000000, "1.0 2.0 5.0 10.0 20.0 50.0 100.0 200.0 500.0 1000.0 2000.0 5000.0 10000.0 20000.0 50000.0 100000.0 200000.0 500000.0 1e+06 +Inf")
	f(math.MaxInt64, "1.0 2.0 5.0 10.0 20.0 50.0 100.0 200.0 500.0 1000.0 2000.0 5000.0 10000.0 20000.0 50000.0 100000.0 200000.0 500000.0 "+
		"1e+06 2e+06 5e+06 1e+07 2e+07 5e+07 1e+08 2e+08 5e+08 1e+09 2e+09 5e+09 1e+010 2e+010 5e+010 1e+011 2e+011 5e+011 "+
		"1e+012 2e+012 5e+012 1e+013 2e+013 5e+013 1e+014 2e+014 5e+014 1e+015 2e+015 5e+015 1e+16 2e+16 5e+16 1e+17 2e+17 5e+17 "+
		"1e+18 2e+18 5e+18 +Inf")
}

func TestEscaping(t *testing.T) {
	m := vllmmetrics.New("a\"b\\c\nd", 16, []vllmmetrics.Label{{Name: "x", Value: `q"\`}}, vllmmetrics.WithoutCreated())
	page := string(m.AppendText(nil))
	if !strings.Contains(page, `vllm:num_requests_running{engine="0",model_name="a\"b\\c\nd"} 0.0`+"\n") {
		t.Errorf("model name not escaped as prometheus_client does:\n%s", page[:400])
	}
	if !strings.Contains(page, `vllm:cache_config_info{engine="0",x="q\"\\"} 1.0`+"\n") {
		t.Error("cache_config_info label not escaped")
	}
	fams, err := parsePage(page)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := value(fams, "vllm:num_requests_running", vllmmetrics.Label{Name: "model_name", Value: "a\"b\\c\nd"}); err != nil {
		t.Error(err)
	}
}

func TestWithoutCreated(t *testing.T) {
	page := string(vllmmetrics.New("m", 16, nil, vllmmetrics.WithoutCreated()).AppendText(nil))
	if strings.Contains(page, "_created") {
		t.Error("page has _created samples")
	}
}

func TestWithoutFamilies(t *testing.T) {
	omit := []string{"vllm:prefix_cache_queries", "vllm:prefix_cache_hits", "vllm:cache_config_info"}
	m := vllmmetrics.New("m", 16, nil, vllmmetrics.WithoutFamilies(omit...))
	m.SetRunning(3)
	page := string(m.AppendText(nil))
	for _, f := range omit {
		if strings.Contains(page, f) {
			t.Errorf("page has %s", f)
		}
	}
	fams, err := parsePage(page)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := value(fams, "vllm:num_requests_running"); err != nil || v != 3 {
		t.Errorf("running = %v, %v; want 3", v, err)
	}
}

func TestSleepLevel(t *testing.T) {
	m := vllmmetrics.New("m", 16, nil)
	f := func(level int, awake, offloaded, discarded float64) {
		t.Helper()
		m.SetSleepLevel(level)
		fams, err := parsePage(string(m.AppendText(nil)))
		if err != nil {
			t.Fatal(err)
		}
		for state, want := range map[string]float64{"awake": awake, "weights_offloaded": offloaded, "discard_all": discarded} {
			got, err := value(fams, "vllm:engine_sleep_state", vllmmetrics.Label{Name: "sleep_state", Value: state})
			if err != nil || got != want {
				t.Errorf("level %d: %s = %v (%v), want %v", level, state, got, err, want)
			}
		}
	}
	f(1, 0, 1, 0)
	f(2, 0, 0, 1)
	f(3, 0, 0, 0)
	f(0, 1, 0, 0)
}

func TestPanics(t *testing.T) {
	f := func(name string, fn func()) {
		t.Helper()
		defer func() {
			r := recover()
			if s, _ := r.(string); !strings.HasPrefix(s, "BUG: ") {
				t.Errorf("%s: recovered %v, want a BUG: panic", name, r)
			}
		}()
		fn()
	}
	m := vllmmetrics.New("m", 16, nil)
	f("unknown reason", func() { m.IncRequestSuccess("timeout") })
	f("negative counter", func() { m.AddGenerationTokens(-1) })
	f("max_model_len 0", func() { vllmmetrics.New("m", 0, nil) })
	f("bad label", func() { vllmmetrics.New("m", 16, []vllmmetrics.Label{{Name: "block-size", Value: "16"}}) })
	f("repeated label", func() {
		vllmmetrics.New("m", 16, []vllmmetrics.Label{{Name: "a", Value: "1"}, {Name: "a", Value: "2"}})
	})
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("closed") }

func TestWritePrometheus(t *testing.T) {
	m := scripted()
	var buf bytes.Buffer
	if err := m.WritePrometheus(&buf); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), m.AppendText(nil)) {
		t.Error("WritePrometheus and AppendText differ")
	}
	if err := m.WritePrometheus(failingWriter{}); err == nil {
		t.Error("no error from a failing writer")
	}
}

// TestConcurrent runs one writer and several renderers; run it with -race.
// Each renderer checks every page it sees: valid, internally consistent,
// and no counter going down since its previous page.
func TestConcurrent(t *testing.T) {
	m := vllmmetrics.New(model, 4096, cacheInfo)
	const writes = 2000
	done := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 8)

	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(done)
		gaps := []time.Duration{time.Millisecond, 2 * time.Millisecond}
		for i := range writes {
			m.SetRunning(i % 7)
			m.SetWaiting(i % 5)
			m.SetKVUsage(float64(i%100) / 100)
			m.AddPrefixQueries(100)
			m.AddPrefixHits(32)
			m.AddPromptTokens(68)
			m.AddCachedPromptTokens(32)
			m.AddGenerationTokens(3)
			m.ObserveIterationTokens(i % 3000)
			if i%10 == 0 {
				m.AddPreemptions(1)
				m.SetSleepLevel(i % 3)
				m.IncRequestSuccess("stop")
				m.ObserveRequest(vllmmetrics.RequestTimes{
					Queue: time.Duration(i) * time.Microsecond, Prefill: 20 * time.Millisecond,
					Decode: 3 * time.Millisecond, E2E: 25 * time.Millisecond, TTFT: 21 * time.Millisecond,
					InterTokenGaps: gaps, PromptTokens: 100, CachedTokens: 32, GenerationTokens: 3, MaxTokens: 3,
				})
			}
		}
	}()

	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf []byte
			var last map[string]float64
			for pages := 0; ; pages++ {
				select {
				case <-done:
					if pages > 0 {
						return
					}
				default:
				}
				buf = m.AppendText(buf[:0])
				cur, err := checkSnapshot(string(buf), last)
				if err != nil {
					errs <- fmt.Errorf("page %d: %w", pages, err)
					return
				}
				last = cur
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func checkSnapshot(page string, last map[string]float64) (map[string]float64, error) {
	fams, err := parsePage(page)
	if err != nil {
		return nil, err
	}
	cur := map[string]float64{}
	for _, f := range fams {
		if f.typ != "counter" && f.typ != "histogram" {
			continue
		}
		for _, s := range f.samples {
			k := s.name + "{" + s.seriesKey() + "}"
			if le, ok := s.label("le"); ok {
				k += le
			}
			if strings.HasSuffix(s.name, "_sum") {
				continue
			}
			cur[k] = s.value
			if prev, ok := last[k]; ok && s.value < prev {
				return nil, fmt.Errorf("%s went down: %v -> %v", k, prev, s.value)
			}
		}
	}
	// Each method updates all the series it touches under one lock.
	total, _ := value(fams, "vllm:prompt_tokens_total")
	compute, _ := value(fams, "vllm:prompt_tokens_by_source_total", vllmmetrics.Label{Name: "source", Value: "local_compute"})
	hit, _ := value(fams, "vllm:prompt_tokens_by_source_total", vllmmetrics.Label{Name: "source", Value: "local_cache_hit"})
	cached, _ := value(fams, "vllm:prompt_tokens_cached_total")
	if total != compute+hit || hit != cached {
		return nil, fmt.Errorf("prompt tokens: total %v, local_compute %v, local_cache_hit %v, cached %v", total, compute, hit, cached)
	}
	waiting, _ := value(fams, "vllm:num_requests_waiting")
	capacity, _ := value(fams, "vllm:num_requests_waiting_by_reason", vllmmetrics.Label{Name: "reason", Value: "capacity"})
	if waiting != capacity {
		return nil, fmt.Errorf("waiting %v != capacity %v", waiting, capacity)
	}
	ttft, _ := value(fams, "vllm:time_to_first_token_seconds_count")
	e2e, _ := value(fams, "vllm:e2e_request_latency_seconds_count")
	if ttft != e2e {
		return nil, fmt.Errorf("one ObserveRequest half seen: ttft count %v, e2e count %v", ttft, e2e)
	}
	return cur, nil
}

func BenchmarkAppendText(b *testing.B) {
	m := scripted()
	buf := m.AppendText(nil)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		buf = m.AppendText(buf[:0])
	}
	Sink = buf
}

// BenchmarkAppendTextParallel renders from every P while one goroutine
// keeps observing, as scrapers and the driver do.
func BenchmarkAppendTextParallel(b *testing.B) {
	m := scripted()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		r := scriptedRequests[0]
		for {
			select {
			case <-stop:
				return
			default:
				m.ObserveRequest(r)
			}
		}
	}()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		var buf []byte
		for pb.Next() {
			buf = m.AppendText(buf[:0])
		}
	})
	close(stop)
	wg.Wait()
}

func BenchmarkObserveRequest(b *testing.B) {
	m := scripted()
	r := scriptedRequests[0]
	b.ReportAllocs()
	for b.Loop() {
		m.ObserveRequest(r)
	}
}

func BenchmarkWritePrometheus(b *testing.B) {
	m := scripted()
	var buf bytes.Buffer
	b.ReportAllocs()
	for b.Loop() {
		buf.Reset()
		if err := m.WritePrometheus(&buf); err != nil {
			b.Fatal(err)
		}
	}
	Sink = buf.Bytes()
}

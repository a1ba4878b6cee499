package load_test

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/inferrail/inferrail/model/load"
	"github.com/inferrail/inferrail/sim/vllmmetrics"
)

// rankLoad is what one data-parallel rank shows.
type rankLoad struct {
	running, waiting, kv     float64
	queries, hits, preempted float64
	blocks                   int64 // vLLM num_gpu_blocks; -1 renders "None"
	tokens                   int64 // SGLang max_total_num_tokens; -1 leaves it out
}

// page builds a random metrics page of one engine line by line, and the
// Report it must parse to.
type page struct {
	rng   *rand.Rand
	lines []string
}

// sample adds one sample line with its labels in random order, blanks
// sprinkled where the format allows them, and a random spelling of v.
func (p *page) sample(name string, labels [][2]string, v float64) {
	p.rng.Shuffle(len(labels), func(i, j int) { labels[i], labels[j] = labels[j], labels[i] })
	blank := func() string { return []string{"", "", " ", "\t"}[p.rng.IntN(4)] }
	var b strings.Builder
	b.WriteString(name)
	if len(labels) > 0 || p.rng.IntN(8) == 0 {
		b.WriteString(blank() + "{")
		for i, l := range labels {
			if i > 0 {
				b.WriteString(blank() + ",")
			}
			fmt.Fprintf(&b, "%s%s%s=%s%q", blank(), l[0], blank(), blank(), l[1])
		}
		if len(labels) > 0 && p.rng.IntN(4) == 0 {
			b.WriteString(",")
		}
		b.WriteString(blank() + "}")
	}
	b.WriteString([]string{" ", "\t", "  "}[p.rng.IntN(3)])
	b.WriteString(p.number(v))
	switch p.rng.IntN(6) {
	case 0:
		b.WriteString(" " + strconv.FormatInt(1700000000000+p.rng.Int64N(1e9), 10))
	case 1:
		b.WriteString(` # {trace_id="` + strconv.Itoa(p.rng.IntN(1000)) + `"} 1.0`)
	}
	p.lines = append(p.lines, b.String())
}

// number spells v as Python's prometheus_client does, or as Go would, or
// with an exponent.
func (p *page) number(v float64) string {
	switch p.rng.IntN(4) {
	case 0:
		if v == float64(int64(v)) && v < 1e6 {
			return strconv.FormatFloat(v, 'f', 1, 64) // "3.0"
		}
	case 1:
		return strconv.FormatFloat(v, 'e', -1, 64) // "3e+00"
	case 2:
		return strconv.FormatFloat(v, 'E', -1, 64)
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// noise adds lines that must not change the result.
func (p *page) noise(prefix string) {
	n := p.rng.IntN(12)
	for range n {
		switch p.rng.IntN(9) {
		case 0:
			p.lines = append(p.lines, "# HELP "+prefix+"num_requests_running Number of requests in model execution batches.")
		case 1:
			p.lines = append(p.lines, "# TYPE "+prefix+"prefix_cache_queries_total counter")
		case 2:
			p.lines = append(p.lines, "")
		case 3:
			p.sample(prefix+"prefix_cache_queries_created", [][2]string{{"engine", "0"}}, 1.7e9)
		case 4:
			p.sample(prefix+"time_to_first_token_seconds_bucket", [][2]string{{"le", "+Inf"}, {"engine", "0"}}, 9)
		case 5:
			p.sample(prefix+"num_requests_waiting_by_reason", [][2]string{{"reason", "capacity"}}, 99)
		case 6:
			p.sample("process_resident_memory_bytes", nil, 4.2e9)
		case 7:
			p.sample(prefix+"external_prefix_cache_queries_total", nil, 5e5)
		case 8:
			p.lines = append(p.lines, "python_info{implementation=\"CPython\"} NaN")
		}
	}
}

// text shuffles the lines, doubles some and ends them with \n or \r\n.
func (p *page) text() []byte {
	for i, n := 0, len(p.lines); i < n/4; i++ {
		if l := p.lines[p.rng.IntN(n)]; !strings.HasPrefix(l, "#") {
			p.lines = append(p.lines, l) // the same series again, same value
		}
	}
	p.rng.Shuffle(len(p.lines), func(i, j int) { p.lines[i], p.lines[j] = p.lines[j], p.lines[i] })
	eol := "\n"
	if p.rng.IntN(4) == 0 {
		eol = "\r\n"
	}
	text := strings.Join(p.lines, eol)
	if p.rng.IntN(2) == 0 {
		text += eol
	}
	return []byte(text)
}

// randomRanks draws the ranks of one engine. Values are small integers and
// KV usage is a multiple of 1/1024, so that sums are exact in any order.
func randomRanks(rng *rand.Rand, n int) []rankLoad {
	ranks := make([]rankLoad, n)
	for i := range ranks {
		q := float64(rng.Int64N(1 << 40))
		ranks[i] = rankLoad{
			running: float64(rng.IntN(300)), waiting: float64(rng.IntN(300)),
			kv:      float64(rng.IntN(1025)) / 1024,
			queries: q, hits: float64(rng.Int64N(int64(q) + 1)), preempted: float64(rng.IntN(1000)),
			blocks: 1 + rng.Int64N(1<<20), tokens: 1 + rng.Int64N(1<<24),
		}
	}
	return ranks
}

// renderVLLM renders ranks as one vLLM page, with the names of before v0.11
// when legacy is set, and returns the Report it must parse to. Now and then
// an optional family is left out, as an engine without prefix caching or an
// exporter that does not write them leaves them out.
func renderVLLM(p *page, ranks []rankLoad, legacy bool) load.Report {
	want := load.Report{Engine: load.EngineVLLM, Ranks: len(ranks), KVUsageMax: 0,
		Fields: load.FieldPrefix | load.FieldPreemptions | load.FieldCapacity}
	var omit load.Families
	for _, f := range []load.Families{load.FamPrefixQueries, load.FamPrefixHits, load.FamPreemptions, load.FamCapacity} {
		if p.rng.IntN(6) == 0 {
			omit |= f
		}
	}
	want.Missing = omit
	if omit&(load.FamPrefixQueries|load.FamPrefixHits) != 0 {
		want.Fields &^= load.FieldPrefix
	}
	if omit&load.FamPreemptions != 0 {
		want.Fields &^= load.FieldPreemptions
	}
	if omit&load.FamCapacity != 0 {
		want.Fields &^= load.FieldCapacity
	}
	with := func(f load.Families) bool { return omit&f == 0 }
	kvName, qName, hName := "vllm:kv_cache_usage_perc", "vllm:prefix_cache_queries", "vllm:prefix_cache_hits"
	if legacy {
		kvName, qName, hName = "vllm:gpu_cache_usage_perc", "vllm:gpu_prefix_cache_queries", "vllm:gpu_prefix_cache_hits"
	}
	suffix := "_total"
	if p.rng.IntN(5) == 0 {
		suffix = "" // an exporter without the counter suffix
	}
	blockSize := int64(16 << p.rng.IntN(3))
	noEngine := len(ranks) == 1 && p.rng.IntN(2) == 0
	var blocks int64
	for i, r := range ranks {
		labels := func(extra ...[2]string) [][2]string {
			l := [][2]string{{"model_name", "org/model-" + strconv.Itoa(i%2)}}
			if !noEngine {
				l = append(l, [2]string{"engine", strconv.Itoa(i)})
			}
			return append(l, extra...)
		}
		p.sample("vllm:num_requests_running", labels(), r.running)
		p.sample("vllm:num_requests_waiting", labels(), r.waiting)
		p.sample(kvName, labels(), r.kv)
		if with(load.FamPrefixQueries) {
			p.sample(qName+suffix, labels(), r.queries)
		}
		if with(load.FamPrefixHits) {
			p.sample(hName+suffix, labels(), r.hits)
		}
		if with(load.FamPreemptions) {
			p.sample("vllm:num_preemptions"+suffix, labels(), r.preempted)
		}
		nb := strconv.FormatInt(r.blocks, 10)
		if p.rng.IntN(20) == 0 {
			nb = "None"
			want.Fields &^= load.FieldCapacity
		}
		ci := [][2]string{{"block_size", strconv.FormatInt(blockSize, 10)}, {"num_gpu_blocks", nb},
			{"cache_dtype", "auto"}, {"enable_prefix_caching", "True"}, {"num_cpu_blocks", "None"}}
		if !noEngine {
			ci = append(ci, [2]string{"engine", strconv.Itoa(i)})
		}
		if with(load.FamCapacity) {
			p.sample("vllm:cache_config_info", ci, 1)
		}
		want.Running += r.running
		want.Waiting += r.waiting
		want.KVUsage += r.kv
		want.KVUsageMax = max(want.KVUsageMax, r.kv)
		if want.Has(load.FieldPrefix) {
			want.PrefixQueries += r.queries
			want.PrefixHits += r.hits
		}
		if want.Has(load.FieldPreemptions) {
			want.Preemptions += r.preempted
		}
		blocks += r.blocks
	}
	want.KVUsage /= float64(len(ranks))
	if want.Has(load.FieldCapacity) {
		want.KVCapacityBlocks, want.BlockSize, want.KVCapacityTokens = int(blocks), int(blockSize), blocks*blockSize
	}
	p.noise("vllm:")
	return want
}

// renderSGLang renders ranks as one SGLang page: every rank's scheduler
// seen from one or two TP ranks, per-priority series beside the base ones,
// and the tokenizer's counters under one to three custom label values.
func renderSGLang(p *page, ranks []rankLoad) load.Report {
	want := load.Report{Engine: load.EngineSGLang, Ranks: len(ranks), Fields: load.FieldCapacity}
	withDP := len(ranks) > 1 || p.rng.IntN(2) == 0
	tpRanks := 1 + p.rng.IntN(2)
	withPriority := p.rng.IntN(2) == 0
	withRetractions := p.rng.IntN(3) > 0
	var tokens int64
	want.Missing = load.FamCapacity // until a rank shows its capacity
	for i, r := range ranks {
		if r.tokens < 0 || p.rng.IntN(20) == 0 {
			want.Fields &^= load.FieldCapacity
			r.tokens = -1
		} else {
			want.Missing = 0
		}
		for tp := range tpRanks {
			labels := func(priority string) [][2]string {
				l := [][2]string{{"model_name", "qwen"}, {"engine_type", "unified"},
					{"tp_rank", strconv.Itoa(tp)}, {"pp_rank", "0"}, {"moe_ep_rank", strconv.Itoa(tp)}}
				if withDP {
					l = append(l, [2]string{"dp_rank", strconv.Itoa(i)})
				}
				if withPriority {
					l = append(l, [2]string{"priority", priority})
				}
				return l
			}
			p.sample("sglang:num_running_reqs", labels(""), r.running)
			p.sample("sglang:num_queue_reqs", labels(""), r.waiting)
			p.sample("sglang:token_usage", labels(""), r.kv)
			if withPriority {
				for _, prio := range []string{"0", "7", "high"}[:p.rng.IntN(4)] {
					p.sample("sglang:num_running_reqs", labels(prio), float64(p.rng.IntN(1000)))
					p.sample("sglang:num_queue_reqs", labels(prio), float64(p.rng.IntN(1000)))
				}
			}
			if withRetractions {
				p.sample("sglang:num_retracted_requests_total", labels(""), r.preempted)
			}
			if r.tokens >= 0 {
				p.sample("sglang:max_total_num_tokens", labels(""), float64(r.tokens))
			}
			p.sample("sglang:cache_hit_rate", labels(""), 0.5)
		}
		want.Running += r.running
		want.Waiting += r.waiting
		want.KVUsage += r.kv
		want.KVUsageMax = max(want.KVUsageMax, r.kv)
		want.Preemptions += r.preempted
		tokens += r.tokens
	}
	want.KVUsage /= float64(len(ranks))
	if withRetractions {
		want.Fields |= load.FieldPreemptions
	} else {
		want.Preemptions = 0
	}
	if want.Has(load.FieldCapacity) {
		want.KVCapacityTokens = tokens
	}
	if p.rng.IntN(4) > 0 { // the tokenizer has counted a request
		want.Fields |= load.FieldPrefix
		withHits := p.rng.IntN(4) > 0
		for k := range 1 + p.rng.IntN(3) {
			labels := [][2]string{{"model_name", "qwen"}, {"business_line", "b" + strconv.Itoa(k)}}
			q := float64(p.rng.Int64N(1 << 40))
			h := float64(p.rng.Int64N(int64(q) + 1))
			p.sample("sglang:prompt_tokens_total", labels, q)
			want.PrefixQueries += q
			if withHits {
				p.sample("sglang:cached_tokens_total", labels, h)
				want.PrefixHits += h
			}
		}
	}
	p.noise("sglang:")
	return want
}

// TestParseRendered is the property: a page rendered from random ranks
// parses back to their totals, whatever the order of its lines and labels,
// the spelling of its numbers, its comments, duplicates and noise, and
// however its bytes are split between writes.
func TestParseRendered(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, uint64(time.Now().UnixNano())))
	seed := rng.Uint64()
	t.Logf("seed %d", seed)
	rng = rand.New(rand.NewPCG(2, seed))
	var parser load.Parser
	for i := range 3000 {
		p := &page{rng: rng}
		ranks := randomRanks(rng, 1+rng.IntN(8))
		var want load.Report
		if rng.IntN(2) == 0 {
			want = renderVLLM(p, ranks, rng.IntN(4) == 0)
		} else {
			want = renderSGLang(p, ranks)
		}
		text := p.text()
		got, err := load.Parse(text)
		if err != nil || got != want {
			t.Fatalf("case %d (seed %d): got %+v, %v\nwant %+v\npage:\n%s", i, seed, got, err, want, text)
		}
		// The same page in random pieces through a reused Parser.
		parser.Reset()
		for rest := text; len(rest) > 0; {
			n := min(len(rest), 1+rng.IntN(200))
			if _, err := parser.Write(rest[:n]); err != nil {
				t.Fatalf("case %d (seed %d): write: %v", i, seed, err)
			}
			rest = rest[n:]
		}
		if got, err := parser.Report(); err != nil || got != want {
			t.Fatalf("case %d (seed %d), in pieces: got %+v, %v\nwant %+v", i, seed, got, err, want)
		}
	}
}

// TestParseSimPages reads pages the simulator's vLLM renderer writes, for
// random values and one to four DP engines (each engine's page with its
// engine label rewritten, as one API server in front of several engines
// shows them), with and without the _created series.
func TestParseSimPages(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 200 {
		n := 1 + rng.IntN(4)
		blocks := 1 + rng.Int64N(1<<20)
		want := load.Report{Engine: load.EngineVLLM, Ranks: n,
			Fields: load.FieldPrefix | load.FieldPreemptions | load.FieldCapacity}
		var text []byte
		for e := range n {
			opts := []vllmmetrics.Option{vllmmetrics.WithCreated(time.Unix(1700000000, 0))}
			if rng.IntN(2) == 0 {
				opts = []vllmmetrics.Option{vllmmetrics.WithoutCreated()}
			}
			m := vllmmetrics.New("m", 4096, []vllmmetrics.Label{
				{Name: "block_size", Value: "16"},
				{Name: "num_gpu_blocks", Value: strconv.FormatInt(blocks, 10)},
				{Name: "num_cpu_blocks", Value: "None"},
			}, opts...)
			r := randomRanks(rng, 1)[0]
			m.SetRunning(int(r.running))
			m.SetWaiting(int(r.waiting))
			m.SetKVUsage(r.kv)
			m.AddPrefixQueries(int64(r.queries))
			m.AddPrefixHits(int64(r.hits))
			m.AddPreemptions(int64(r.preempted))
			m.AddPromptTokens(int64(r.queries - r.hits))
			m.AddCachedPromptTokens(int64(r.hits))
			text = append(text, strings.ReplaceAll(string(m.AppendText(nil)), `engine="0"`, `engine="`+strconv.Itoa(e)+`"`)...)
			want.Running += r.running
			want.Waiting += r.waiting
			want.KVUsage += r.kv
			want.KVUsageMax = max(want.KVUsageMax, r.kv)
			want.PrefixQueries += r.queries
			want.PrefixHits += r.hits
			want.Preemptions += r.preempted
		}
		want.KVUsage /= float64(n)
		want.KVCapacityBlocks, want.BlockSize = int(blocks)*n, 16
		want.KVCapacityTokens = int64(want.KVCapacityBlocks) * 16
		got, err := load.Parse(text)
		if err != nil || got != want {
			t.Fatalf("case %d: got %+v, %v\nwant %+v", i, got, err, want)
		}
	}
}

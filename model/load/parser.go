package load

import (
	"bytes"
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
)

const (
	// MaxLineBytes is the longest line a Parser buffers across writes. A
	// longer line of a family the Report needs makes the page unreadable;
	// any other long line is skipped, wherever the writes split it. vLLM's
	// longest line, vllm:cache_config_info, is about 400 bytes.
	MaxLineBytes = 64 << 10
	// MaxSeries bounds the samples of the families read that one page may
	// hold (ranks times families, plus SGLang's custom tokenizer labels,
	// duplicates included). A page with more is unreadable.
	MaxSeries = 1 << 16
)

var _ io.Writer = (*Parser)(nil)

// retainSeries is how many series' worth of memory Reset keeps for the next
// page; a hostile page that needed more gives its memory back.
const retainSeries = 4096

// Parse reads a whole vLLM or SGLang metrics page. The error, if any, wraps
// ErrUnreadable; the Report is then zero. Parse keeps nothing of page.
func Parse(page []byte) (Report, error) {
	var buf [32]entry // enough for most pages: one allocation in all
	p := Parser{ents: buf[:0]}
	p.Write(page)
	return p.Report()
}

// Parser reads one metrics page written to it in pieces (it is an
// io.Writer), so that a page is parsed as it arrives and never held whole.
// The result does not depend on how the page is split. Write returns the
// page's error as soon as it is known, and Report gives the result once the
// page is complete. Reset readies the Parser for the next page and keeps its
// memory.
//
// A Parser is owned by one goroutine. The zero value is ready for use.
type Parser struct {
	ents     []entry // series of the families read
	carry    []byte  // the start of a line split across writes
	skipping bool    // dropping the rest of a line longer than MaxLineBytes
	lines    int     // lines begun, for error messages
	seen     [numEngines]bool
	found    [numEngines]bool
	info     bool // a vllm:cache_config_info sample was read
	err      error
}

// Reset forgets the page read so far.
func (p *Parser) Reset() {
	ents, carry := p.ents[:0], p.carry[:0]
	if cap(ents) > retainSeries {
		ents = nil
	}
	*p = Parser{ents: ents, carry: carry}
}

// Write parses the complete lines in b and keeps the start of a line that
// b splits. It returns an error wrapping ErrUnreadable as soon as the page
// is known to be unreadable, and the same error on every later call.
func (p *Parser) Write(b []byte) (int, error) {
	if p.err != nil {
		return 0, p.err
	}
	n := len(b)
	for p.err == nil && len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			p.buffer(b)
			break
		}
		switch {
		case p.skipping:
			p.skipping = false
		case len(p.carry) > 0:
			p.buffer(b[:i])
			if p.skipping {
				p.skipping = false
			} else {
				p.line(p.carry)
			}
			p.carry = p.carry[:0]
		default:
			p.line(b[:i])
		}
		b = b[i+1:]
	}
	return n, p.err
}

// Report returns the load the page showed, or an error wrapping
// ErrUnreadable. The Parser must have been given the whole page; a last line
// without a newline counts.
func (p *Parser) Report() (Report, error) {
	if p.err == nil && !p.skipping && len(p.carry) > 0 {
		p.line(p.carry)
		p.carry = p.carry[:0]
	}
	if p.err != nil {
		return Report{}, p.err
	}
	return p.fold()
}

// buffer keeps b, the start or middle of a line, until its end arrives. A
// line that outgrows MaxLineBytes is judged by its first MaxLineBytes bytes,
// as line judges it when it comes whole, and the rest is dropped.
func (p *Parser) buffer(b []byte) {
	if p.skipping {
		return
	}
	if len(p.carry)+len(b) <= MaxLineBytes {
		p.carry = append(p.carry, b...)
		return
	}
	p.carry = append(p.carry, b[:MaxLineBytes-len(p.carry)]...)
	p.lines++
	p.longLine(p.carry)
	p.carry = p.carry[:0]
	p.skipping = true
}

// line reads one line, without its '\n'.
func (p *Parser) line(l []byte) {
	p.lines++
	if len(l) > MaxLineBytes {
		p.longLine(l[:MaxLineBytes])
		return
	}
	if n := len(l); n > 0 && l[n-1] == '\r' {
		l = l[:n-1]
	}
	name, i := lineName(l)
	if name == nil {
		return
	}
	eng, fam := p.classify(name)
	if fam == famNone {
		return
	}
	p.found[eng] = true
	s, ok := parseSample(l, i)
	if !ok {
		p.fail("line %d: %s: malformed sample", p.lines, name)
		return
	}
	p.add(eng, fam, name, s)
}

// longLine judges a line longer than MaxLineBytes by its first bytes, head.
func (p *Parser) longLine(head []byte) {
	name, _ := lineName(head)
	if name == nil {
		return
	}
	if _, fam := p.classify(name); fam != famNone {
		p.fail("line %d: %s: longer than %d bytes", p.lines, name, MaxLineBytes)
	}
}

// classify notes the engine prefix of a metric name and returns the family
// it belongs to, famNone for the families not read.
func (p *Parser) classify(name []byte) (engine, family) {
	switch {
	case bytes.HasPrefix(name, []byte("vllm:")):
		p.seen[engVLLM] = true
	case bytes.HasPrefix(name, []byte("sglang:")):
		p.seen[engSGLang] = true
	default:
		return 0, famNone
	}
	switch string(name) {
	case "vllm:num_requests_running":
		return engVLLM, famRunning
	case "vllm:num_requests_waiting":
		return engVLLM, famWaiting
	case "vllm:kv_cache_usage_perc":
		return engVLLM, famKV
	case "vllm:gpu_cache_usage_perc":
		return engVLLM, famKVLegacy
	case "vllm:prefix_cache_queries_total", "vllm:prefix_cache_queries":
		return engVLLM, famQueries
	case "vllm:gpu_prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries":
		return engVLLM, famQueriesLegacy
	case "vllm:prefix_cache_hits_total", "vllm:prefix_cache_hits":
		return engVLLM, famHits
	case "vllm:gpu_prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits":
		return engVLLM, famHitsLegacy
	case "vllm:num_preemptions_total", "vllm:num_preemptions":
		return engVLLM, famPreemptions
	case "vllm:cache_config_info":
		return engVLLM, famCacheInfo
	case "sglang:num_running_reqs":
		return engSGLang, famRunning
	case "sglang:num_queue_reqs":
		return engSGLang, famWaiting
	case "sglang:token_usage":
		return engSGLang, famKV
	case "sglang:prompt_tokens_total", "sglang:prompt_tokens":
		return engSGLang, famQueries
	case "sglang:cached_tokens_total", "sglang:cached_tokens":
		return engSGLang, famHits
	case "sglang:num_retracted_requests_total", "sglang:num_retracted_requests":
		return engSGLang, famPreemptions
	case "sglang:max_total_num_tokens":
		return engSGLang, famCapTokens
	}
	return 0, famNone
}

// add records one sample of a family read.
func (p *Parser) add(eng engine, fam family, name []byte, s sample) {
	var series uint64
	var rank, blocks, blockSize []byte
	it := labelIter{b: s.labels}
	for {
		ln, lv, ok := it.next()
		if !ok {
			break
		}
		series += hashLabel(ln, lv)
		switch string(ln) {
		case "priority":
			if len(lv) > 0 {
				return // SGLang's per-priority breakdown of the base series
			}
		case "engine":
			if eng == engVLLM {
				rank = lv
			}
		case "dp_rank":
			if eng == engSGLang {
				rank = lv
			}
		case "num_gpu_blocks":
			blocks = lv
		case "block_size":
			blockSize = lv
		}
	}
	v, err := strconv.ParseFloat(string(s.value), 64)
	if err != nil {
		p.fail("line %d: %s: bad value %.32q", p.lines, name, s.value)
		return
	}
	if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		p.fail("line %d: %s: value %v is not a count", p.lines, name, v)
		return
	}
	if s.ts != nil {
		if _, err := strconv.ParseFloat(string(s.ts), 64); err != nil {
			p.fail("line %d: %s: bad timestamp %.32q", p.lines, name, s.ts)
			return
		}
	}
	r := hashBytes(fnvOffset, rank)
	if eng == engSGLang && (fam == famQueries || fam == famHits) {
		// The tokenizer's counters have no rank; each series (custom
		// tokenizer labels) is its own.
		r = series
	}
	switch fam {
	case famCacheInfo:
		p.info = true
		// num_gpu_blocks is "None" until the KV cache is sized.
		if n, ok := parseCount(blocks, 1<<40); ok {
			p.push(famCapBlocks, r, series, float64(n))
		}
		if n, ok := parseCount(blockSize, 1<<24); ok && n > 0 {
			p.push(famBlockSize, r, series, float64(n))
		}
	case famKV, famKVLegacy:
		p.push(fam, r, series, min(v, 1))
	default:
		p.push(fam, r, series, v)
	}
}

func (p *Parser) push(fam family, rank, series uint64, v float64) {
	if len(p.ents) >= MaxSeries {
		p.fail("line %d: more than %d series", p.lines, MaxSeries)
		return
	}
	p.ents = append(p.ents, entry{rank: rank, series: series, v: v, seq: uint32(len(p.ents)), fam: fam})
}

func (p *Parser) fail(format string, args ...any) {
	p.err = fmt.Errorf("%w: "+format, append([]any{ErrUnreadable}, args...)...)
}

// fold turns the series read into a Report.
func (p *Parser) fold() (Report, error) {
	var eng engine
	switch {
	case p.found[engVLLM] && p.found[engSGLang]:
		return Report{}, fmt.Errorf("%w: both vllm: and sglang: metrics", ErrUnreadable)
	case p.found[engVLLM]:
		eng = engVLLM
	case p.found[engSGLang]:
		eng = engSGLang
	case p.seen[engVLLM] && p.seen[engSGLang]:
		return Report{}, fmt.Errorf("%w: both vllm: and sglang: metrics", ErrUnreadable)
	case p.seen[engVLLM]:
		eng = engVLLM
	case p.seen[engSGLang]:
		eng = engSGLang
	default:
		return Report{}, fmt.Errorf("%w: no vllm: or sglang: metrics", ErrUnreadable)
	}

	// Sorted, the series of one family and rank are adjacent, and so are
	// exact duplicates, the first one written leading.
	slices.SortFunc(p.ents, func(a, b entry) int {
		return cmp.Or(cmp.Compare(a.fam, b.fam), cmp.Compare(a.rank, b.rank),
			cmp.Compare(a.series, b.series), cmp.Compare(a.seq, b.seq))
	})
	var agg [numFamilies]struct {
		ranks    int
		sum, max float64
	}
	for i := 0; i < len(p.ents); {
		e := p.ents[i]
		v, last := e.v, e.series
		j := i + 1
		for ; j < len(p.ents) && p.ents[j].fam == e.fam && p.ents[j].rank == e.rank; j++ {
			if p.ents[j].series != last {
				last = p.ents[j].series
				v = max(v, p.ents[j].v)
			}
		}
		a := &agg[e.fam]
		a.ranks++
		a.sum += v
		a.max = max(a.max, v)
		i = j
	}

	pick := func(f, legacy family) family {
		if agg[f].ranks > 0 {
			return f
		}
		return legacy
	}
	kv, queries, hits := pick(famKV, famKVLegacy), pick(famQueries, famQueriesLegacy), pick(famHits, famHitsLegacy)
	var required []string
	for _, f := range []family{famRunning, famWaiting, kv} {
		if agg[f].ranks == 0 {
			required = append(required, eng.name(f))
		}
	}
	if len(required) > 0 {
		return Report{}, &MissingError{Engine: eng.String(), Families: required}
	}

	r := Report{
		Engine:     eng.String(),
		Ranks:      agg[famRunning].ranks,
		Running:    agg[famRunning].sum,
		Waiting:    agg[famWaiting].sum,
		KVUsage:    agg[kv].sum / float64(agg[kv].ranks),
		KVUsageMax: agg[kv].max,
	}
	// Missing names the optional families the engine creates beside the
	// required ones, so that their absence says something: an engine
	// without prefix caching, a renamed metric, an exporter that leaves
	// them out. SGLang's counters are created on first use and its
	// retractions counter on the first retraction, so their absence says
	// nothing and is not reported.
	switch eng {
	case engVLLM:
		if agg[queries].ranks == 0 {
			r.Missing |= FamPrefixQueries
		}
		if agg[hits].ranks == 0 {
			r.Missing |= FamPrefixHits
		}
		if agg[famPreemptions].ranks == 0 {
			r.Missing |= FamPreemptions
		}
		if !p.info {
			r.Missing |= FamCapacity
		}
		if agg[queries].ranks > 0 && agg[hits].ranks > 0 {
			r.Fields |= FieldPrefix
			r.PrefixQueries, r.PrefixHits = agg[queries].sum, agg[hits].sum
		}
	case engSGLang:
		if agg[famCapTokens].ranks == 0 {
			r.Missing |= FamCapacity
		}
		// cached_tokens_total appears with the first cache hit: until
		// then the hits are zero.
		if agg[queries].ranks > 0 {
			r.Fields |= FieldPrefix
			r.PrefixQueries, r.PrefixHits = agg[queries].sum, agg[hits].sum
		}
	}
	if agg[famPreemptions].ranks > 0 {
		r.Fields |= FieldPreemptions
		r.Preemptions = agg[famPreemptions].sum
	}
	// Capacity counts only when every rank told it: a partial sum would
	// make the index too small.
	switch eng {
	case engVLLM:
		blocks, size := agg[famCapBlocks], agg[famBlockSize]
		if blocks.ranks == r.Ranks && size.ranks > 0 && blocks.sum*size.max <= 1<<53 {
			r.Fields |= FieldCapacity
			r.KVCapacityBlocks, r.BlockSize = int(blocks.sum), int(size.max)
			r.KVCapacityTokens = int64(blocks.sum * size.max)
		}
	case engSGLang:
		tokens := agg[famCapTokens]
		if tokens.ranks == r.Ranks && tokens.sum <= 1<<53 {
			r.Fields |= FieldCapacity
			r.KVCapacityTokens = int64(tokens.sum)
		}
	}
	return r, nil
}

// engine indexes the engines a page may come from.
type engine uint8

const (
	engVLLM engine = iota
	engSGLang
	numEngines
)

func (e engine) String() string {
	if e == engSGLang {
		return EngineSGLang
	}
	return EngineVLLM
}

// names are the families' names as errors and Report.MissingNames spell
// them: the current name, a counter without its _total suffix as vLLM
// registers it, SGLang's with it as SGLang does.
var names = [numEngines][numFamilies]string{
	engVLLM: {
		famRunning:     "vllm:num_requests_running",
		famWaiting:     "vllm:num_requests_waiting",
		famKV:          "vllm:kv_cache_usage_perc",
		famQueries:     "vllm:prefix_cache_queries",
		famHits:        "vllm:prefix_cache_hits",
		famPreemptions: "vllm:num_preemptions",
		famCacheInfo:   "vllm:cache_config_info",
	},
	engSGLang: {
		famRunning:     "sglang:num_running_reqs",
		famWaiting:     "sglang:num_queue_reqs",
		famKV:          "sglang:token_usage",
		famQueries:     "sglang:prompt_tokens_total",
		famHits:        "sglang:cached_tokens_total",
		famPreemptions: "sglang:num_retracted_requests_total",
		famCapTokens:   "sglang:max_total_num_tokens",
	},
}

// name is the name of family f of engine e; a legacy family is named by
// its current name.
func (e engine) name(f family) string {
	switch f {
	case famKVLegacy:
		f = famKV
	case famQueriesLegacy:
		f = famQueries
	case famHitsLegacy:
		f = famHits
	}
	return names[e][f]
}

// optional maps each Families bit to the family it stands for, by engine.
func (e engine) optional(f Families) family {
	switch f {
	case FamPrefixQueries:
		return famQueries
	case FamPrefixHits:
		return famHits
	case FamPreemptions:
		return famPreemptions
	case FamCapacity:
		if e == engSGLang {
			return famCapTokens
		}
		return famCacheInfo
	}
	return famNone
}

// MissingNames returns the names of the families in r.Missing, in the
// spelling of r's engine, or nil when none is missing.
func (r Report) MissingNames() []string {
	eng := engVLLM
	if r.Engine == EngineSGLang {
		eng = engSGLang
	}
	var out []string
	for f := Families(1); f != 0 && f <= FamCapacity; f <<= 1 {
		if r.Missing&f != 0 {
			if n := eng.name(eng.optional(f)); n != "" {
				out = append(out, n)
			}
		}
	}
	return out
}

// family is a metric family the Report reads.
type family uint8

const (
	famNone family = iota
	famRunning
	famWaiting
	famKV
	famKVLegacy
	famQueries
	famQueriesLegacy
	famHits
	famHitsLegacy
	famPreemptions
	famCacheInfo // vllm:cache_config_info, read into the next two
	famCapBlocks
	famBlockSize
	famCapTokens // sglang:max_total_num_tokens
	numFamilies
)

// entry is one series of a family read.
type entry struct {
	rank   uint64  // the rank's identity: hash of its engine or dp_rank label
	series uint64  // the series' identity: hash of its whole label set
	v      float64 // its value
	seq    uint32  // its order on the page, so that the first duplicate wins
	fam    family
}

package tokenize

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/inferrail/inferrail/config"
	"github.com/inferrail/inferrail/model/openai"
	"github.com/inferrail/inferrail/model/prompt"
	"github.com/inferrail/inferrail/model/token/hf"
)

// InlineBytes is the largest body Prepare tokenizes on the caller's
// goroutine. A body this small takes a few microseconds, less than a hand
// over to a worker and back.
const InlineBytes = 1 << 10

// queuePerWorker sizes the queue: at tens of microseconds to a few
// milliseconds per large body, a request further back would wait past
// max_wait anyway.
const queuePerWorker = 8

// Result is how Prepare answered, the result label of
// inferrail_tokenized_requests_total.
type Result uint8

const (
	OK            Result = iota // predicted
	NoTokenizer                 // the model has no tokenizer, or it failed to load: "unavailable"
	Unsupported                 // images or audio, the request's own chat_template, a batch, prompt_embeds
	QueueFull                   // every worker busy and the queue full: "busy"
	Timeout                     // no worker finished within tokenizer.max_wait (or the context ended): "slow"
	Error                       // the body could not be read as the engine reads it: "invalid"
	TemplateError               // the chat template failed to render it: "template"
	numResults
)

var resultNames = [numResults]string{"ok", "unavailable", "unsupported", "busy", "slow", "invalid", "template"}

func (r Result) String() string {
	if r < numResults {
		return resultNames[r]
	}
	return fmt.Sprintf("Result(%d)", r)
}

// secondsBuckets bound inferrail_tokenize_seconds: 10 µs to a second.
var secondsBuckets = []float64{1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2, 5e-2, 0.1, 0.25, 1}

// Pool prepares request bodies for the models' tokenizers: small bodies on
// the caller's goroutine, larger ones on a fixed set of worker goroutines
// behind a bounded queue, so that tokenizing a long prompt never holds a
// request past tokenizer.max_wait and a burst of them cannot take every
// core. A Pool is safe for concurrent use.
type Pool struct {
	models map[string]*Model // immutable after New
	// bare holds, for every configured model without a loaded tokenizer,
	// a Preparer with its name and block size only: completions whose
	// prompt is token ids are hashed there. Immutable after New.
	bare     map[string]*Model
	statuses []Status // immutable after New
	maxWait  time.Duration

	queue   chan *job
	stop    chan struct{}
	closed  atomic.Bool
	workers sync.WaitGroup

	byModel map[string]*modelMetrics // immutable after New
}

// modelMetrics are one model's series: inferrail_tokenized_requests_total
// by result and inferrail_tokenize_seconds.
type modelMetrics struct {
	results [numResults]*metrics.Counter
	seconds *metrics.PrometheusHistogram
}

// job is one body handed to the workers. Once it is queued, state decides
// who may write p and err: the worker that moves it from pending to
// running, until it closes done. A caller that gives up first moves it to
// abandoned, and no worker starts it.
type job struct {
	m     *Model
	kind  Kind
	body  []byte // a copy: the caller's may be reused once Prepare returns
	now   time.Time
	state atomic.Int32
	done  chan struct{}
	p     prompt.Prompt
	err   error
}

const (
	pending int32 = iota
	running
	abandoned
)

// New loads every configured model's tokenizer (LoadAll; failures are kept
// in Status, and those models' requests answer NoTokenizer) and starts
// tokenizer.workers workers (default GOMAXPROCS). Its metrics are created
// in set. Close stops the workers.
func New(cfg *config.Config, hubCache string, set *metrics.Set) *Pool {
	models, statuses := LoadAll(cfg, hubCache)
	return NewPool(models, statuses, cfg.Tokenizer, set)
}

// NewPool is New for models already loaded by LoadAll, whose statuses
// Status reports.
func NewPool(models map[string]*Model, statuses []Status, tc config.Tokenizer, set *metrics.Set) *Pool {
	n := tc.Workers
	if n <= 0 {
		n = runtime.GOMAXPROCS(0)
	}
	return newPool(models, statuses, tc.MaxWait, set, n, queuePerWorker*n)
}

func newPool(models map[string]*Model, statuses []Status, maxWait time.Duration, set *metrics.Set, workers, queue int) *Pool {
	if maxWait <= 0 {
		maxWait = 50 * time.Millisecond
	}
	p := &Pool{
		models:   models,
		statuses: statuses,
		maxWait:  maxWait,
		queue:    make(chan *job, queue),
		stop:     make(chan struct{}),
		byModel:  make(map[string]*modelMetrics),
		bare:     make(map[string]*Model),
	}
	var names []string
	for _, st := range statuses {
		names = append(names, st.Model)
		if models[st.Model] == nil {
			bs := st.BlockSize
			if bs <= 0 {
				bs = 16
			}
			p.bare[st.Model] = &Model{Name: st.Model, BlockSize: bs, prep: &prompt.Preparer{Model: st.Model, BlockSize: bs}}
		}
	}
	for name := range models {
		names = append(names, name)
	}
	for _, name := range names {
		if p.byModel[name] != nil {
			continue
		}
		l := `model=` + strconv.Quote(name)
		mm := &modelMetrics{seconds: set.NewPrometheusHistogramExt(`inferrail_tokenize_seconds{`+l+`}`, secondsBuckets)}
		for r := range numResults {
			mm.results[r] = set.NewCounter(`inferrail_tokenized_requests_total{` + l + `,result="` + resultNames[r] + `"}`)
		}
		p.byModel[name] = mm
	}
	p.workers.Add(workers)
	for range workers {
		go p.work()
	}
	return p
}

// Status reports, per configured model in config order, whether its
// tokenizer loaded.
func (p *Pool) Status() []Status { return p.statuses }

// Model returns the loaded tokenizer of a configured model name, nil if it
// has none.
func (p *Pool) Model(name string) *Model { return p.models[name] }

// BlockSize is the block size a configured model's prompts are hashed
// with, tokenizer or not; 0 for a name that is not configured.
func (p *Pool) BlockSize(name string) int {
	if m := p.models[name]; m != nil {
		return m.BlockSize
	}
	if m := p.bare[name]; m != nil {
		return m.BlockSize
	}
	return 0
}

// Close stops the workers and waits for them; a body one of them is
// tokenizing is finished first. Afterwards Prepare still prepares small
// bodies inline and answers QueueFull for the others.
func (p *Pool) Close() {
	if p.closed.Swap(true) {
		return
	}
	close(p.stop)
	p.workers.Wait()
}

func (p *Pool) work() {
	defer p.workers.Done()
	for {
		select {
		case <-p.stop:
			return
		case j := <-p.queue:
			if j.state.CompareAndSwap(pending, running) {
				j.p, j.err = run(j.m, j.kind, j.body, j.now)
				close(j.done)
			}
		}
	}
}

// Prepare tokenizes a request body for a configured model name (aliases
// already resolved) and hashes its blocks. A body of at most InlineBytes is
// prepared on the caller's goroutine; a larger one waits for a worker for
// at most tokenizer.max_wait, or until ctx ends if that is sooner, then
// answers Timeout, and answers QueueFull at once when the queue is full.
// Only OK comes with a prompt. A model without a tokenizer is prepared too
// when the body is a completion whose prompt is token ids, which need none;
// any other body of it answers NoTokenizer. Prepare keeps no reference to
// body once it returns.
func (p *Pool) Prepare(ctx context.Context, model string, kind Kind, body []byte) (prompt.Prompt, Result) {
	start := time.Now()
	mm := p.byModel[model]
	if mm == nil {
		return prompt.Prompt{}, NoTokenizer // not a configured model: nothing to count it under
	}
	m := p.models[model]
	if m == nil {
		if m = p.bare[model]; m == nil || kind != Completion || textPrompt(body) {
			return mm.count(start, prompt.Prompt{}, NoTokenizer)
		}
	}
	if len(body) <= InlineBytes {
		pr, err := run(m, kind, body, start)
		return mm.count(start, pr, classify(err))
	}
	if p.closed.Load() {
		return mm.count(start, prompt.Prompt{}, QueueFull)
	}
	if ctx.Err() != nil {
		return mm.count(start, prompt.Prompt{}, Timeout)
	}
	j := &job{m: m, kind: kind, body: append([]byte(nil), body...), now: start, done: make(chan struct{})}
	select {
	case p.queue <- j:
	default:
		return mm.count(start, prompt.Prompt{}, QueueFull)
	}
	t := time.NewTimer(p.maxWait)
	defer t.Stop()
	select {
	case <-j.done:
		return mm.count(start, j.p, classify(j.err))
	case <-t.C:
	case <-ctx.Done():
	}
	if !j.state.CompareAndSwap(pending, abandoned) {
		// A worker has it and may have just finished; if not, it finishes
		// for nobody.
		select {
		case <-j.done:
			return mm.count(start, j.p, classify(j.err))
		default:
		}
	}
	return mm.count(start, prompt.Prompt{}, Timeout)
}

func (mm *modelMetrics) count(start time.Time, pr prompt.Prompt, r Result) (prompt.Prompt, Result) {
	mm.results[r].Inc()
	if r == OK {
		mm.seconds.Update(time.Since(start).Seconds())
	}
	return pr, r
}

// run prepares one body. A panic in the tokenizer or the template (a bug:
// model/ does not panic on input) fails this request only.
func run(m *Model, kind Kind, body []byte, now time.Time) (pr prompt.Prompt, err error) {
	defer func() {
		if v := recover(); v != nil {
			pr, err = prompt.Prompt{}, fmt.Errorf("BUG: tokenize: model %s: panic: %v", m.Name, v)
		}
	}()
	return m.Prepare(kind, body, now)
}

// textPrompt reports whether body is a completion whose prompt is a
// string, which a model without a tokenizer cannot prepare: a scan for the
// member rather than the whole parse, which under least_request took as
// much of the gateway's CPU as the decision did (issue 16). Anything else,
// a malformed body too, is left to the parse. The prompt's text is not
// decoded.
func textPrompt(body []byte) bool {
	var f [1]openai.ModelField
	err := openai.FindMembers(body, promptMember, f[:])
	return err == nil && f[0].Found && f[0].Start < len(body) && body[f[0].Start] == '"'
}

var promptMember = []openai.Member{{Key: "prompt"}}

func classify(err error) Result {
	switch {
	case err == nil:
		return OK
	case errors.Is(err, prompt.ErrUnsupported):
		return Unsupported
	case errors.Is(err, prompt.ErrNoTokenizer):
		return NoTokenizer
	}
	if errors.Is(err, prompt.ErrTemplate) || errors.Is(err, prompt.ErrNoTemplate) {
		return TemplateError
	}
	return Error
}

// WriteCacheMetrics writes, for every model with a piece cache, what the
// cache holds and how its lookups went since the gateway started:
// inferrail_tokenizer_cache_lookups_total{model,result="hit"|"miss"},
// inferrail_tokenizer_cache_tokens{model} and
// inferrail_tokenizer_cache_pieces{model}. A warm cache turns a long
// system prompt into ids without running BPE on it; a hit rate that stays
// low says tokenizer.cache_tokens is too small for the prompts in use.
func (p *Pool) WriteCacheMetrics(w io.Writer) {
	type row struct {
		model string
		st    hf.CacheStats
	}
	var rows []row
	for name, m := range p.models {
		if m.prep != nil && m.prep.Cache != nil {
			rows = append(rows, row{name, m.prep.Cache.Stats()})
		}
	}
	if len(rows) == 0 {
		return
	}
	slices.SortFunc(rows, func(a, b row) int { return strings.Compare(a.model, b.model) })
	var b strings.Builder
	metrics.WriteMetadataIfNeeded(&b, "inferrail_tokenizer_cache_lookups_total", "counter")
	for _, r := range rows {
		m := strconv.Quote(r.model)
		fmt.Fprintf(&b, "inferrail_tokenizer_cache_lookups_total{model=%s,result=\"hit\"} %d\n", m, r.st.Hits)
		fmt.Fprintf(&b, "inferrail_tokenizer_cache_lookups_total{model=%s,result=\"miss\"} %d\n", m, r.st.Misses)
	}
	gauge := func(name string, v func(hf.CacheStats) int) {
		metrics.WriteMetadataIfNeeded(&b, name, "gauge")
		for _, r := range rows {
			fmt.Fprintf(&b, "%s{model=%s} %d\n", name, strconv.Quote(r.model), v(r.st))
		}
	}
	gauge("inferrail_tokenizer_cache_tokens", func(s hf.CacheStats) int { return s.Tokens })
	gauge("inferrail_tokenizer_cache_pieces", func(s hf.CacheStats) int { return s.Pieces })
	io.WriteString(w, b.String())
}

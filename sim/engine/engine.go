package engine

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/inferrail/inferrail/model/prefix"
)

// Errors Add returns, wrapped with the request's details.
var (
	ErrEmptyPrompt = errors.New("empty prompt")
	ErrTooLong     = errors.New("request longer than max_model_len")
	ErrDuplicateID = errors.New("request id already in the engine")
)

// Engine is one simulated vLLM engine: the V1 scheduler
// (vllm/v1/core/sched/scheduler.py, FCFS policy, chunked prefill on) over one
// KV block pool, advanced one step at a time on a virtual clock.
//
// An Engine is not safe for concurrent use. It is owned by one driver
// goroutine, which alone calls its methods and reads the engine-owned fields
// of the Requests it added.
type Engine struct {
	cfg    Config
	pool   *pool
	hasher prefix.Hasher

	live    map[string]*seq // waiting and running requests by id
	waiting deque
	running []*seq   // in admission order
	pending []Output // aborts not yet reported by Step

	admissions       int // first admissions so far
	prefixQueries    int64
	prefixHits       int64
	preemptions      int64
	promptTokens     int64
	generationTokens int64
	finished         map[string]int64

	// Per-step scratch.
	soon   map[prefix.Hash]struct{} // Outlook's blocks a queued request computes
	plan   []chunk
	hit    []int32
	tokbuf []uint32
}

// chunk is one request's share of a step: token positions [start, start+n).
type chunk struct {
	s        *seq
	start, n int
}

// New returns an idle engine, or an error naming every setting vLLM would
// refuse to start with.
func New(cfg Config) (*Engine, error) {
	if err := validate(cfg); err != nil {
		return nil, fmt.Errorf("engine: invalid config: %w", err)
	}
	return &Engine{
		cfg:      cfg,
		pool:     newPool(cfg.NumBlocks, cfg.PrefixCaching),
		live:     make(map[string]*seq),
		finished: make(map[string]int64),
	}, nil
}

func validate(cfg Config) error {
	var errs []error
	positive := func(key string, v int) {
		if v <= 0 {
			errs = append(errs, fmt.Errorf("%s must be positive, got %d", key, v))
		}
	}
	positive("--block-size", cfg.BlockSize)
	positive("--num-gpu-blocks-override", cfg.NumBlocks)
	positive("--max-num-seqs", cfg.MaxNumSeqs)
	positive("--max-num-batched-tokens", cfg.MaxBatchedTokens)
	positive("--max-model-len", cfg.MaxModelLen)
	if cfg.MaxNumSeqs > 0 && cfg.MaxBatchedTokens > 0 && cfg.MaxBatchedTokens < cfg.MaxNumSeqs {
		// vllm/config/scheduler.py refuses a budget that cannot give every
		// running sequence one token.
		errs = append(errs, fmt.Errorf("--max-num-batched-tokens (%d) must be greater than or equal to --max-num-seqs (%d)",
			cfg.MaxBatchedTokens, cfg.MaxNumSeqs))
	}
	if cfg.BlockSize > 0 && cfg.NumBlocks > 0 && cfg.MaxModelLen > 0 &&
		int64(cfg.NumBlocks)*int64(cfg.BlockSize) < int64(cfg.MaxModelLen) {
		// vLLM refuses to start when the KV cache cannot hold one request of
		// max_model_len (kv_cache_utils.check_enough_kv_cache_memory). It also
		// guarantees that a lone running request always fits, so the
		// scheduler always makes progress.
		errs = append(errs, fmt.Errorf("kv cache too small for one request of --max-model-len: "+
			"--num-gpu-blocks-override %d × --block-size %d = %d tokens < --max-model-len %d",
			cfg.NumBlocks, cfg.BlockSize, int64(cfg.NumBlocks)*int64(cfg.BlockSize), cfg.MaxModelLen))
	}
	l := cfg.Latency
	for _, d := range []struct {
		key string
		v   time.Duration
	}{
		{"--prefill-token-us", l.PrefillToken},
		{"--prefill-fixed-ms", l.PrefillFixed},
		{"--decode-token-ms", l.DecodeToken},
		{"--decode-seq-us", l.DecodeSeq},
	} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("%s must not be negative, got %v", d.key, d.v))
		}
	}
	if l.PrefillPair < 0 || math.IsNaN(l.PrefillPair) || math.IsInf(l.PrefillPair, 0) {
		errs = append(errs, fmt.Errorf("--prefill-pair-ns must be a finite non-negative number, got %v", l.PrefillPair))
	}
	return errors.Join(errs...)
}

// Config returns the configuration the engine was built with.
func (e *Engine) Config() Config { return e.cfg }

// Add queues r at the back of the waiting queue. It resets r's engine-owned
// fields. A request with an empty Output finishes, without a token, in the
// step that completes its prefill; its FirstToken stays 0. An empty Reason
// finishes as "length". The HTTP layer validates prompt length too; Add refuses what vLLM's
// input processor would: an empty prompt, prompt plus output beyond
// max_model_len, and an id already in the engine.
func (e *Engine) Add(r *Request) error {
	switch {
	case r == nil:
		return errors.New("engine: add: nil request")
	case len(r.Prompt) == 0:
		return fmt.Errorf("engine: add %s: %w", r.ID, ErrEmptyPrompt)
	case len(r.Prompt)+len(r.Output) > e.cfg.MaxModelLen:
		return fmt.Errorf("engine: add %s: %d prompt + %d output tokens > max_model_len %d: %w",
			r.ID, len(r.Prompt), len(r.Output), e.cfg.MaxModelLen, ErrTooLong)
	}
	if _, ok := e.live[r.ID]; ok {
		return fmt.Errorf("engine: add %s: %w", r.ID, ErrDuplicateID)
	}
	r.Generated, r.CachedTokens, r.Preemptions = 0, 0, 0
	r.Scheduled, r.FirstToken, r.Finished = 0, 0, 0
	s := &seq{r: r, status: waiting}
	e.live[r.ID] = s
	e.waiting.pushBack(s)
	return nil
}

// Abort removes the waiting or running request id, freeing its blocks (they
// stay cached), and reports whether there was one. The next Step reports it
// as an Output with Done and Reason "abort" and sets its Finished to that
// step's start; FinishedByReason["abort"] counts it at once.
func (e *Engine) Abort(id string) bool {
	s, ok := e.live[id]
	if !ok {
		return false
	}
	delete(e.live, id)
	switch s.status {
	case waiting:
		e.waiting.remove(s)
	case running:
		if i := slices.Index(e.running, s); i >= 0 {
			e.running = slices.Delete(e.running, i, i+1)
		}
		e.pool.free(s.blocks)
		s.blocks = nil
	}
	s.status, s.aborted = done, true
	e.finished["abort"]++
	e.pending = append(e.pending, Output{Req: s.r, Done: true, Reason: "abort"})
	return true
}

// Idle reports whether Step has nothing to do: no request waits or runs, and
// no abort or KV event waits to be reported.
func (e *Engine) Idle() bool {
	return len(e.running) == 0 && e.waiting.len() == 0 && len(e.pending) == 0 && len(e.pool.events) == 0
}

// ResetPrefixCache drops every cached block hash, as vLLM's
// /reset_prefix_cache does, unless a block is in use, in which case it does
// nothing and returns false (BlockPool.reset_prefix_cache). The
// AllBlocksCleared event comes out in the next StepResult.Events; Idle is
// false until then.
func (e *Engine) ResetPrefixCache() bool { return e.pool.reset() }

// Stats returns the engine's gauges and counters. The map is a copy.
//
// PromptTokens follows vllm:prompt_tokens (IterationStats): a request's whole
// prompt, cached tokens included, is counted once, in the step that completes
// its prefill; a request aborted before that is not counted. PrefixQueries and
// PrefixHits stay 0 with prefix caching off, as in vLLM, which skips the
// lookup. KVUsage is UsedBlocks/NumBlocks (vLLM divides by num_gpu_blocks−1
// because it reserves a null block; the simulator has none).
func (e *Engine) Stats() Stats {
	fin := make(map[string]int64, len(e.finished))
	for k, v := range e.finished {
		fin[k] = v
	}
	return Stats{
		Running:          len(e.running),
		Waiting:          e.waiting.len(),
		KVUsage:          float64(e.pool.numUsed()) / float64(e.pool.numBlocks()),
		PrefixQueries:    e.prefixQueries,
		PrefixHits:       e.prefixHits,
		Preemptions:      e.preemptions,
		PromptTokens:     e.promptTokens,
		GenerationTokens: e.generationTokens,
		FinishedByReason: fin,
		CachedBlocks:     e.pool.ncached,
		UsedBlocks:       e.pool.numUsed(),
	}
}

// Load returns what a metrics scrape reads of the engine's load: Stats'
// Running, Waiting and KVUsage, without copying its counters, for a caller
// that reads the load every step.
func (e *Engine) Load() (running, waiting int, kvUsage float64) {
	return len(e.running), e.waiting.len(), float64(e.pool.numUsed()) / float64(e.pool.numBlocks())
}

// Step plans and runs one scheduler step starting at virtual time now.
//
// Planning follows Scheduler.schedule: running requests first, in admission
// order, then waiting ones while budget and sequence slots last. The step
// takes Duration under the latency model; every token it produces, and every
// request it finishes, is stamped now+Duration. Outputs lists aborts since the
// last step first, then the scheduled requests that produced a token or
// finished, in scheduling order. Events lists the KV events of the step and of
// any ResetPrefixCache since the last one, in the order they happened. The
// returned slices belong to the caller.
func (e *Engine) Step(now time.Duration) StepResult {
	res := StepResult{Start: now}
	e.schedule(now, &res)

	var outs []Output
	if n := len(e.pending) + len(e.plan); n > 0 {
		outs = make([]Output, 0, n)
	}
	for _, o := range e.pending {
		o.Req.Finished = now
		outs = append(outs, o)
	}
	clear(e.pending)
	e.pending = e.pending[:0]

	res.Duration = e.cost()
	res.Outputs = e.advance(now+res.Duration, outs)
	if len(res.Outputs) == 0 {
		res.Outputs = nil
	}
	res.Events = e.pool.takeEvents()
	return res
}

// schedule fills e.plan and allocates the planned tokens' blocks.
func (e *Engine) schedule(now time.Duration, res *StepResult) {
	clear(e.plan)
	e.plan = e.plan[:0]
	budget := e.cfg.MaxBatchedTokens

	// Running requests, in order. Each gets every token it has not computed,
	// up to the remaining budget: no prefill/decode phases.
	for i := 0; i < len(e.running) && budget > 0; {
		s := e.running[i]
		n := min(s.numTokens()-s.computed, budget, e.cfg.MaxModelLen-1-s.computed)
		if n <= 0 {
			i++
			continue
		}
		// When the blocks do not fit, preempt the most recently admitted
		// request, until they do or s itself is preempted. Victims come from
		// the end of the list, past i, so none was planned yet.
		for !e.allocate(s, s.computed, n, nil) {
			last := len(e.running) - 1
			victim := e.running[last]
			e.running[last] = nil
			e.running = e.running[:last]
			e.preempt(victim)
			res.Preempted++
			if victim == s {
				break
			}
		}
		if s.status != running {
			break
		}
		e.plan = append(e.plan, chunk{s: s, start: s.computed, n: n})
		res.ScheduledTokens += n
		budget -= n
		i++
	}
	if res.Preempted > 0 {
		// vLLM admits nothing in a step that preempted: the blocks just
		// freed are for the running requests.
		return
	}

	// Waiting requests, first come first served. A request whose blocks do
	// not fit blocks the queue behind it.
	bs := e.cfg.BlockSize
	for e.waiting.len() > 0 && budget > 0 && len(e.running) < e.cfg.MaxNumSeqs {
		s := e.waiting.at(0)
		hit := e.lookup(s)
		cached := len(hit) * bs
		n := min(s.numTokens()-cached, budget)
		if !e.allocate(s, cached, n, hit) {
			break
		}
		e.waiting.popFront()
		e.running = append(e.running, s)
		s.status, s.computed, s.start = running, cached, cached
		if !s.admitted {
			// Prefix cache stats count new requests only; a resumed one
			// re-reads the cache silently (PrefixCacheStats.record with
			// preempted=True). vLLM records the query each time the request
			// is tried at the head of the queue, even if it then does not
			// fit; we count it once, when it is admitted.
			s.admitted = true
			s.order = e.admissions
			e.admissions++
			s.r.Scheduled = now
			s.r.CachedTokens = cached
			if e.cfg.PrefixCaching {
				e.prefixQueries += int64(len(s.r.Prompt))
				e.prefixHits += int64(cached)
			}
		}
		e.plan = append(e.plan, chunk{s: s, start: cached, n: n})
		res.ScheduledTokens += n
		budget -= n
	}
}

// lookup returns the blocks of s's longest cached prefix within
// num_tokens−1 tokens (KVCacheManager.get_computed_blocks): a fully cached
// prompt still computes its last token, and with block-aligned hits a whole
// last block when the length is a multiple of the block size.
func (e *Engine) lookup(s *seq) []int32 {
	e.hit = e.hit[:0]
	if !e.cfg.PrefixCaching {
		return e.hit
	}
	nb := (s.numTokens() - 1) / e.cfg.BlockSize
	e.hashTo(s, nb)
	for _, h := range s.hashes[:nb] {
		id, ok := e.pool.lookup(h)
		if !ok {
			break
		}
		e.hit = append(e.hit, id)
	}
	return e.hit
}

// allocate is KVCacheManager.allocate_slots: it gives s the blocks for
// computed+n tokens, after taking the cache-hit blocks hit, and caches the
// blocks that the scheduled tokens fill. It fails, changing nothing, when the
// free queue is short; hit blocks sitting in the free queue count against it,
// since touching them takes them out.
func (e *Engine) allocate(s *seq, computed, n int, hit []int32) bool {
	bs := e.cfg.BlockSize
	need := max(0, (computed+n+bs-1)/bs-len(s.blocks)-len(hit))
	evictable := 0
	for _, id := range hit {
		if e.pool.blocks[id].ref == 0 {
			evictable++
		}
	}
	if need+evictable > e.pool.numFree() {
		return false
	}
	if len(s.blocks) == 0 {
		e.pool.touch(hit)
		s.blocks = append(s.blocks, hit...)
		s.numCached = len(hit)
	}
	s.blocks = e.pool.alloc(need, s.blocks)
	e.cacheBlocks(s, min(computed+n, s.numTokens()))
	return true
}

// cacheBlocks caches s's full blocks within its first ntok tokens. vLLM does
// this in allocate_slots, when the tokens are scheduled rather than computed,
// so a request admitted later in the same step already hits them.
func (e *Engine) cacheBlocks(s *seq, ntok int) {
	if !e.cfg.PrefixCaching {
		return
	}
	bs := e.cfg.BlockSize
	full := ntok / bs
	if full <= s.numCached {
		return
	}
	e.hashTo(s, full)
	toks := s.appendTokens(make([]uint32, 0, (full-s.numCached)*bs), s.numCached*bs, full*bs)
	e.pool.cache(s.blocks, s.hashes, s.numCached, full, toks, bs)
	s.numCached = full
}

// hashTo extends s's chain hashes to its first nb full blocks. Generated
// tokens are known in advance (Request.Output), so blocks they fill hash
// like prompt blocks, as vLLM's request block hasher does when tokens are
// appended.
func (e *Engine) hashTo(s *seq, nb int) {
	bs := e.cfg.BlockSize
	p := len(s.r.Prompt)
	for i := len(s.hashes); i < nb; i++ {
		parent := s.r.Root
		if i > 0 {
			parent = s.hashes[i-1]
		}
		lo, hi := i*bs, (i+1)*bs
		var toks []uint32
		switch {
		case hi <= p:
			toks = s.r.Prompt[lo:hi]
		case lo >= p:
			toks = s.r.Output[lo-p : hi-p]
		default:
			e.tokbuf = s.appendTokens(e.tokbuf[:0], lo, hi)
			toks = e.tokbuf
		}
		s.hashes = append(s.hashes, e.hasher.Next(parent, toks))
	}
}

// preempt is Scheduler._preempt_request for recompute preemption: the
// request's blocks are freed (they stay cached), its computed tokens are
// dropped and it goes back to the front of the waiting queue.
func (e *Engine) preempt(s *seq) {
	e.pool.free(s.blocks)
	s.blocks = s.blocks[:0]
	s.numCached, s.computed = 0, 0
	s.status = waiting
	s.r.Preemptions++
	e.preemptions++
	e.waiting.pushFront(s)
}

// cost prices the planned step. A request scheduled for exactly one token
// past its prompt is decoding; every other share is a prefill chunk (a new
// prompt, or the recompute of a resumed one), and the chunk that starts at the
// admission's cache hit pays the fixed prefill cost.
func (e *Engine) cost() time.Duration {
	l := e.cfg.Latency
	if l.Zero {
		return 0
	}
	var d time.Duration
	decodes := 0
	for _, c := range e.plan {
		if c.n == 1 && c.start >= len(c.s.r.Prompt) {
			decodes++
			continue
		}
		d += l.Chunk(c.start, c.start+c.n)
		if c.start == c.s.start {
			d += l.PrefillFixed
		}
	}
	return d + l.Decode(decodes)
}

// advance applies the planned step as Scheduler.update_from_output does: a
// request whose tokens are now all computed samples its next token, and
// finishes when it has generated all of Output. Finished requests free their
// blocks. It appends the step's outputs to outs.
func (e *Engine) advance(end time.Duration, outs []Output) []Output {
	finished := false
	for _, c := range e.plan {
		s, r := c.s, c.s.r
		s.computed += c.n
		if s.computed < s.numTokens() {
			continue // a prefill chunk that is not the last
		}
		o := Output{Req: r}
		if r.Generated == 0 {
			// vllm:prompt_tokens counts a request's prompt once, when its
			// prefill completes (IterationStats, on the first token).
			e.promptTokens += int64(len(r.Prompt))
		}
		if r.Generated < len(r.Output) {
			r.Generated++
			e.generationTokens++
			o.NewTokens = 1
			if r.Generated == 1 {
				r.FirstToken = end
			}
		}
		if r.Generated == len(r.Output) {
			o.Done, o.Reason = true, reason(r)
			r.Finished = end
			e.finished[o.Reason]++
			e.pool.free(s.blocks)
			s.blocks = nil
			s.status = done
			delete(e.live, r.ID)
			finished = true
		}
		outs = append(outs, o)
	}
	if finished {
		kept := e.running[:0]
		for _, s := range e.running {
			if s.status == running {
				kept = append(kept, s)
			}
		}
		clear(e.running[len(kept):])
		e.running = kept
	}
	return outs
}

// reason is r's finish reason; "length" when the caller left it empty.
func reason(r *Request) string {
	if r.Reason == "" {
		return "length"
	}
	return r.Reason
}

// CachedHashes returns the multiset of the External values of every hashed
// block in the pool: what a consumer of the engine's KV events should hold.
func (e *Engine) CachedHashes() map[uint64]int {
	out := make(map[uint64]int, e.pool.ncached)
	for i := range e.pool.blocks[:e.pool.sent] {
		if b := &e.pool.blocks[i]; b.hashed {
			out[b.hash.External()]++
		}
	}
	return out
}

// Cached returns how many of a prompt's leading tokens the prefix cache
// would serve if the prompt were admitted now: the leading blocks of hashes
// (its full blocks' chain, as prefix.Hasher.Chain makes it from the
// request's Root) that the pool holds, within promptTokens−1 tokens as the
// scheduler's lookup. It changes nothing, not even recency. The fleet
// simulator compares it with what the router predicts.
func (e *Engine) Cached(hashes []prefix.Hash, promptTokens int) int {
	if !e.cfg.PrefixCaching || promptTokens <= 0 {
		return 0
	}
	nb := min(len(hashes), (promptTokens-1)/e.cfg.BlockSize)
	n := 0
	for _, h := range hashes[:nb] {
		if _, ok := e.pool.lookup(h); !ok {
			break
		}
		n++
	}
	return n * e.cfg.BlockSize
}

// SetLatency replaces the latency model, for a run whose engine changes
// speed (a GPU throttling, a neighbour's load): steps planned from then on
// take l's times. l must be valid as Config.Latency is.
func (e *Engine) SetLatency(l Latency) { e.cfg.Latency = l }

// Outlook is what a request for a prompt added now would find ahead of it,
// if nothing were evicted meanwhile: the prefill work queued before it
// (backlog) and how many of its leading tokens would be cached at its
// admission (ahead). hashes are the prompt's full blocks' chain, as Cached
// takes them; nil asks for the backlog alone.
//
// The backlog is priced with the latency model as Step prices it: the rest
// of every running request's prefill (a resumed one's recompute included;
// a decoding request has none) and, for every waiting request in turn, its
// tokens less the leading blocks the pool holds or a request ahead of it
// computes (requests sharing a prefix compute it once), with the fixed
// cost of a prefill not begun. ahead counts the leading blocks the pool
// holds or a running or waiting request computes, within promptTokens−1
// tokens as the scheduler's lookup.
//
// The informed fleet simulator prices a replica with it instead of
// estimates. It changes no state a caller can observe: it may compute a
// waiting request's block hashes, which the scheduler memoizes and would
// compute on admission anyway.
func (e *Engine) Outlook(hashes []prefix.Hash, promptTokens int) (backlog time.Duration, ahead int) {
	l := e.cfg.Latency
	bs := e.cfg.BlockSize
	if e.soon == nil {
		e.soon = make(map[prefix.Hash]struct{})
	}
	clear(e.soon)
	// lead counts the leading blocks of chain the pool holds or a request
	// ahead computes.
	lead := func(chain []prefix.Hash) int {
		if !e.cfg.PrefixCaching {
			return 0
		}
		n := 0
		for _, h := range chain {
			if _, ok := e.soon[h]; !ok {
				if _, ok := e.pool.lookup(h); !ok {
					break
				}
			}
			n++
		}
		return n
	}
	computes := func(s *seq) {
		if !e.cfg.PrefixCaching {
			return
		}
		full := s.numTokens() / bs
		e.hashTo(s, full)
		for _, h := range s.hashes[:full] {
			e.soon[h] = struct{}{}
		}
	}
	for _, s := range e.running {
		// One token left past the prompt is a decode (cost's rule).
		if n := s.numTokens(); n-s.computed > 1 || n-s.computed == 1 && s.computed < len(s.r.Prompt) {
			backlog += l.Chunk(s.computed, n)
			computes(s)
		}
	}
	for i := range e.waiting.len() {
		s := e.waiting.at(i)
		n := s.numTokens()
		nb := (n - 1) / bs
		if e.cfg.PrefixCaching {
			e.hashTo(s, nb)
		}
		cached := 0
		if e.cfg.PrefixCaching {
			cached = lead(s.hashes[:nb]) * bs
		}
		backlog += l.Chunk(cached, n) + l.PrefillFixed
		computes(s)
	}
	if l.Zero {
		backlog = 0
	}
	if promptTokens > 0 {
		ahead = lead(hashes[:min(len(hashes), (promptTokens-1)/bs)]) * bs
	}
	return backlog, ahead
}

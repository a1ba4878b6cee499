// Package engine is the simulator's vLLM V1 scheduler and KV block pool on a
// virtual timeline.
//
// The engine is a pure state machine: the caller adds and aborts requests and
// calls Step with the virtual time the step starts at; Step plans one
// continuous-batching step as vLLM's scheduler does, and returns how long it
// takes under the latency model, which requests produced tokens, and the KV
// events the step caused. The caller (sim's driver goroutine) decides when the
// step's time has passed in the real world.
//
// engine starts no goroutines, does no I/O and keeps no globals. An Engine is
// not safe for concurrent use: it is owned by one driver goroutine.
package engine

import (
	"math/bits"
	"time"

	"github.com/inferrail/inferrail/model/kvevent"
	"github.com/inferrail/inferrail/model/prefix"
)

// Config sizes an engine. Field names follow vLLM's flags.
type Config struct {
	BlockSize        int  // --block-size, tokens per KV block (16)
	NumBlocks        int  // --num-gpu-blocks-override, KV pool size (4096)
	MaxNumSeqs       int  // --max-num-seqs, running sequence cap (256)
	MaxBatchedTokens int  // --max-num-batched-tokens, token budget per step (2048)
	MaxModelLen      int  // --max-model-len, context length (32768)
	PrefixCaching    bool // --enable-prefix-caching (true)
	Latency          Latency
}

// WithContext returns c with a context of at least tokens: MaxModelLen
// raised to the power of two that holds them, and the KV pool grown to
// hold one such sequence whole, as an engine started with a longer
// --max-model-len must be. A c that already holds tokens is returned as it
// is, and raised reports whether it was not.
func (c Config) WithContext(tokens int) (_ Config, raised bool) {
	if tokens <= c.MaxModelLen || c.BlockSize <= 0 {
		return c, false
	}
	c.MaxModelLen = 1 << bits.Len(uint(tokens-1))
	c.NumBlocks = max(c.NumBlocks, (c.MaxModelLen+c.BlockSize-1)/c.BlockSize)
	return c, true
}

// Latency is the simulator's timing model.
//
// Prefill of u uncached tokens after c cached ones costs
// P(u,c) = a·u + b·u·(c + u/2) + d. A chunk covering token positions [s, e)
// costs a·(e−s) + b·(e²−s²)/2, plus d on the prompt's first chunk, so a
// prompt's chunks add up to exactly P(u,c). A step that decodes n sequences
// adds DecodeToken + DecodeSeq·(n−1).
type Latency struct {
	PrefillToken time.Duration // a, --prefill-token-us (100µs)
	PrefillPair  float64       // b in nanoseconds per token pair, --prefill-pair-ns (3.3)
	PrefillFixed time.Duration // d, --prefill-fixed-ms (5ms)
	DecodeToken  time.Duration // --decode-token-ms (20ms)
	DecodeSeq    time.Duration // --decode-seq-us (100µs)
	Zero         bool          // --zero-latency: every step takes no time
}

// Request is one sequence submitted to the engine. The caller fills the input
// fields; the engine fills the rest as the request runs. After Add, the
// caller reads the engine-owned fields only from Step results on the driver
// goroutine.
type Request struct {
	// Inputs.
	ID      string
	Root    prefix.Hash   // chain root: model, LoRA adapter and cache_salt
	Prompt  []uint32      // prompt token ids
	Output  []uint32      // the ids this request will generate, in order
	Reason  string        // finish reason once Output is exhausted: "length" or "stop"
	Arrival time.Duration // virtual time it was added
	Ctx     any           // opaque to the engine: the driver's per-request state

	// Filled by the engine.
	Generated    int           // output tokens produced so far
	CachedTokens int           // prefix cache hit at first admission (for usage)
	Preemptions  int           // times preempted
	Scheduled    time.Duration // virtual time of first admission (queue time ends)
	FirstToken   time.Duration // virtual time the first output token was produced
	Finished     time.Duration // virtual time it finished or was aborted
}

// Output reports what one request did in a step.
type Output struct {
	Req       *Request
	NewTokens int    // output tokens produced this step (0 or 1)
	Done      bool   // the request finished (or was aborted) this step
	Reason    string // finish reason when Done: "length", "stop" or "abort"
}

// StepResult is what one call to Step did.
type StepResult struct {
	Start, Duration time.Duration
	Outputs         []Output        // requests that produced tokens or finished
	Events          []kvevent.Event // stores and removals, in the order they happened
	ScheduledTokens int             // tokens computed in the step (prefill + decode)
	Preempted       int             // preemptions in the step
}

// Stats is the engine's state and cumulative counters, as vLLM's metrics report them.
type Stats struct {
	Running, Waiting int
	KVUsage          float64 // fraction of blocks in use, 0..1
	PrefixQueries    int64   // prompt tokens of new, non-preempted admissions
	PrefixHits       int64   // cached tokens found for those admissions
	Preemptions      int64
	PromptTokens     int64 // prompt tokens of admitted requests (vllm:prompt_tokens)
	GenerationTokens int64
	FinishedByReason map[string]int64 // "stop", "length", "abort"
	CachedBlocks     int              // blocks holding a hash
	UsedBlocks       int              // blocks with a reference
}

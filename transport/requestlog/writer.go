// Package requestlog writes the gateway's request log
// (observability.request_log): one JSON line per request, in the Mooncake
// trace's format (timestamp, input_length, output_length, hash_ids) followed
// by the gateway's own fields, so that inferrail whatif and other readers
// of Mooncake traces can replay real traffic. Its line format is
// docs/request-log.md's.
//
// No text and no token id ever enters a record: the request path hands the
// Writer the prompt's block identities (taken from its chained block
// hashes, copied into a pooled slice), lengths, the policy's and replica's
// ids and times. The Writer's goroutine (a jsonl.Queue) numbers the
// identities per file, as Mooncake's hash_ids are numbered, and writes
// the lines; the request path never waits for it: when the queue is full a
// record is dropped and counted.
package requestlog

import (
	"encoding/binary"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/zeebo/xxh3"

	"github.com/inferrail/inferrail/model/openai"
	"github.com/inferrail/inferrail/model/prefix"
	"github.com/inferrail/inferrail/transport/jsonl"
)

// QueueLen is how many records may wait for the disk.
const QueueLen = 4096

// MaxIDs bounds the numbering of block identities in one file (about 40
// bytes each in the writer's map, so 40 MB at most): once a file has
// numbered this many, the next record that brings a new one starts a new
// file with a fresh numbering (counted in
// inferrail_request_log_rotations_total{reason="ids"}) rather than reuse
// numbers.
const MaxIDs = 1 << 20

// The metrics' names.
const (
	recordsMetric   = "inferrail_request_log_records_total"
	rotationsMetric = "inferrail_request_log_rotations_total"
)

// Options configure a Writer; config.RequestLog's keys.
type Options struct {
	Path       string
	SampleRate float64 // in [0, 1]
	// BlockSize is tokens per hash id; a multiple of every engine's block
	// size.
	BlockSize int
	// MaxBytes rotates the file at that size (0: never); MaxFiles are
	// kept, the current one included.
	MaxBytes int64
	MaxFiles int
	// MaxIDs bounds each file's numbering; 0 is MaxIDs.
	MaxIDs int
	// Log is warned once on the first failed write.
	Log *slog.Logger
}

// Entry is what the request path knows of a finished request. It holds no
// text and no token id.
type Entry struct {
	Arrival time.Time
	Model   string
	Adapter string // the LoRA adapter; "" for none
	// Session is the conversation key (policy.Request.SessionKey), 0 for
	// none.
	Session      uint64
	InputLength  int // the gateway's count of prompt tokens; 0 unknown
	OutputLength int // usage.completion_tokens; 0 unknown
	Policy       string
	Replica      string // "" when none served it
	Status       int
	// Predicted (with HasPredicted) is the decision's predicted cached
	// tokens, when priced on the KV index; Cached (with HasCached) the
	// engine's usage.prompt_tokens_details.cached_tokens.
	Predicted, Cached       int
	HasPredicted, HasCached bool
	// FirstByte and End are from Arrival to the first and the last byte
	// relayed; both 0 for a request that failed before its first byte.
	FirstByte, End time.Duration

	ids *[]uint64 // the prompt's block identities, from idPool; nil none
}

// Served notes the replica whose response is relayed, and the decision's
// prediction when it was priced on the KV index (predicted).
func (e *Entry) Served(replica string, predicted bool, cachedTokens int) {
	e.Replica = replica
	e.Predicted, e.HasPredicted = cachedTokens, predicted
}

// Usage notes the engine's usage of the relayed response.
func (e *Entry) Usage(u openai.Usage) {
	e.OutputLength = u.CompletionTokens
	e.Cached, e.HasCached = u.CachedTokens, u.Details
}

// Ended notes the end of the request at end: the times from its arrival to
// firstByte and end, both left out when firstByte is zero (no byte of an
// engine's response was relayed).
func (e *Entry) Ended(firstByte, end time.Time) {
	if firstByte.IsZero() {
		e.FirstByte, e.End = 0, 0
		return
	}
	e.FirstByte, e.End = firstByte.Sub(e.Arrival), end.Sub(e.Arrival)
}

// StatusClientGone is the status logged for a request whose client left
// before its response: nginx's 499, as the gateway's errors name it.
const StatusClientGone = 499

// idPool holds the slices of block identities entries carry from the
// request path to the writer.
var idPool = sync.Pool{New: func() any { s := make([]uint64, 0, 64); return &s }}

// Writer writes sampled entries from its own goroutine. Its methods are
// safe for concurrent use; a nil Writer logs nothing.
type Writer struct {
	rate       float64
	blockSize  int
	q          *jsonl.Queue[Entry]
	sampledOut *metrics.Counter
	log        *slog.Logger
	misfit     atomic.Bool // an engine block size that does not divide BlockSize was warned about
}

// Open opens the file at o.Path and starts the writer. A file already
// there and not empty is moved aside first, as a rotation does, so that a
// file never holds two numberings of hash ids. A path that cannot be written fails here, naming the key. Its
// counters, inferrail_request_log_records_total{result="written",
// "dropped", "failed" or "sampled_out"} and
// inferrail_request_log_rotations_total{reason="size" or "ids"}, go into
// set.
func Open(o Options, set *metrics.Set) (*Writer, error) {
	if !(o.SampleRate >= 0 && o.SampleRate <= 1) {
		return nil, fmt.Errorf("observability.request_log.sample_rate: %v is not in [0, 1]", o.SampleRate)
	}
	if o.BlockSize < 1 {
		return nil, fmt.Errorf("observability.request_log.block_size: must be at least 1, got %d", o.BlockSize)
	}
	if o.MaxIDs <= 0 {
		o.MaxIDs = MaxIDs
	}
	enc := &encoder{blockSize: o.BlockSize, maxIDs: o.MaxIDs}
	q, err := jsonl.OpenQueue[Entry](jsonl.Options{Path: o.Path, Queue: QueueLen, Metric: recordsMetric,
		MaxBytes: o.MaxBytes, MaxFiles: o.MaxFiles, Log: o.Log, Fresh: true,
		RotationMetric: rotationsMetric, EncoderReason: "ids"}, enc, set)
	if err != nil {
		return nil, fmt.Errorf("observability.request_log.path: %w", err)
	}
	return &Writer{rate: o.SampleRate, blockSize: o.BlockSize, q: q,
		sampledOut: set.GetOrCreateCounter(recordsMetric + `{result="sampled_out"}`), log: o.Log}, nil
}

// CheckPath reports whether the request log's file can be written, as Open
// would open it, naming the key; for inferrail check.
func CheckPath(path string) error {
	if err := jsonl.CheckWritable(path); err != nil {
		return fmt.Errorf("observability.request_log.path: %w", err)
	}
	return nil
}

// Sampled reports whether the request whose policy key is key
// (policy.Request.Key: its conversation's, else its request id's) is
// logged. Sampling by the conversation keeps a conversation's requests
// together, all logged or none, so that a replay sees its prefix reuse
// whole. A nil Writer samples nothing.
func (w *Writer) Sampled(key uint64) bool {
	switch {
	case w == nil || w.rate <= 0:
		return false
	case w.rate >= 1:
		return true
	}
	// The top 53 bits of the mixed key, as a fraction in [0, 1).
	return float64(mix(key)>>11)/(1<<53) < w.rate
}

// mix is splitmix64's finalizer: the policy key is FNV-1a, whose top bits
// are not uniform enough to sample on.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// Log queues e, the request with policy key key, when it is sampled,
// with its prompt's block identities taken from blocks, the chained hashes
// of its full engine blocks of engineBlock tokens (nil when the prompt was
// not prepared). It copies what it keeps; the caller may reuse e and blocks
// at once. It never waits: a record the queue has no room for is dropped
// and counted.
func (w *Writer) Log(key uint64, e *Entry, blocks []prefix.Hash, engineBlock int) {
	if w == nil {
		return
	}
	if !w.Sampled(key) {
		w.sampledOut.Inc()
		return
	}
	v := *e
	v.ids = w.identities(blocks, e.InputLength, engineBlock)
	if !w.q.Offer(v) && v.ids != nil {
		idPool.Put(v.ids)
	}
}

// identities returns the identities of a prompt of tokens tokens whose full
// engine blocks hash to blocks: one per BlockSize tokens, the chain hash at
// each BlockSize boundary, so that two prompts share an identity exactly
// when they share every token up to its boundary. A partial last block is
// the chain so far with the tail's length: two prompts that share their
// full blocks and whose tails are as long but differ get the same last id.
// That conflation is harmless to a cache replay, since engines cache full
// blocks only and a partial block is never reused. nil when the prompt was
// not prepared.
func (w *Writer) identities(blocks []prefix.Hash, tokens, engineBlock int) *[]uint64 {
	if tokens <= 0 {
		return nil
	}
	if engineBlock <= 0 {
		engineBlock = 16 // vLLM's default, as policy.Request.BlockSize
	}
	if w.blockSize%engineBlock != 0 {
		// Validation keeps this out (config's request_log.block_size
		// check); a record without ids is still a request worth replaying.
		if !w.misfit.Swap(true) && w.log != nil {
			w.log.Warn("observability.request_log.block_size is not a multiple of an engine's block size; its records carry no hash_ids",
				"block_size", w.blockSize, "engine_block_size", engineBlock)
		}
		return nil
	}
	step := w.blockSize / engineBlock
	full := min(tokens/w.blockSize, len(blocks)/step)
	p := idPool.Get().(*[]uint64)
	ids := (*p)[:0]
	for j := 1; j <= full; j++ {
		ids = append(ids, blocks[j*step-1].Lo)
	}
	if rest := tokens - full*w.blockSize; rest > 0 {
		var chain prefix.Hash
		if len(blocks) > 0 {
			chain = blocks[len(blocks)-1]
		}
		ids = append(ids, partial(chain, rest))
	}
	*p = ids
	return p
}

// partial is the identity of a partial block: the chain so far with the
// tail's length.
func partial(chain prefix.Hash, rest int) uint64 {
	var b [25]byte
	binary.LittleEndian.PutUint64(b[0:], chain.Hi)
	binary.LittleEndian.PutUint64(b[8:], chain.Lo)
	binary.LittleEndian.PutUint64(b[16:], uint64(rest))
	b[24] = 'p' // apart from any full block's chain hash
	return xxh3.Hash(b[:])
}

// Close stops the writer once every record queued before it is written,
// and closes the file. It returns the first write error, if any. A nil
// Writer closes as a no-op.
func (w *Writer) Close() error {
	if w == nil {
		return nil
	}
	return w.q.Close()
}

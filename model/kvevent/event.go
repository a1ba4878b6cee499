// Package kvevent holds vLLM's and SGLang's KV cache event types and their
// msgpack codec.
//
// An engine publishes one Batch per scheduler step: the blocks it stored, the
// blocks it evicted and whether it cleared its prefix cache
// (vllm/distributed/kv_events.py; SGLang's copy of it,
// python/sglang/srt/disaggregation/kv_events.py, fed one page at a time by
// srt/mem_cache/events.py). kvevent models them, encodes and decodes them
// byte for byte as each engine's msgspec encoder does (AppendBatch, Decode),
// and rebuilds an engine's cache from them (Mirror); sockets live in
// transport/kvevents.
//
// kvevent starts no goroutines, does no I/O and keeps no globals. Values are
// plain data; a Batch is immutable once handed to a publisher.
package kvevent

// Event is one of *BlockStored, *BlockRemoved or *AllBlocksCleared.
type Event interface{ kvEvent() }

// BlockStored says that an engine cached a run of full blocks, in chain order.
type BlockStored struct {
	BlockHashes []uint64 // External values of the blocks' hashes
	// ParentBlockHash is the hash of the block before the first stored one;
	// nil when the run starts at the prompt's first block. It is what the
	// wire said: read it through Parent, which also takes 0 for none.
	ParentBlockHash *uint64
	TokenIDs        []uint32 // every token of the stored blocks, concatenated
	BlockSize       int
	LoraID          *int
	Medium          string // "GPU" for engine blocks; "" when the engine sent None
	LoraName        *string

	// The fields below have defaults (None) in vLLM and are omitted from the
	// wire when nil, as msgspec's omit_defaults does.

	// ExtraKeys is extra_keys (vLLM #33304): one entry per block, the extra
	// keys that went into that block's hash (LoRA name, multimodal ids,
	// cache_salt, prompt-embeds digests). It is kept as one msgpack value,
	// verbatim; see Raw.
	ExtraKeys Raw
	// GroupIdx is the KV cache group (#37688); 0 for plain models.
	GroupIdx *int
	// KVCacheSpecKind is the group's attention kind, e.g. "full_attention",
	// "sliding_window", "mamba" (#40984).
	KVCacheSpecKind *string
	// KVCacheSpecSlidingWindow is the window size of a sliding-window group.
	KVCacheSpecSlidingWindow *int
	Locality                 *string // "LOCAL"/"REMOTE" relative to the publisher (v0.29)
	Ownership                *string // secondary offload tier id (v0.29)
	SessionID                *string // request context that emitted the event (after v0.29)

	// CacheSalt is SGLang's cache_salt: the salt that went into every one
	// of the run's hashes (BlockStoredWithMetadata's metadata.cache_salt in
	// the array encoding, a cache_salt key in the map one). vLLM carries its
	// salt in ExtraKeys instead, and its encodings do not write this field.
	CacheSalt *string
}

// BlockRemoved says that an engine evicted blocks to reuse them.
type BlockRemoved struct {
	BlockHashes []uint64
	Medium      string // "" when the engine sent None

	// Optional fields, omitted from the wire when nil.
	GroupIdx  *int
	Locality  *string
	Ownership *string
}

// AllBlocksCleared says that an engine reset its prefix cache.
type AllBlocksCleared struct{}

// Parent returns the hash of the block before e's run and true, or false
// when the run starts a chain. A zero parent_block_hash counts as none, as
// None does: llm-d's inference simulator writes 0 for "no parent" in the
// array encoding, and llm-d-router's consumer reads a zero parent as none
// (pkg/kvevents/pool.go: only ParentHash != 0 is looked up). An engine
// block whose hash is 0 has odds of 2^-64.
func (e *BlockStored) Parent() (uint64, bool) {
	if e.ParentBlockHash == nil || *e.ParentBlockHash == 0 {
		return 0, false
	}
	return *e.ParentBlockHash, true
}

// TokensPerBlock returns how many token ids each of e's blocks holds: its
// BlockSize when the token ids fill its blocks exactly; when BlockSize is 0
// (unset, as llm-d's inference simulator once left it), the token ids
// shared evenly among the blocks; else 0: the tokens cannot be told apart
// by block.
func (e *BlockStored) TokensPerBlock() int {
	n, t := len(e.BlockHashes), len(e.TokenIDs)
	switch {
	case n == 0 || t == 0 || t%n != 0:
		return 0
	case e.BlockSize == 0 || e.BlockSize == t/n:
		return t / n
	}
	return 0
}

func (*BlockStored) kvEvent()      {}
func (*BlockRemoved) kvEvent()     {}
func (*AllBlocksCleared) kvEvent() {}

// Batch is one step's events (vLLM's and SGLang's KVEventBatch).
type Batch struct {
	TS     float64 // wall clock, seconds since the Unix epoch
	Events []Event
	// DPRank is vLLM's data_parallel_rank or SGLang's attn_dp_rank: the
	// data parallel rank whose KV cache the events are about. Both engines'
	// publishers fill it (0 without DP).
	DPRank *int
}

// Raw is one msgpack-encoded value kept verbatim, for fields whose shape
// kvevent does not model (BlockStored.ExtraKeys). A nil Raw means None and is
// omitted where the field is optional. A non-nil Raw must hold exactly one
// well-formed msgpack value; values produced by DecodeBatch always do.
type Raw []byte

// Encoding selects how events inside a batch are laid out.
type Encoding int

const (
	// EncodingMap is vLLM's encoding from v0.23 on (PR #42892): each event is a
	// map whose first key is "type", with fields equal to their default omitted.
	EncodingMap Encoding = iota
	// EncodingArray is vLLM's encoding up to v0.22: each event is an array whose
	// first element is the type name, with trailing default fields dropped.
	EncodingArray
	// EncodingSGLang is SGLang's (KVCacheEvent and EventBatch with
	// array_like but without omit_defaults, since 2025): the batch is always
	// [ts, events, attn_dp_rank] and each event an array of every field of
	// SGLang's schema, nil ones included: BlockStored [tag, block_hashes,
	// parent_block_hash, token_ids, block_size, lora_id, medium], with a
	// trailing {"cache_salt": …} map when CacheSalt is set, BlockRemoved
	// [tag, block_hashes, medium]. Hashes are written as signed 64-bit
	// integers, as SGLang's hash_str_to_int64 makes them, and an empty
	// Medium as nil. Fields SGLang does not have (LoraName, ExtraKeys,
	// GroupIdx and the rest) are not written.
	EncodingSGLang
)

// Engine names an inference engine whose KV events the gateway reads: the
// values of replicas[].engine_type and discovery.dns[].engine_type. It picks
// the event schema (Decode), how replays are framed and when a publisher
// binds its endpoint (transport/kvevents).
type Engine string

// The engines.
const (
	// EngineVLLM is vLLM (vllm/distributed/kv_events.py), and engines
	// that publish its schema, llm-d's inference simulator among them.
	EngineVLLM Engine = "vllm"
	// EngineSGLang is SGLang (python/sglang/srt/disaggregation/kv_events.py).
	EngineSGLang Engine = "sglang"
)

// Engines returns every Engine, the default (EngineVLLM) first.
func Engines() []Engine { return []Engine{EngineVLLM, EngineSGLang} }

// Known reports whether e is one of Engines.
func (e Engine) Known() bool { return e == EngineVLLM || e == EngineSGLang }

// Stream is where an engine publishes its KV events and how the gateway
// reads them (replicas[].kv_events, kv_events_replay, kv_events_bind and
// engine_type). The zero value means none. A Stream is a plain value.
type Stream struct {
	// Endpoint is the engine's PUB socket, as the gateway reaches it.
	Endpoint string
	// Replay is the engine's replay socket; "" for none.
	Replay string
	// Bind makes the gateway listen on Endpoint for an engine that
	// connects to it.
	Bind bool
	// Engine is the publisher's engine; "" reads as EngineVLLM.
	Engine Engine
	// From is the first batch a subscription catches up from through
	// Replay: 0, the engine's first, unless the subscriber already knows
	// the engine's state up to From-1 (a peer's index snapshot).
	From uint64
}

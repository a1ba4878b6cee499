// Package kvevent holds vLLM's KV cache event types and their msgpack codec.
//
// An engine publishes one Batch per scheduler step: the blocks it stored, the
// blocks it evicted and whether it cleared its prefix cache
// (vllm/distributed/kv_events.py). kvevent models them, encodes and decodes
// them byte for byte as vLLM's msgspec encoder does (AppendBatch, DecodeBatch),
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

// Batch is one step's events (vLLM's KVEventBatch).
type Batch struct {
	TS     float64 // wall clock, seconds since the Unix epoch
	Events []Event
	DPRank *int // data parallel rank; vLLM always fills it (0 without DP)
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
)

package kvevent

import (
	"fmt"
	"math"
)

// Event type tags: msgspec's tag=True uses the class name.
const (
	tagBlockStored      = "BlockStored"
	tagBlockRemoved     = "BlockRemoved"
	tagAllBlocksCleared = "AllBlocksCleared"
)

// Field names in declaration order (vllm/distributed/kv_events.py). The
// position in these lists is the position in the legacy array encoding, after
// the tag.
var (
	storedFields = [...]string{
		"block_hashes", "parent_block_hash", "token_ids", "block_size",
		"lora_id", "medium", "lora_name", // required
		"extra_keys", "group_idx", "kv_cache_spec_kind",
		"kv_cache_spec_sliding_window", "locality", "ownership", "session_id",
	}
	removedFields = [...]string{
		"block_hashes", "medium", // required
		"group_idx", "locality", "ownership",
	}
)

const (
	storedRequired  = 7
	removedRequired = 2
)

// SGLang's fields in declaration order (BlockStored, BlockStoredWithMetadata
// and BlockRemoved in python/sglang/srt/disaggregation/kv_events.py). The
// first six stored and two removed fields are vLLM's, in vLLM's order; the
// seventh stored field is metadata, which only BlockStoredWithMetadata has.
// SGLang before medium was added sent the first five and the first one.
var (
	sglangStoredFields  = [...]string{"block_hashes", "parent_block_hash", "token_ids", "block_size", "lora_id", "medium", "metadata"}
	sglangRemovedFields = [...]string{"block_hashes", "medium"}
)

// AppendBatch appends b encoded as vLLM's msgspec encoder writes a
// KVEventBatch and returns the extended slice.
//
// The batch is the array [ts, events, data_parallel_rank] (dp rank dropped
// when nil, as array_like + omit_defaults trims trailing defaults). Events are
// laid out as enc says. Optional fields equal to their default (nil) are
// omitted: in EncodingArray only when trailing, in EncodingMap anywhere.
// Required fields are always written, nil ones as msgpack nil. A nil slice is
// written as an empty array. Medium is always a string: kvevent does not
// distinguish a None medium from "".
func AppendBatch(dst []byte, b *Batch, enc Encoding) []byte {
	switch enc {
	case EncodingMap, EncodingArray:
	case EncodingSGLang:
		return appendSGLang(dst, b)
	default:
		panic(fmt.Sprintf("BUG: kvevent: unknown encoding %d", enc))
	}
	if b.DPRank != nil {
		dst = append(dst, 0x93)
	} else {
		dst = append(dst, 0x92)
	}
	dst = appendFloat64(dst, b.TS)
	dst = appendArrayLen(dst, len(b.Events))
	for _, ev := range b.Events {
		switch e := ev.(type) {
		case *BlockStored:
			dst = appendStored(dst, e, enc)
		case *BlockRemoved:
			dst = appendRemoved(dst, e, enc)
		case *AllBlocksCleared:
			if enc == EncodingMap {
				dst = appendMapLen(dst, 1)
				dst = appendStr(dst, "type")
			} else {
				dst = appendArrayLen(dst, 1)
			}
			dst = appendStr(dst, tagAllBlocksCleared)
		default:
			panic(fmt.Sprintf("BUG: kvevent: event type %T", ev))
		}
	}
	if b.DPRank != nil {
		dst = appendInt(dst, int64(*b.DPRank))
	}
	return dst
}

// storedOptional reports which optional BlockStored fields differ from their
// default, in declaration order.
func storedOptional(e *BlockStored) [len(storedFields) - storedRequired]bool {
	return [...]bool{
		e.ExtraKeys != nil, e.GroupIdx != nil, e.KVCacheSpecKind != nil,
		e.KVCacheSpecSlidingWindow != nil, e.Locality != nil, e.Ownership != nil,
		e.SessionID != nil,
	}
}

func appendStored(dst []byte, e *BlockStored, enc Encoding) []byte {
	set := storedOptional(e)
	n := fieldCount(set[:], enc)
	if enc == EncodingMap {
		dst = appendMapLen(dst, 1+storedRequired+n)
		dst = appendStr(dst, "type")
	} else {
		dst = appendArrayLen(dst, 1+storedRequired+n)
	}
	dst = appendStr(dst, tagBlockStored)
	for i := range storedRequired + len(set) {
		if i >= storedRequired {
			j := i - storedRequired
			if enc == EncodingMap && !set[j] || enc == EncodingArray && j >= n {
				continue
			}
		}
		if enc == EncodingMap {
			dst = appendStr(dst, storedFields[i])
		}
		switch i {
		case 0:
			dst = appendHashes(dst, e.BlockHashes)
		case 1:
			dst = appendOptUint(dst, e.ParentBlockHash)
		case 2:
			dst = appendArrayLen(dst, len(e.TokenIDs))
			for _, t := range e.TokenIDs {
				dst = appendUint(dst, uint64(t))
			}
		case 3:
			dst = appendInt(dst, int64(e.BlockSize))
		case 4:
			dst = appendOptInt(dst, e.LoraID)
		case 5:
			dst = appendStr(dst, e.Medium)
		case 6:
			dst = appendOptStr(dst, e.LoraName)
		case 7:
			dst = appendRaw(dst, e.ExtraKeys)
		case 8:
			dst = appendOptInt(dst, e.GroupIdx)
		case 9:
			dst = appendOptStr(dst, e.KVCacheSpecKind)
		case 10:
			dst = appendOptInt(dst, e.KVCacheSpecSlidingWindow)
		case 11:
			dst = appendOptStr(dst, e.Locality)
		case 12:
			dst = appendOptStr(dst, e.Ownership)
		case 13:
			dst = appendOptStr(dst, e.SessionID)
		}
	}
	return dst
}

func appendRemoved(dst []byte, e *BlockRemoved, enc Encoding) []byte {
	set := [...]bool{e.GroupIdx != nil, e.Locality != nil, e.Ownership != nil}
	n := fieldCount(set[:], enc)
	if enc == EncodingMap {
		dst = appendMapLen(dst, 1+removedRequired+n)
		dst = appendStr(dst, "type")
	} else {
		dst = appendArrayLen(dst, 1+removedRequired+n)
	}
	dst = appendStr(dst, tagBlockRemoved)
	for i := range removedRequired + len(set) {
		if i >= removedRequired {
			j := i - removedRequired
			if enc == EncodingMap && !set[j] || enc == EncodingArray && j >= n {
				continue
			}
		}
		if enc == EncodingMap {
			dst = appendStr(dst, removedFields[i])
		}
		switch i {
		case 0:
			dst = appendHashes(dst, e.BlockHashes)
		case 1:
			dst = appendStr(dst, e.Medium)
		case 2:
			dst = appendOptInt(dst, e.GroupIdx)
		case 3:
			dst = appendOptStr(dst, e.Locality)
		case 4:
			dst = appendOptStr(dst, e.Ownership)
		}
	}
	return dst
}

// fieldCount is how many optional fields are written: in the map encoding
// every set one; in the array encoding all up to the last set one, since only
// trailing defaults can be dropped.
func fieldCount(set []bool, enc Encoding) int {
	n := 0
	for i, s := range set {
		if s {
			if enc == EncodingMap {
				n++
			} else {
				n = i + 1
			}
		}
	}
	return n
}

func appendHashes(dst []byte, hs []uint64) []byte {
	dst = appendArrayLen(dst, len(hs))
	for _, h := range hs {
		dst = appendUint(dst, h)
	}
	return dst
}

// DecodeBatch decodes one KV event batch as vLLM publishes it: Decode with
// EngineVLLM.
func DecodeBatch(data []byte) (*Batch, error) { return Decode(data, EngineVLLM) }

// Decode decodes one KV event batch as engine e publishes it (any e but
// EngineSGLang reads vLLM's schema).
//
// It accepts the batch as an array [ts, events, dp_rank?, …] (vLLM's
// data_parallel_rank or SGLang's attn_dp_rank) or as a map; events as legacy
// arrays or as maps with a "type" key, in any mix; unknown trailing array
// fields and unknown map keys, of any msgpack type; block hashes as signed or
// unsigned ints or as bin digests (last eight bytes, big-endian); float32,
// float64 or integer timestamps. Missing fields take their zero values.
//
// Array events are read by position with e's field order: they differ from
// the seventh BlockStored field on (vLLM's lora_name, SGLang's metadata
// with its cache_salt) and the third BlockRemoved one. With EngineSGLang a
// map event's cache_salt and metadata keys are read too, and token_ids may
// also come as SGLang's EAGLE bigrams, [[t0, t1], [t1, t2], …], of which
// each pair's first token is the block's (srt/mem_cache/events.py keeps
// the pairs so that the event shows what was hashed).
//
// An unknown event type is an error wrapping ErrUnknownEvent; anything else
// it cannot read wraps ErrMalformed. It never panics, and allocates at most a
// small multiple of len(data).
func Decode(data []byte, e Engine) (*Batch, error) {
	r := &reader{b: data, sglang: e == EngineSGLang}
	b, err := r.batch()
	if err != nil {
		return nil, err
	}
	if r.left() != 0 {
		return nil, r.errf("%d trailing bytes", r.left())
	}
	return b, nil
}

func (r *reader) batch() (*Batch, error) {
	c, err := r.peek()
	if err != nil {
		return nil, err
	}
	b := &Batch{}
	if c&0xf0 == 0x80 || c == 0xde || c == 0xdf {
		// EventBatch without array_like (seen on a development branch).
		n, err := r.mapLen()
		if err != nil {
			return nil, err
		}
		for range n {
			key, err := r.strBytes()
			if err != nil {
				return nil, err
			}
			switch string(key) {
			case "ts":
				b.TS, err = r.float()
			case "events":
				b.Events, err = r.events()
			case "data_parallel_rank", "attn_dp_rank":
				b.DPRank, err = r.optInt()
			default:
				err = r.skip()
			}
			if err != nil {
				return nil, err
			}
		}
		return b, nil
	}
	n, err := r.arrayLen()
	if err != nil {
		return nil, err
	}
	if n < 2 {
		return nil, r.errf("batch has %d fields, want at least 2", n)
	}
	if b.TS, err = r.float(); err != nil {
		return nil, err
	}
	if b.Events, err = r.events(); err != nil {
		return nil, err
	}
	if n >= 3 {
		if b.DPRank, err = r.optInt(); err != nil {
			return nil, err
		}
	}
	for range n - 3 {
		if err := r.skip(); err != nil {
			return nil, err
		}
	}
	return b, nil
}

func (r *reader) events() ([]Event, error) {
	if r.nilNext() {
		return nil, nil
	}
	n, err := r.arrayLen()
	if err != nil || n == 0 {
		return nil, err
	}
	evs := make([]Event, 0, n)
	for range n {
		ev, err := r.event()
		if err != nil {
			return nil, err
		}
		evs = append(evs, ev)
	}
	return evs, nil
}

// event reads one event in either encoding.
func (r *reader) event() (Event, error) {
	c, err := r.peek()
	if err != nil {
		return nil, err
	}
	if c&0xf0 == 0x80 || c == 0xde || c == 0xdf {
		return r.mapEvent()
	}
	n, err := r.arrayLen()
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, r.errf("empty event array")
	}
	tag, err := r.strBytes()
	if err != nil {
		return nil, err
	}
	ev, fields, err := r.newEvent(tag)
	if err != nil {
		return nil, fmt.Errorf("%w (offset %d)", err, r.off)
	}
	for i := range n - 1 {
		name := ""
		if i < len(fields) {
			name = fields[i]
		}
		if err := r.field(ev, name); err != nil {
			return nil, err
		}
	}
	return ev, nil
}

func (r *reader) mapEvent() (Event, error) {
	n, err := r.mapLen()
	if err != nil {
		return nil, err
	}
	// msgspec writes "type" first, but other encoders need not: find it
	// first, then read the fields from the start of the map.
	start := r.off
	var ev Event
	for range n {
		key, err := r.strBytes()
		if err != nil {
			return nil, err
		}
		if string(key) == "type" {
			tag, err := r.strBytes()
			if err != nil {
				return nil, err
			}
			if ev, _, err = r.newEvent(tag); err != nil {
				return nil, fmt.Errorf("%w (offset %d)", err, r.off)
			}
			break
		}
		if err := r.skip(); err != nil {
			return nil, err
		}
	}
	if ev == nil {
		return nil, r.errf("event map without \"type\"")
	}
	r.off = start
	for range n {
		key, err := r.strBytes()
		if err != nil {
			return nil, err
		}
		name := string(key)
		if name == "type" {
			name = ""
		}
		if err := r.field(ev, name); err != nil {
			return nil, err
		}
	}
	return ev, nil
}

// newEvent returns an empty event for tag and its positional field names in
// the schema of the engine being read.
func (r *reader) newEvent(tag []byte) (Event, []string, error) {
	switch string(tag) {
	case tagBlockStored:
		if r.sglang {
			return &BlockStored{}, sglangStoredFields[:], nil
		}
		return &BlockStored{}, storedFields[:], nil
	case tagBlockRemoved:
		if r.sglang {
			return &BlockRemoved{}, sglangRemovedFields[:], nil
		}
		return &BlockRemoved{}, removedFields[:], nil
	case tagAllBlocksCleared:
		return &AllBlocksCleared{}, nil, nil
	}
	if len(tag) > 64 {
		tag = tag[:64]
	}
	return nil, nil, fmt.Errorf("%w %q", ErrUnknownEvent, tag)
}

// field decodes the value of field name into ev, or skips it when ev has no
// such field.
func (r *reader) field(ev Event, name string) error {
	var err error
	switch e := ev.(type) {
	case *BlockStored:
		switch name {
		case "block_hashes":
			e.BlockHashes, err = r.hashes()
		case "parent_block_hash":
			e.ParentBlockHash, err = r.optHash()
		case "token_ids":
			e.TokenIDs, err = r.tokens()
		case "block_size":
			if !r.nilNext() {
				e.BlockSize, err = r.int()
			}
		case "lora_id":
			e.LoraID, err = r.optInt()
		case "medium":
			e.Medium, err = r.medium()
		case "lora_name":
			e.LoraName, err = r.optStr()
		case "extra_keys":
			e.ExtraKeys, err = r.raw()
		case "group_idx":
			e.GroupIdx, err = r.optInt()
		case "kv_cache_spec_kind":
			e.KVCacheSpecKind, err = r.optStr()
		case "kv_cache_spec_sliding_window":
			e.KVCacheSpecSlidingWindow, err = r.optInt()
		case "locality":
			e.Locality, err = r.optStr()
		case "ownership":
			e.Ownership, err = r.optStr()
		case "session_id":
			e.SessionID, err = r.optStr()
		case "cache_salt":
			if !r.sglang {
				return r.skip()
			}
			e.CacheSalt, err = r.optStr()
		case "metadata":
			if !r.sglang {
				return r.skip()
			}
			e.CacheSalt, err = r.metadata(e.CacheSalt)
		default:
			err = r.skip()
		}
	case *BlockRemoved:
		switch name {
		case "block_hashes":
			e.BlockHashes, err = r.hashes()
		case "medium":
			e.Medium, err = r.medium()
		case "group_idx":
			e.GroupIdx, err = r.optInt()
		case "locality":
			e.Locality, err = r.optStr()
		case "ownership":
			e.Ownership, err = r.optStr()
		default:
			err = r.skip()
		}
	default:
		err = r.skip()
	}
	return err
}

func (r *reader) hashes() ([]uint64, error) {
	if r.nilNext() {
		return nil, nil
	}
	n, err := r.arrayLen()
	if err != nil || n == 0 {
		return nil, err
	}
	hs := make([]uint64, n)
	for i := range hs {
		if hs[i], err = r.hash(); err != nil {
			return nil, err
		}
	}
	return hs, nil
}

func (r *reader) optHash() (*uint64, error) {
	if r.nilNext() {
		return nil, nil
	}
	h, err := r.hash()
	if err != nil {
		return nil, err
	}
	return &h, nil
}

func (r *reader) tokens() ([]uint32, error) {
	if r.nilNext() {
		return nil, nil
	}
	n, err := r.arrayLen()
	if err != nil || n == 0 {
		return nil, err
	}
	ts := make([]uint32, n)
	for i := range ts {
		if ts[i], err = r.token(); err != nil {
			return nil, err
		}
	}
	return ts, nil
}

// token reads one token id, or with SGLang an EAGLE bigram [t, next, …]
// as t.
func (r *reader) token() (uint32, error) {
	pair := 0
	if r.sglang {
		if c, err := r.peek(); err == nil && (c&0xf0 == 0x90 || c == 0xdc || c == 0xdd) {
			if pair, err = r.arrayLen(); err != nil {
				return 0, err
			}
			if pair < 2 {
				return 0, r.errf("token bigram of %d ids", pair)
			}
		}
	}
	v, err := r.integer()
	if err != nil {
		return 0, err
	}
	if v.neg || v.u > math.MaxUint32 {
		return 0, r.errf("token id out of range")
	}
	for range pair - 1 {
		if err := r.skip(); err != nil {
			return 0, err
		}
	}
	return uint32(v.u), nil
}

// metadata reads SGLang's BlockStoredMetadata, a map (or nil) whose
// cache_salt it returns; without one, salt is returned as it was.
func (r *reader) metadata(salt *string) (*string, error) {
	if r.nilNext() {
		return salt, nil
	}
	n, err := r.mapLen()
	if err != nil {
		return nil, err
	}
	for range n {
		key, err := r.strBytes()
		if err != nil {
			return nil, err
		}
		if string(key) != "cache_salt" {
			if err := r.skip(); err != nil {
				return nil, err
			}
			continue
		}
		if salt, err = r.optStr(); err != nil {
			return nil, err
		}
	}
	return salt, nil
}

func (r *reader) optInt() (*int, error) {
	if r.nilNext() {
		return nil, nil
	}
	v, err := r.int()
	if err != nil {
		return nil, err
	}
	return &v, nil
}

func (r *reader) optStr() (*string, error) {
	if r.nilNext() {
		return nil, nil
	}
	s, err := r.str()
	if err != nil {
		return nil, err
	}
	return &s, nil
}

// medium reads a str | None; None becomes "".
func (r *reader) medium() (string, error) {
	if r.nilNext() {
		return "", nil
	}
	p, err := r.strBytes()
	if err != nil {
		return "", err
	}
	// Avoid an allocation for the values engines actually send.
	switch string(p) {
	case "GPU":
		return "GPU", nil
	case "CPU":
		return "CPU", nil
	}
	return string(p), nil
}

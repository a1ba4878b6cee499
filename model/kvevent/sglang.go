package kvevent

import "fmt"

// appendSGLang appends b as SGLang's msgspec encoder writes a KVEventBatch
// (EncodingSGLang). SGLang's EventBatch and KVCacheEvent are array_like
// without omit_defaults, so nothing is dropped: the batch is always three
// elements, BlockStored seven (eight as BlockStoredWithMetadata, whose
// kw_only metadata field comes last), BlockRemoved three.
func appendSGLang(dst []byte, b *Batch) []byte {
	dst = append(dst, 0x93)
	dst = appendFloat64(dst, b.TS)
	dst = appendArrayLen(dst, len(b.Events))
	for _, ev := range b.Events {
		switch e := ev.(type) {
		case *BlockStored:
			n := len(sglangStoredFields) - 1
			if e.CacheSalt != nil {
				n++
			}
			dst = appendArrayLen(dst, 1+n)
			dst = appendStr(dst, tagBlockStored)
			dst = appendSignedHashes(dst, e.BlockHashes)
			if e.ParentBlockHash == nil {
				dst = appendNil(dst)
			} else {
				dst = appendInt(dst, int64(*e.ParentBlockHash))
			}
			dst = appendArrayLen(dst, len(e.TokenIDs))
			for _, t := range e.TokenIDs {
				dst = appendUint(dst, uint64(t))
			}
			dst = appendInt(dst, int64(e.BlockSize))
			dst = appendOptInt(dst, e.LoraID)
			dst = appendMedium(dst, e.Medium)
			if e.CacheSalt != nil {
				// BlockStoredMetadata: a plain msgspec Struct, so a map.
				dst = appendMapLen(dst, 1)
				dst = appendStr(dst, "cache_salt")
				dst = appendStr(dst, *e.CacheSalt)
			}
		case *BlockRemoved:
			dst = appendArrayLen(dst, 1+len(sglangRemovedFields))
			dst = appendStr(dst, tagBlockRemoved)
			dst = appendSignedHashes(dst, e.BlockHashes)
			dst = appendMedium(dst, e.Medium)
		case *AllBlocksCleared:
			dst = appendArrayLen(dst, 1)
			dst = appendStr(dst, tagAllBlocksCleared)
		default:
			panic(fmt.Sprintf("BUG: kvevent: event type %T", ev))
		}
	}
	return appendOptInt(dst, b.DPRank)
}

// appendSignedHashes writes hashes as SGLang's int64 block ids: a hash from
// 2^63 up is the negative number with the same 64 bits.
func appendSignedHashes(dst []byte, hs []uint64) []byte {
	dst = appendArrayLen(dst, len(hs))
	for _, h := range hs {
		dst = appendInt(dst, int64(h))
	}
	return dst
}

// appendMedium writes SGLang's Optional[str] medium: nil for "".
func appendMedium(dst []byte, medium string) []byte {
	if medium == "" {
		return appendNil(dst)
	}
	return appendStr(dst, medium)
}

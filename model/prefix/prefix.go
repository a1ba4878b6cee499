// Package prefix computes chained KV block hashes.
//
// A prompt is cut into full blocks of BlockSize tokens. Each block's hash covers
// its parent's hash and its own tokens, so a hash names the whole prefix that
// ends with that block, as vLLM's prefix cache does (vllm/v1/core/kv_cache_utils.py).
// A trailing partial block is never hashed: engines only cache full blocks.
//
// prefix starts no goroutines, does no I/O and keeps no globals. The router and the
// simulator share it, so the hashes they compute agree bit for bit.
package prefix

import (
	"encoding/binary"

	"github.com/zeebo/xxh3"
)

// Hash is an XXH3-128 block hash. Its zero value is never produced by Root or
// Next in practice and serves as "no parent".
type Hash struct {
	Hi, Lo uint64
}

// External is the 64-bit value an engine publishes for this hash in KV events:
// the last eight bytes of the big-endian digest, as vLLM does with
// VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=1.
func (h Hash) External() uint64 { return h.Lo }

// IsZero reports whether h is the zero Hash.
func (h Hash) IsZero() bool { return h.Hi == 0 && h.Lo == 0 }

// Root is the parent hash of a chain's first block. It salts the chain with the
// model, the LoRA adapter (empty for the base model) and the request's
// cache_salt, so that chains of different models, adapters or tenants never
// share a hash.
func Root(model, lora, salt string) Hash {
	b := make([]byte, 0, len(model)+len(lora)+len(salt)+16)
	b = appendString(b, model)
	b = appendString(b, lora)
	b = appendString(b, salt)
	return from(xxh3.Hash128(b))
}

func appendString(b []byte, s string) []byte {
	b = binary.LittleEndian.AppendUint32(b, uint32(len(s)))
	return append(b, s...)
}

func from(u xxh3.Uint128) Hash { return Hash{Hi: u.Hi, Lo: u.Lo} }

// Hasher hashes blocks without allocating once its scratch buffer has grown to
// one block. A Hasher is not safe for concurrent use; keep one per goroutine.
type Hasher struct {
	buf []byte
}

// Next returns the hash of the block holding tokens, whose parent is parent.
func (h *Hasher) Next(parent Hash, tokens []uint32) Hash {
	if wordsOK(len(tokens)) {
		return nextWords(parent, tokens)
	}
	return h.nextBuf(parent, tokens)
}

// nextBuf is Next through a buffer of the block's bytes.
func (h *Hasher) nextBuf(parent Hash, tokens []uint32) Hash {
	need := 16 + 4*len(tokens)
	if cap(h.buf) < need {
		h.buf = make([]byte, need)
	}
	b := h.buf[:need]
	binary.LittleEndian.PutUint64(b[0:], parent.Hi)
	binary.LittleEndian.PutUint64(b[8:], parent.Lo)
	out := b[16:]
	for len(tokens) >= 2 && len(out) >= 8 {
		binary.LittleEndian.PutUint64(out, uint64(tokens[0])|uint64(tokens[1])<<32)
		tokens, out = tokens[2:], out[8:]
	}
	if len(tokens) == 1 && len(out) >= 4 {
		binary.LittleEndian.PutUint32(out, tokens[0])
	}
	return from(xxh3.Hash128(b))
}

// Chain appends to dst the hashes of every full block of tokens, starting from
// root, and returns the extended slice. Tokens past the last full block are
// ignored.
func (h *Hasher) Chain(dst []Hash, root Hash, tokens []uint32, blockSize int) []Hash {
	if blockSize <= 0 {
		return dst
	}
	parent := root
	switch {
	case blockSize == 16:
		for i := 0; i+16 <= len(tokens); i += 16 {
			parent = next16(parent, (*[16]uint32)(tokens[i:i+16]))
			dst = append(dst, parent)
		}
	case wordsOK(blockSize):
		for i := 0; i+blockSize <= len(tokens); i += blockSize {
			parent = nextWords(parent, tokens[i:i+blockSize])
			dst = append(dst, parent)
		}
	default:
		for i := 0; i+blockSize <= len(tokens); i += blockSize {
			parent = h.nextBuf(parent, tokens[i:i+blockSize])
			dst = append(dst, parent)
		}
	}
	return dst
}

// Blocks is the number of full blocks in n tokens.
func Blocks(n, blockSize int) int {
	if blockSize <= 0 {
		return 0
	}
	return n / blockSize
}

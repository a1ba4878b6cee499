// Package dump encodes and decodes a gateway instance's index snapshot,
// which GET /admin/index/snapshot serves and a new instance reads at
// startup (index.warm_start_from) to predict as its peer does from its
// first request (issue 17): each replica's KV index, least recent block
// first, and its KV event mapping with the sequence of the last batch
// applied.
//
// The format is binary and versioned:
//
//	"IRIX" | version (1 byte) | body | xxh3-64 of everything before (8 bytes, little endian)
//	body     = uvarint replicas, then per replica:
//	           uvarint len(id) | id | has-seq (1 byte) | seq (8 bytes)
//	           uvarint blocks | blocks × (hi, lo: 8 bytes each)
//	           uvarint engine blocks | engine blocks × engine block
//	engine block = uvarint rank | hash (8 bytes) | block (16 bytes) | has-parent (1 byte)
//	           | parent (8 bytes) | uvarint copies
//
// Integers of fixed size are little endian. Decode checks the checksum,
// the version and every count against the bytes left before it allocates,
// so a snapshot of n bytes never makes it hold much more than n.
//
// dump starts no goroutines, does no I/O and keeps no globals.
package dump

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/zeebo/xxh3"

	"github.com/inferrail/inferrail/model/estimate"
	"github.com/inferrail/inferrail/model/prefix"
)

// Version is the format's version. A decoder reads only its own.
const Version = 1

// magic opens every snapshot.
const magic = "IRIX"

// ContentType names the format over HTTP.
const ContentType = "application/vnd.inferrail.index-snapshot"

// DefaultMaxBytes bounds a snapshot served or read: 64 MiB holds about
// four million blocks.
const DefaultMaxBytes = 64 << 20

// Limits on what one snapshot may name.
const (
	maxID     = 1024    // bytes of a replica id
	maxRank   = 1 << 16 // data parallel ranks
	maxCopies = 1 << 24 // physical copies of one engine block
)

// Snapshot is an instance's index snapshot. It is a value its holder owns.
type Snapshot struct {
	Replicas []Replica
}

// Replica is one replica's index and KV event mapping.
type Replica struct {
	ID string
	// Seq is the sequence number of the last KV event batch applied, when
	// HasSeq.
	Seq    uint64
	HasSeq bool
	// Blocks are the index's blocks, least recent first
	// (kvindex.Index.All).
	Blocks []prefix.Hash
	// Engine is the KV event mapping's engine blocks (estimate.Events.Export).
	Engine []estimate.EngineBlock
}

// Append appends s, encoded, to dst.
func Append(dst []byte, s *Snapshot) []byte {
	start := len(dst)
	dst = append(dst, magic...)
	dst = append(dst, Version)
	dst = binary.AppendUvarint(dst, uint64(len(s.Replicas)))
	for i := range s.Replicas {
		r := &s.Replicas[i]
		dst = binary.AppendUvarint(dst, uint64(len(r.ID)))
		dst = append(dst, r.ID...)
		dst = append(dst, flag(r.HasSeq))
		dst = binary.LittleEndian.AppendUint64(dst, r.Seq)
		dst = binary.AppendUvarint(dst, uint64(len(r.Blocks)))
		for _, h := range r.Blocks {
			dst = appendHash(dst, h)
		}
		dst = binary.AppendUvarint(dst, uint64(len(r.Engine)))
		for _, b := range r.Engine {
			dst = binary.AppendUvarint(dst, uint64(b.Rank))
			dst = binary.LittleEndian.AppendUint64(dst, b.Hash)
			dst = appendHash(dst, b.Block)
			dst = append(dst, flag(b.HasParent))
			dst = binary.LittleEndian.AppendUint64(dst, b.Parent)
			dst = binary.AppendUvarint(dst, uint64(b.Copies))
		}
	}
	return append(dst[:start], appendSum(dst[start:])...)
}

func flag(b bool) byte {
	if b {
		return 1
	}
	return 0
}

func appendHash(dst []byte, h prefix.Hash) []byte {
	dst = binary.LittleEndian.AppendUint64(dst, h.Hi)
	return binary.LittleEndian.AppendUint64(dst, h.Lo)
}

// ErrTooLarge is returned for a snapshot over the size Decode allows.
var ErrTooLarge = errors.New("dump: snapshot too large")

// The smallest encodings, which bound the counts Decode accepts.
const (
	minReplica = 1 + 1 + 8 + 1 + 1 // empty id, seq, no blocks, no engine blocks
	hashSize   = 16
	minEngine  = 1 + 8 + hashSize + 1 + 8 + 1
)

// Decode decodes a snapshot of at most maxBytes bytes (DefaultMaxBytes when
// maxBytes is at most 0). It fails, naming what is wrong, on a snapshot
// that is larger, truncated, of another version, or whose checksum,
// counts, ids or flags are bad; it never panics.
func Decode(b []byte, maxBytes int) (*Snapshot, error) {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	if len(b) > maxBytes {
		return nil, fmt.Errorf("%w: %d bytes, at most %d", ErrTooLarge, len(b), maxBytes)
	}
	if len(b) < len(magic)+1+8 || string(b[:len(magic)]) != magic {
		return nil, errors.New("dump: not an index snapshot")
	}
	if v := b[len(magic)]; v != Version {
		return nil, fmt.Errorf("dump: version %d, want %d", v, Version)
	}
	body, sum := b[:len(b)-8], binary.LittleEndian.Uint64(b[len(b)-8:])
	if xxh3.Hash(body) != sum {
		return nil, errors.New("dump: checksum mismatch")
	}
	d := decoder{b: body[len(magic)+1:]}
	n := d.count("replicas", minReplica)
	s := &Snapshot{Replicas: make([]Replica, 0, n)}
	seen := make(map[string]bool, n)
	for i := 0; i < n && d.err == nil; i++ {
		var r Replica
		idLen := d.count("replica id", 1)
		if d.err == nil && idLen > maxID {
			d.fail(fmt.Errorf("replica %d: id of %d bytes, at most %d", i, idLen, maxID))
		}
		r.ID = string(d.bytes(idLen))
		if d.err == nil && seen[r.ID] {
			d.fail(fmt.Errorf("replica %q: listed twice", r.ID))
		}
		seen[r.ID] = true
		r.HasSeq = d.flag("has-seq")
		r.Seq = d.u64()
		nb := d.count("blocks", hashSize)
		if d.err == nil && nb > 0 {
			r.Blocks = make([]prefix.Hash, nb)
			for k := range r.Blocks {
				r.Blocks[k] = d.hash()
			}
		}
		ne := d.count("engine blocks", minEngine)
		if d.err == nil && ne > 0 {
			r.Engine = make([]estimate.EngineBlock, ne)
			for k := range r.Engine {
				e := &r.Engine[k]
				rank := d.uvarint()
				if d.err == nil && rank >= maxRank {
					d.fail(fmt.Errorf("replica %q: rank %d, at most %d", r.ID, rank, maxRank-1))
				}
				e.Rank = int(rank)
				e.Hash = d.u64()
				e.Block = d.hash()
				e.HasParent = d.flag("has-parent")
				e.Parent = d.u64()
				c := d.uvarint()
				if d.err == nil && (c < 1 || c > maxCopies) {
					d.fail(fmt.Errorf("replica %q: %d copies of an engine block, want 1 to %d", r.ID, c, maxCopies))
				}
				e.Copies = int(c)
			}
		}
		s.Replicas = append(s.Replicas, r)
	}
	if d.err == nil && len(d.b) > 0 {
		d.fail(fmt.Errorf("%d bytes after the last replica", len(d.b)))
	}
	if d.err != nil {
		return nil, fmt.Errorf("dump: %w", d.err)
	}
	return s, nil
}

// decoder reads a body, keeping the first error; once failed, it reads
// zeros.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(err error) {
	if d.err == nil {
		d.err = err
	}
	d.b = nil
}

var errTruncated = errors.New("truncated")

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail(errTruncated)
		return 0
	}
	if n != uvarintLen(v) {
		d.fail(errors.New("a number not in its shortest form"))
		return 0
	}
	d.b = d.b[n:]
	return v
}

// count reads a count of items that take at least size bytes each, and
// fails when the bytes left cannot hold them.
func (d *decoder) count(what string, size int) int {
	v := d.uvarint()
	if d.err == nil && v > uint64(len(d.b)/size) {
		d.fail(fmt.Errorf("%s: %d, more than the %d bytes left can hold", what, v, len(d.b)))
		return 0
	}
	return int(v)
}

func (d *decoder) bytes(n int) []byte {
	if d.err != nil {
		return nil
	}
	if len(d.b) < n {
		d.fail(errTruncated)
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) u64() uint64 {
	if v := d.bytes(8); v != nil {
		return binary.LittleEndian.Uint64(v)
	}
	return 0
}

func (d *decoder) flag(what string) bool {
	v := d.bytes(1)
	if v == nil {
		return false
	}
	if v[0] > 1 {
		d.fail(fmt.Errorf("%s: %d, want 0 or 1", what, v[0]))
	}
	return v[0] == 1
}

func (d *decoder) hash() prefix.Hash {
	return prefix.Hash{Hi: d.u64(), Lo: d.u64()}
}

// appendSum appends the checksum of b to it.
func appendSum(b []byte) []byte { return binary.LittleEndian.AppendUint64(b, xxh3.Hash(b)) }

// uvarintLen is the length of v's shortest uvarint encoding, the only one
// Decode accepts, so that every snapshot has one encoding.
func uvarintLen(v uint64) int {
	n := 1
	for ; v >= 0x80; v >>= 7 {
		n++
	}
	return n
}

package kvevent

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// A minimal msgpack writer and reader (https://github.com/msgpack/msgpack/blob/master/spec.md).
//
// The writer emits the forms msgspec.msgpack.Encoder and msgpack-python
// (use_bin_type=True) choose: the smallest integer form, float64 for floats,
// str8/16/32 for strings, array16/32 and map16/32 past 15 entries.
//
// The reader never trusts a length prefix: every element needs at least one
// byte, so a container claiming more elements than bytes left is rejected
// before anything is allocated.

// ErrMalformed reports input that is not a well-formed KV event batch.
var ErrMalformed = errors.New("kvevent: malformed batch")

// ErrUnknownEvent reports an event whose type tag kvevent does not know.
var ErrUnknownEvent = errors.New("kvevent: unknown event type")

func appendNil(b []byte) []byte { return append(b, 0xc0) }

func appendUint(b []byte, v uint64) []byte {
	switch {
	case v <= 0x7f:
		return append(b, byte(v))
	case v <= math.MaxUint8:
		return append(b, 0xcc, byte(v))
	case v <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(b, 0xcd), uint16(v))
	case v <= math.MaxUint32:
		return binary.BigEndian.AppendUint32(append(b, 0xce), uint32(v))
	default:
		return binary.BigEndian.AppendUint64(append(b, 0xcf), v)
	}
}

func appendInt(b []byte, v int64) []byte {
	switch {
	case v >= 0:
		return appendUint(b, uint64(v))
	case v >= -32:
		return append(b, byte(v)) // negative fixint
	case v >= math.MinInt8:
		return append(b, 0xd0, byte(v))
	case v >= math.MinInt16:
		return binary.BigEndian.AppendUint16(append(b, 0xd1), uint16(v))
	case v >= math.MinInt32:
		return binary.BigEndian.AppendUint32(append(b, 0xd2), uint32(v))
	default:
		return binary.BigEndian.AppendUint64(append(b, 0xd3), uint64(v))
	}
}

func appendFloat64(b []byte, f float64) []byte {
	return binary.BigEndian.AppendUint64(append(b, 0xcb), math.Float64bits(f))
}

func appendStr(b []byte, s string) []byte {
	n := len(s)
	switch {
	case n <= 31:
		b = append(b, 0xa0|byte(n))
	case n <= math.MaxUint8:
		b = append(b, 0xd9, byte(n))
	case n <= math.MaxUint16:
		b = binary.BigEndian.AppendUint16(append(b, 0xda), uint16(n))
	default:
		b = binary.BigEndian.AppendUint32(append(b, 0xdb), uint32(n))
	}
	return append(b, s...)
}

func appendArrayLen(b []byte, n int) []byte {
	switch {
	case n <= 15:
		return append(b, 0x90|byte(n))
	case n <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(b, 0xdc), uint16(n))
	default:
		return binary.BigEndian.AppendUint32(append(b, 0xdd), uint32(n))
	}
}

func appendMapLen(b []byte, n int) []byte {
	switch {
	case n <= 15:
		return append(b, 0x80|byte(n))
	case n <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(b, 0xde), uint16(n))
	default:
		return binary.BigEndian.AppendUint32(append(b, 0xdf), uint32(n))
	}
}

func appendOptInt(b []byte, v *int) []byte {
	if v == nil {
		return appendNil(b)
	}
	return appendInt(b, int64(*v))
}

func appendOptStr(b []byte, s *string) []byte {
	if s == nil {
		return appendNil(b)
	}
	return appendStr(b, *s)
}

func appendOptUint(b []byte, v *uint64) []byte {
	if v == nil {
		return appendNil(b)
	}
	return appendUint(b, *v)
}

func appendRaw(b []byte, r Raw) []byte {
	if r == nil {
		return appendNil(b)
	}
	return append(b, r...)
}

// reader decodes msgpack from b, advancing past what it consumed. sglang
// reads SGLang's event schema instead of vLLM's.
type reader struct {
	b      []byte
	off    int
	sglang bool
}

func (r *reader) errf(format string, args ...any) error {
	return fmt.Errorf("%w: offset %d: %s", ErrMalformed, r.off, fmt.Sprintf(format, args...))
}

func (r *reader) left() int { return len(r.b) - r.off }

func (r *reader) peek() (byte, error) {
	if r.off >= len(r.b) {
		return 0, r.errf("unexpected end of input")
	}
	return r.b[r.off], nil
}

// take consumes n bytes.
func (r *reader) take(n int) ([]byte, error) {
	if n < 0 || n > r.left() {
		return nil, r.errf("need %d bytes, have %d", n, r.left())
	}
	p := r.b[r.off : r.off+n]
	r.off += n
	return p, nil
}

func (r *reader) uintN(n int) (uint64, error) {
	p, err := r.take(n)
	if err != nil {
		return 0, err
	}
	var v uint64
	for _, c := range p {
		v = v<<8 | uint64(c)
	}
	return v, nil
}

// nilNext consumes a nil if one comes next.
func (r *reader) nilNext() bool {
	if r.off < len(r.b) && r.b[r.off] == 0xc0 {
		r.off++
		return true
	}
	return false
}

// length reads an element count and checks that at least perElem bytes per
// element remain, so no claimed length can make a caller over-allocate.
func (r *reader) length(n uint64, perElem int) (int, error) {
	if n > uint64(r.left()/perElem) {
		return 0, r.errf("length %d exceeds remaining %d bytes", n, r.left())
	}
	return int(n), nil
}

// arrayLen reads an array header.
func (r *reader) arrayLen() (int, error) {
	c, err := r.peek()
	if err != nil {
		return 0, err
	}
	var n uint64
	switch {
	case c&0xf0 == 0x90:
		r.off++
		n = uint64(c & 0x0f)
	case c == 0xdc:
		r.off++
		if n, err = r.uintN(2); err != nil {
			return 0, err
		}
	case c == 0xdd:
		r.off++
		if n, err = r.uintN(4); err != nil {
			return 0, err
		}
	default:
		return 0, r.errf("want array, got 0x%02x", c)
	}
	return r.length(n, 1)
}

// mapLen reads a map header.
func (r *reader) mapLen() (int, error) {
	c, err := r.peek()
	if err != nil {
		return 0, err
	}
	var n uint64
	switch {
	case c&0xf0 == 0x80:
		r.off++
		n = uint64(c & 0x0f)
	case c == 0xde:
		r.off++
		if n, err = r.uintN(2); err != nil {
			return 0, err
		}
	case c == 0xdf:
		r.off++
		if n, err = r.uintN(4); err != nil {
			return 0, err
		}
	default:
		return 0, r.errf("want map, got 0x%02x", c)
	}
	return r.length(n, 2)
}

// strBytes reads a str (or bin, which some encoders use for text) and returns
// a slice of the input; callers copy what they keep.
func (r *reader) strBytes() ([]byte, error) {
	c, err := r.peek()
	if err != nil {
		return nil, err
	}
	var n uint64
	switch {
	case c&0xe0 == 0xa0:
		r.off++
		n = uint64(c & 0x1f)
	case c == 0xd9 || c == 0xc4:
		r.off++
		n, err = r.uintN(1)
	case c == 0xda || c == 0xc5:
		r.off++
		n, err = r.uintN(2)
	case c == 0xdb || c == 0xc6:
		r.off++
		n, err = r.uintN(4)
	default:
		return nil, r.errf("want str, got 0x%02x", c)
	}
	if err != nil {
		return nil, err
	}
	if n > uint64(r.left()) {
		return nil, r.errf("str length %d exceeds remaining %d bytes", n, r.left())
	}
	return r.take(int(n))
}

func (r *reader) str() (string, error) {
	p, err := r.strBytes()
	return string(p), err
}

// integer reads any msgpack integer. Values of int64 range come back in i with
// neg set when negative; uint64 values above MaxInt64 set big and leave the
// value in u. For non-negative values u == uint64(i).
type integer struct {
	u   uint64
	neg bool
}

func (r *reader) integer() (integer, error) {
	c, err := r.peek()
	if err != nil {
		return integer{}, err
	}
	r.off++
	switch {
	case c <= 0x7f:
		return integer{u: uint64(c)}, nil
	case c >= 0xe0:
		return integer{u: uint64(int64(int8(c))), neg: true}, nil
	}
	var size int
	signed := false
	switch c {
	case 0xcc:
		size = 1
	case 0xcd:
		size = 2
	case 0xce:
		size = 4
	case 0xcf:
		size = 8
	case 0xd0:
		size, signed = 1, true
	case 0xd1:
		size, signed = 2, true
	case 0xd2:
		size, signed = 4, true
	case 0xd3:
		size, signed = 8, true
	default:
		r.off--
		return integer{}, r.errf("want integer, got 0x%02x", c)
	}
	v, err := r.uintN(size)
	if err != nil {
		return integer{}, err
	}
	if !signed {
		return integer{u: v}, nil
	}
	shift := 64 - 8*size
	s := int64(v<<shift) >> shift // sign-extend
	return integer{u: uint64(s), neg: s < 0}, nil
}

// int reads an integer that must fit Go's int.
func (r *reader) int() (int, error) {
	start := r.off
	v, err := r.integer()
	if err != nil {
		return 0, err
	}
	i := int64(v.u)
	if !v.neg && v.u > math.MaxInt64 || int64(int(i)) != i {
		r.off = start
		return 0, r.errf("integer out of range")
	}
	return int(i), nil
}

// hash reads a block hash: an int (negative ones wrap to their two's
// complement, as `& (2**64-1)` would) or a bin/str digest, of which the last
// eight bytes are read big-endian as vLLM's int.from_bytes(digest, "big") &
// (2**64-1) does.
func (r *reader) hash() (uint64, error) {
	c, err := r.peek()
	if err != nil {
		return 0, err
	}
	if c == 0xc4 || c == 0xc5 || c == 0xc6 {
		p, err := r.strBytes()
		if err != nil {
			return 0, err
		}
		if len(p) > 8 {
			p = p[len(p)-8:]
		}
		var v uint64
		for _, c := range p {
			v = v<<8 | uint64(c)
		}
		return v, nil
	}
	v, err := r.integer()
	return v.u, err
}

// float reads a float32, float64 or integer as float64.
func (r *reader) float() (float64, error) {
	c, err := r.peek()
	if err != nil {
		return 0, err
	}
	switch c {
	case 0xcb:
		r.off++
		v, err := r.uintN(8)
		return math.Float64frombits(v), err
	case 0xca:
		r.off++
		v, err := r.uintN(4)
		return float64(math.Float32frombits(uint32(v))), err
	}
	v, err := r.integer()
	if err != nil {
		return 0, err
	}
	if v.neg {
		return float64(int64(v.u)), nil
	}
	return float64(v.u), nil
}

// skip consumes one value of any type, nested containers included, without
// recursion: pending counts the values still to consume.
func (r *reader) skip() error {
	for pending := 1; pending > 0; pending-- {
		c, err := r.peek()
		if err != nil {
			return err
		}
		r.off++
		var (
			size  int    // bytes of payload that follow the header
			lenN  int    // bytes of a length field
			elems uint64 // child values (a map entry counts twice)
		)
		switch {
		case c <= 0x7f, c >= 0xe0, c == 0xc0, c == 0xc2, c == 0xc3:
		case c&0xf0 == 0x80:
			elems = 2 * uint64(c&0x0f)
		case c&0xf0 == 0x90:
			elems = uint64(c & 0x0f)
		case c&0xe0 == 0xa0:
			size = int(c & 0x1f)
		default:
			switch c {
			case 0xcc, 0xd0:
				size = 1
			case 0xcd, 0xd1:
				size = 2
			case 0xce, 0xd2, 0xca:
				size = 4
			case 0xcf, 0xd3, 0xcb:
				size = 8
			case 0xc4, 0xd9: // bin8, str8
				lenN = 1
			case 0xc5, 0xda:
				lenN = 2
			case 0xc6, 0xdb:
				lenN = 4
			case 0xd4: // fixext1..16: type byte + data
				size = 2
			case 0xd5:
				size = 3
			case 0xd6:
				size = 5
			case 0xd7:
				size = 9
			case 0xd8:
				size = 17
			case 0xc7, 0xc8, 0xc9: // ext8/16/32: length, type byte, data
				n, err := r.uintN(1 << (c - 0xc7))
				if err != nil {
					return err
				}
				if n+1 > uint64(r.left()) {
					return r.errf("ext length %d exceeds input", n)
				}
				size = int(n) + 1
			case 0xdc, 0xdd:
				n, err := r.uintN(2 << (c - 0xdc))
				if err != nil {
					return err
				}
				elems = n
			case 0xde, 0xdf:
				n, err := r.uintN(2 << (c - 0xde))
				if err != nil {
					return err
				}
				elems = 2 * n
			default: // 0xc1 is never used
				r.off--
				return r.errf("invalid type byte 0x%02x", c)
			}
		}
		if lenN > 0 {
			n, err := r.uintN(lenN)
			if err != nil {
				return err
			}
			if n > uint64(r.left()) {
				return r.errf("length %d exceeds input", n)
			}
			size = int(n)
		}
		if _, err := r.take(size); err != nil {
			return err
		}
		// Every pending value needs at least one byte; this bounds pending
		// by the input length, so it cannot overflow.
		if elems > uint64(r.left()) || uint64(pending-1)+elems > uint64(r.left()) {
			return r.errf("container of %d values exceeds input", elems)
		}
		pending += int(elems)
	}
	return nil
}

// raw consumes one value and returns a copy of its encoding, or nil for nil.
func (r *reader) raw() (Raw, error) {
	if r.nilNext() {
		return nil, nil
	}
	start := r.off
	if err := r.skip(); err != nil {
		return nil, err
	}
	return append(Raw(nil), r.b[start:r.off]...), nil
}

package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// This file holds a small JSON reader that accepts what Python's json.loads
// accepts (the body parser behind FastAPI): RFC 8259 plus the NaN, Infinity
// and -Infinity literals, and the writers that escape strings the way vLLM's
// serializers do.

// kind is the type of a JSON value as the reader found it.
type kind uint8

const (
	kNone   kind = iota // absent
	kNull               // null
	kBool               // true / false
	kNumber             // number, NaN, Infinity, -Infinity
	kString             // "..."
	kArray              // [...]
	kObject             // {...}
)

// span is one JSON value inside the request body: b[start:end].
type span struct {
	start, end int
	kind       kind
}

// maxDepth bounds nesting. CPython's json decoder fails with RecursionError
// near 1000 levels, which FastAPI turns into "There was an error parsing the
// body"; the bound also keeps the recursive reader's stack small.
const maxDepth = 1000

// syntaxError is a JSON decode error at a byte offset of the body.
type syntaxError struct {
	off int
	msg string
}

// reader walks a JSON document held in b.
type reader struct {
	b     []byte
	i     int
	depth int
	err   *syntaxError
	deep  bool // nesting exceeded maxDepth
}

func (r *reader) fail(msg string) {
	if r.err == nil {
		r.err = &syntaxError{off: r.i, msg: msg}
	}
}

func (r *reader) ws() {
	for r.i < len(r.b) {
		switch r.b[r.i] {
		case ' ', '\t', '\n', '\r':
			r.i++
		default:
			return
		}
	}
}

// value reads one value starting at r.i (after whitespace) and returns its span.
func (r *reader) value() span {
	r.ws()
	if r.i >= len(r.b) {
		r.fail("Expecting value")
		return span{}
	}
	start := r.i
	switch c := r.b[r.i]; {
	case c == '{':
		r.object(nil)
		return span{start, r.i, kObject}
	case c == '[':
		r.array(nil)
		return span{start, r.i, kArray}
	case c == '"':
		r.str()
		return span{start, r.i, kString}
	case c == 't':
		r.lit("true")
		return span{start, r.i, kBool}
	case c == 'f':
		r.lit("false")
		return span{start, r.i, kBool}
	case c == 'n':
		r.lit("null")
		return span{start, r.i, kNull}
	case c == 'N':
		r.lit("NaN")
		return span{start, r.i, kNumber}
	case c == 'I':
		r.lit("Infinity")
		return span{start, r.i, kNumber}
	case c == '-' || (c >= '0' && c <= '9'):
		r.number()
		return span{start, r.i, kNumber}
	default:
		r.fail("Expecting value")
		return span{}
	}
}

func (r *reader) lit(w string) {
	if len(r.b)-r.i >= len(w) && string(r.b[r.i:r.i+len(w)]) == w {
		r.i += len(w)
		return
	}
	r.fail("Expecting value")
}

func (r *reader) number() {
	b := r.b
	start := r.i
	if b[r.i] == '-' {
		r.i++
		if len(b)-r.i >= 8 && string(b[r.i:r.i+8]) == "Infinity" {
			r.i += 8
			return
		}
	}
	digits := func() int {
		n := 0
		for r.i < len(b) && b[r.i] >= '0' && b[r.i] <= '9' {
			r.i++
			n++
		}
		return n
	}
	if r.i < len(b) && b[r.i] == '0' {
		r.i++
	} else if digits() == 0 {
		r.i = start
		r.fail("Expecting value")
		return
	}
	if r.i < len(b) && b[r.i] == '.' {
		save := r.i
		r.i++
		if digits() == 0 {
			// Python stops the number before a bare '.', which then fails
			// as an unexpected delimiter.
			r.i = save
			return
		}
	}
	if r.i < len(b) && (b[r.i] == 'e' || b[r.i] == 'E') {
		save := r.i
		r.i++
		if r.i < len(b) && (b[r.i] == '+' || b[r.i] == '-') {
			r.i++
		}
		if digits() == 0 {
			r.i = save
		}
	}
}

// str reads a string and validates its escapes and characters.
func (r *reader) str() {
	b := r.b
	open := r.i
	r.i++ // opening quote
	for r.i < len(b) {
		for r.i < len(b) && plain[b[r.i]] {
			r.i++
		}
		if r.i >= len(b) {
			break
		}
		c := b[r.i]
		switch {
		case c == '"':
			r.i++
			return
		case c == '\\':
			if r.i+1 >= len(b) {
				r.i = open
				r.fail("Unterminated string starting at")
				return
			}
			switch b[r.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				r.i += 2
			case 'u':
				if r.i+6 > len(b) || !isHex4(b[r.i+2:r.i+6]) {
					r.i++ // Python reports the character after the backslash
					r.fail("Invalid \\uXXXX escape")
					return
				}
				r.i += 6
			default:
				r.fail("Invalid \\escape")
				return
			}
		case c < 0x20:
			r.fail("Invalid control character at")
			return
		default:
			r.i++
		}
	}
	r.i = open
	r.fail("Unterminated string starting at")
}

// plain marks the bytes a string can hold as they are: not '"', '\\' or a
// C0 control character.
var plain = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

func isHex4(b []byte) bool {
	for _, c := range b {
		if !isHex(c) {
			return false
		}
	}
	return true
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

// object reads an object; for each member it calls member with the key's
// span and the value's span, if member is not nil.
func (r *reader) object(member func(key, val span)) {
	if r.depth++; r.depth > maxDepth {
		r.deep = true
		r.fail("too deep")
		return
	}
	defer func() { r.depth-- }()
	r.i++ // '{'
	r.ws()
	if r.i < len(r.b) && r.b[r.i] == '}' {
		r.i++
		return
	}
	for r.err == nil {
		r.ws()
		if r.i >= len(r.b) || r.b[r.i] != '"' {
			r.fail("Expecting property name enclosed in double quotes")
			return
		}
		ks := r.i
		r.str()
		key := span{ks, r.i, kString}
		r.ws()
		if r.i >= len(r.b) || r.b[r.i] != ':' {
			r.fail("Expecting ':' delimiter")
			return
		}
		r.i++
		val := r.value()
		if r.err != nil {
			return
		}
		if member != nil {
			member(key, val)
		}
		r.ws()
		if r.i >= len(r.b) {
			r.fail("Expecting ',' delimiter")
			return
		}
		switch r.b[r.i] {
		case ',':
			r.i++
		case '}':
			r.i++
			return
		default:
			r.fail("Expecting ',' delimiter")
			return
		}
	}
}

// array reads an array, calling elem for each element if elem is not nil.
func (r *reader) array(elem func(val span)) {
	if r.depth++; r.depth > maxDepth {
		r.deep = true
		r.fail("too deep")
		return
	}
	defer func() { r.depth-- }()
	r.i++ // '['
	r.ws()
	if r.i < len(r.b) && r.b[r.i] == ']' {
		r.i++
		return
	}
	for r.err == nil {
		val := r.value()
		if r.err != nil {
			return
		}
		if elem != nil {
			elem(val)
		}
		r.ws()
		if r.i >= len(r.b) {
			r.fail("Expecting ',' delimiter")
			return
		}
		switch r.b[r.i] {
		case ',':
			r.i++
		case ']':
			r.i++
			return
		default:
			r.fail("Expecting ',' delimiter")
			return
		}
	}
}

// each calls fn for every element of the array at s, which must already have
// been validated by the reader.
func each(b []byte, s span, fn func(i int, v span)) {
	r := reader{b: b[:s.end], i: s.start}
	i := 0
	r.array(func(v span) { fn(i, v); i++ })
}

// members calls fn for every member of the (validated) object at s. key
// aliases the body when it has no escapes, so callers compare it with
// switch string(key), which does not allocate, and must not keep it.
func members(b []byte, s span, fn func(key []byte, v span)) {
	r := reader{b: b[:s.end], i: s.start}
	r.object(func(k, v span) {
		if raw, ok := rawKey(b, k); ok {
			fn(raw, v)
			return
		}
		fn([]byte(decodeString(b[k.start:k.end])), v)
	})
}

// rawKey returns the key bytes between the quotes when the key has no
// escapes, so a switch on string(rawKey) allocates nothing.
func rawKey(b []byte, k span) ([]byte, bool) {
	in := b[k.start+1 : k.end-1]
	return in, bytes.IndexByte(in, '\\') < 0
}

// decodeString decodes a validated JSON string literal (with quotes). Lone
// UTF-16 surrogates decode to U+FFFD; Python would keep them as lone
// surrogates in a str, which cannot round-trip through UTF-8 anyway.
func decodeString(q []byte) string {
	in := q[1 : len(q)-1]
	esc := bytes.IndexByte(in, '\\')
	if esc < 0 {
		return string(in)
	}
	out := make([]byte, 0, len(in))
	out = append(out, in[:esc]...)
	for i := esc; i < len(in); {
		c := in[i]
		if c != '\\' {
			out = append(out, c)
			i++
			continue
		}
		switch in[i+1] {
		case '"', '\\', '/':
			out = append(out, in[i+1])
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r1 := rune(hex4(in[i+2 : i+6]))
			i += 6
			if utf16.IsSurrogate(r1) {
				if i+6 <= len(in) && in[i] == '\\' && in[i+1] == 'u' {
					r2 := rune(hex4(in[i+2 : i+6]))
					if dec := utf16.DecodeRune(r1, r2); dec != utf8.RuneError {
						out = utf8.AppendRune(out, dec)
						i += 6
						continue
					}
				}
				r1 = utf8.RuneError
			}
			out = utf8.AppendRune(out, r1)
			continue
		}
		i += 2
	}
	return string(out)
}

func hex4(b []byte) uint16 {
	var v uint16
	for _, c := range b {
		v <<= 4
		switch {
		case c >= '0' && c <= '9':
			v |= uint16(c - '0')
		case c >= 'a' && c <= 'f':
			v |= uint16(c-'a') + 10
		default:
			v |= uint16(c-'A') + 10
		}
	}
	return v
}

// truthy is Python's bool() of a raw JSON value, which vLLM's "before"
// validators apply to the request dict (data.get("stream") and so on).
func truthy(b []byte, s span) bool {
	switch s.kind {
	case kBool:
		return b[s.start] == 't'
	case kNumber:
		f, ok := numberValue(b[s.start:s.end])
		return ok && f != 0 // NaN is truthy in Python; numberValue maps it to ok && NaN != 0
	case kString:
		return s.end-s.start > 2
	case kArray, kObject:
		r := reader{b: b[:s.end], i: s.start + 1}
		r.ws()
		return r.i < s.end-1
	}
	return false
}

// numberValue parses a JSON number literal (including NaN / ±Infinity).
func numberValue(lit []byte) (float64, bool) {
	f, err := strconv.ParseFloat(string(lit), 64)
	if err != nil {
		if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
			return f, true // ±Inf or 0 on overflow/underflow, as Python's float()
		}
		return 0, false
	}
	return f, true
}

// isIntLiteral reports whether a JSON number literal is an integer in
// Python's json (no fraction, no exponent, not NaN/Infinity).
func isIntLiteral(lit []byte) bool {
	for _, c := range lit {
		if c == '.' || c == 'e' || c == 'E' || c == 'N' || c == 'I' {
			return false
		}
	}
	return true
}

// ---- writers ----

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string literal escaped as Python's
// json.dumps(ensure_ascii=False) and pydantic-core's model_dump_json do:
// ", \, \b, \f, \n, \r, \t get short escapes, other C0 controls \u00XX with
// lower-case hex, and everything else (DEL, non-ASCII, U+2028, <, >, &) is
// written as is. Invalid UTF-8 becomes U+FFFD, one per invalid byte (Python
// text is always valid Unicode, so vLLM never emits invalid UTF-8).
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	dst = appendEscaped(dst, s)
	return append(dst, '"')
}

// AppendString appends s as a JSON string the way vLLM's Python writes
// it (appendString): for the other packages' writers of vLLM's answers.
func AppendString(dst []byte, s string) []byte { return appendString(dst, s) }

// appendEscaped is appendString without the quotes.
func appendEscaped(dst []byte, s string) []byte {
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r != utf8.RuneError || size != 1 {
				i += size
				continue
			}
			dst = append(dst, s[start:i]...)
			dst = append(dst, "\uFFFD"...)
			i++
			start = i
			continue
		}
		dst = append(dst, s[start:i]...)
		dst = appendShortEscape(dst, c)
		i++
		start = i
	}
	return append(dst, s[start:]...)
}

func appendShortEscape(dst []byte, c byte) []byte {
	switch c {
	case '"':
		return append(dst, '\\', '"')
	case '\\':
		return append(dst, '\\', '\\')
	case '\b':
		return append(dst, '\\', 'b')
	case '\f':
		return append(dst, '\\', 'f')
	case '\n':
		return append(dst, '\\', 'n')
	case '\r':
		return append(dst, '\\', 'r')
	case '\t':
		return append(dst, '\\', 't')
	}
	return append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
}

// appendStringASCII appends s escaped as Python's json.dumps with its
// default ensure_ascii=True: as appendString, plus every character outside
// space..'~' (DEL and all non-ASCII) as \uXXXX, astral characters as a
// surrogate pair.
func appendStringASCII(dst []byte, s string) []byte {
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c < 0x7f && c != '"' && c != '\\' {
			dst = append(dst, c)
			i++
			continue
		}
		if c < 0x7f {
			dst = appendShortEscape(dst, c)
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		if r >= 0x10000 {
			r1, r2 := utf16.EncodeRune(r)
			dst = appendU4(dst, uint16(r1))
			dst = appendU4(dst, uint16(r2))
			continue
		}
		dst = appendU4(dst, uint16(r))
	}
	return append(dst, '"')
}

func appendU4(dst []byte, v uint16) []byte {
	return append(dst, '\\', 'u', hexDigits[v>>12], hexDigits[v>>8&0xf], hexDigits[v>>4&0xf], hexDigits[v&0xf])
}

// appendNullString appends s as a string, or null when s is empty.
func appendNullString(dst []byte, s string) []byte {
	if s == "" {
		return append(dst, "null"...)
	}
	return appendString(dst, s)
}

// AppendPythonJSON appends the JSON value raw as vLLM writes a value it
// has read into Python (json.dumps(json.loads(raw), ensure_ascii=False,
// separators=(",", ":")), or pydantic's dump of a dict): compact, members
// in their order, strings escaped as appendString does, integers as they
// are and other numbers as Python's float repr (1.50 as 1.5, 1e5 as
// 100000.0, 1e-5 as 1e-05). It fails on invalid JSON.
func AppendPythonJSON(dst []byte, raw []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	type frame struct {
		object bool
		n      int // tokens written in it
	}
	var stack []frame
	wrote := false
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			if len(stack) > 0 || !wrote {
				return dst, io.ErrUnexpectedEOF
			}
			return dst, nil
		}
		wrote = true
		if err != nil {
			return dst, err
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			stack = stack[:len(stack)-1]
			dst = append(dst, byte(d))
			continue
		}
		if len(stack) > 0 {
			f := &stack[len(stack)-1]
			switch {
			case f.object && f.n%2 == 1:
				dst = append(dst, ':')
			case f.n > 0:
				dst = append(dst, ',')
			}
			f.n++
		}
		switch v := tok.(type) {
		case json.Delim:
			dst = append(dst, byte(v))
			stack = append(stack, frame{object: v == '{'})
		case string:
			dst = appendString(dst, v)
		case json.Number:
			dst = appendPythonNumber(dst, string(v))
		case bool:
			dst = strconv.AppendBool(dst, v)
		case nil:
			dst = append(dst, "null"...)
		}
		if len(stack) == 0 && dec.More() {
			return dst, errors.New("JSON: more than one value")
		}
	}
}

// appendPythonNumber writes a JSON number as Python reads and writes it:
// an integer literal unchanged, any other as float repr (shortest digits,
// ".0" on integral values, an exponent below 1e-4 and from 1e16).
func appendPythonNumber(dst []byte, lit string) []byte {
	if !strings.ContainsAny(lit, ".eE") {
		if lit == "-0" {
			lit = "0"
		}
		return append(dst, lit...)
	}
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil { // out of range: Python reads inf, which json.dumps writes so
		if strings.HasPrefix(lit, "-") {
			return append(dst, "-Infinity"...)
		}
		return append(dst, "Infinity"...)
	}
	if a := math.Abs(f); a != 0 && (a < 1e-4 || a >= 1e16) {
		return strconv.AppendFloat(dst, f, 'e', -1, 64)
	}
	start := len(dst)
	dst = strconv.AppendFloat(dst, f, 'f', -1, 64)
	if !bytes.ContainsRune(dst[start:], '.') {
		dst = append(dst, ".0"...)
	}
	return dst
}

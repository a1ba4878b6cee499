package template

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/big"
	"sort"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// maxJSONDepth mirrors the depth at which CPython's json.loads gives up
// (RecursionError) on nested arrays and objects.
const maxJSONDepth = 1000

// ParseJSON decodes JSON text the way Python's json.loads does, into template
// values: objects become *Dict in document order (a repeated key keeps its
// first position and takes its last value), integers stay integers of any
// size, numbers with a fraction or exponent become floats, and NaN, Infinity
// and -Infinity are accepted. Lone UTF-16 surrogates in \u escapes become
// U+FFFD (a Go string cannot hold them).
func ParseJSON(data []byte) (Value, error) {
	if !utf8.Valid(data) {
		return nil, valueErrorf("json: invalid UTF-8")
	}
	p := jsonParser{s: data}
	p.ws()
	v, err := p.value(0)
	if err != nil {
		return nil, err
	}
	p.ws()
	if p.i != len(p.s) {
		return nil, p.fail("Extra data")
	}
	return v, nil
}

type jsonParser struct {
	s []byte
	i int
}

func (p *jsonParser) fail(msg string) error {
	return valueErrorf("json: %s: char %d", msg, p.i)
}

func (p *jsonParser) ws() {
	for p.i < len(p.s) {
		switch p.s[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *jsonParser) lit(word string) bool {
	if strings.HasPrefix(string(p.s[p.i:min(len(p.s), p.i+len(word))]), word) {
		p.i += len(word)
		return true
	}
	return false
}

func (p *jsonParser) value(depth int) (Value, error) {
	if p.i >= len(p.s) {
		return nil, p.fail("Expecting value")
	}
	switch c := p.s[p.i]; {
	case c == '{':
		if depth >= maxJSONDepth {
			return nil, p.fail("maximum nesting depth exceeded")
		}
		return p.object(depth + 1)
	case c == '[':
		if depth >= maxJSONDepth {
			return nil, p.fail("maximum nesting depth exceeded")
		}
		return p.array(depth + 1)
	case c == '"':
		return p.str()
	case c == 'n' && p.lit("null"):
		return nil, nil
	case c == 't' && p.lit("true"):
		return true, nil
	case c == 'f' && p.lit("false"):
		return false, nil
	case c == 'N' && p.lit("NaN"):
		return math.NaN(), nil
	case c == 'I' && p.lit("Infinity"):
		return math.Inf(1), nil
	case c == '-' && p.lit("-Infinity"):
		return math.Inf(-1), nil
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	}
	return nil, p.fail("Expecting value")
}

func (p *jsonParser) object(depth int) (Value, error) {
	p.i++
	d := NewDict(4)
	p.ws()
	if p.i < len(p.s) && p.s[p.i] == '}' {
		p.i++
		return d, nil
	}
	for {
		p.ws()
		if p.i >= len(p.s) || p.s[p.i] != '"' {
			return nil, p.fail("Expecting property name enclosed in double quotes")
		}
		k, err := p.str()
		if err != nil {
			return nil, err
		}
		p.ws()
		if p.i >= len(p.s) || p.s[p.i] != ':' {
			return nil, p.fail("Expecting ':' delimiter")
		}
		p.i++
		p.ws()
		v, err := p.value(depth)
		if err != nil {
			return nil, err
		}
		d.SetString(k.(string), v)
		p.ws()
		if p.i < len(p.s) && p.s[p.i] == ',' {
			p.i++
			continue
		}
		if p.i < len(p.s) && p.s[p.i] == '}' {
			p.i++
			return d, nil
		}
		return nil, p.fail("Expecting ',' delimiter")
	}
}

func (p *jsonParser) array(depth int) (Value, error) {
	p.i++
	l := List{}
	p.ws()
	if p.i < len(p.s) && p.s[p.i] == ']' {
		p.i++
		return l, nil
	}
	for {
		p.ws()
		v, err := p.value(depth)
		if err != nil {
			return nil, err
		}
		l = append(l, v)
		p.ws()
		if p.i < len(p.s) && p.s[p.i] == ',' {
			p.i++
			continue
		}
		if p.i < len(p.s) && p.s[p.i] == ']' {
			p.i++
			return l, nil
		}
		return nil, p.fail("Expecting ',' delimiter")
	}
}

func (p *jsonParser) number() (Value, error) {
	start := p.i
	if p.s[p.i] == '-' {
		p.i++
	}
	digits := func() int {
		n := 0
		for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
			p.i++
			n++
		}
		return n
	}
	if p.i < len(p.s) && p.s[p.i] == '0' {
		p.i++
	} else if digits() == 0 {
		p.i = start
		return nil, p.fail("Expecting value")
	}
	isFloat := false
	if p.i+1 < len(p.s) && p.s[p.i] == '.' && p.s[p.i+1] >= '0' && p.s[p.i+1] <= '9' {
		p.i++
		digits()
		isFloat = true
	}
	if p.i < len(p.s) && (p.s[p.i] == 'e' || p.s[p.i] == 'E') {
		save := p.i
		p.i++
		if p.i < len(p.s) && (p.s[p.i] == '+' || p.s[p.i] == '-') {
			p.i++
		}
		if digits() == 0 {
			p.i = save
		} else {
			isFloat = true
		}
	}
	text := string(p.s[start:p.i])
	if isFloat {
		f, err := strconv.ParseFloat(text, 64)
		if err != nil && !math.IsInf(f, 0) {
			return nil, p.fail("bad number")
		}
		return f, nil
	}
	if i, err := strconv.ParseInt(text, 10, 64); err == nil {
		return i, nil
	}
	b, ok := new(big.Int).SetString(text, 10)
	if !ok {
		return nil, p.fail("bad number")
	}
	return b, nil
}

func (p *jsonParser) str() (Value, error) {
	p.i++ // opening quote
	start := p.i
	for p.i < len(p.s) {
		c := p.s[p.i]
		if c == '"' {
			s := string(p.s[start:p.i])
			p.i++
			return s, nil
		}
		if c == '\\' || c < 0x20 {
			break
		}
		p.i++
	}
	var b strings.Builder
	b.Grow(p.i - start + strEnd(p.s[p.i:]))
	b.Write(p.s[start:p.i])
	for s := p.s; p.i < len(s); {
		// Copy the run of plain bytes up to the next quote, escape or
		// control character at once.
		j := plainRun(s, p.i)
		b.Write(s[p.i:j])
		p.i = j
		if j >= len(s) {
			break
		}
		switch c := s[j]; {
		case c == '"':
			p.i++
			return b.String(), nil
		case c < 0x20:
			return nil, p.fail("Invalid control character")
		}
		p.i++
		if p.i >= len(s) {
			break
		}
		e := p.s[p.i]
		p.i++
		switch e {
		case '"', '\\', '/':
			b.WriteByte(e)
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'u':
			r, ok := p.hex4()
			if !ok {
				return nil, p.fail("Invalid \\uXXXX escape")
			}
			if utf16.IsSurrogate(r) && r < 0xdc00 && p.i+1 < len(p.s) && p.s[p.i] == '\\' && p.s[p.i+1] == 'u' {
				save := p.i
				p.i += 2
				r2, ok := p.hex4()
				if ok && r2 >= 0xdc00 && r2 <= 0xdfff {
					r = utf16.DecodeRune(r, r2)
				} else {
					p.i = save
				}
			}
			b.WriteRune(r) // lone surrogates become U+FFFD
		default:
			p.i--
			return nil, p.fail("Invalid \\escape")
		}
	}
	return nil, p.fail("Unterminated string")
}

// plainStrByte marks the bytes a JSON string copies as they are: not a
// quote, a backslash or a control character.
var plainStrByte = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// plainRun returns the end of the run of plain string bytes (plainStrByte)
// starting at j. Eight bytes at a time: a word holds none of '"', '\\' and
// the control characters when no byte is zero after XOR with either, and
// no byte is below 0x20 (the has-zero and has-less tricks; a false alarm
// only falls back to the byte loop).
func plainRun(s []byte, j int) int {
	const lo, hi = 0x0101010101010101, 0x8080808080808080
	for j+8 <= len(s) {
		x := binary.LittleEndian.Uint64(s[j:])
		q, bs := x^(lo*'"'), x^(lo*'\\')
		if ((q-lo)&^q|(bs-lo)&^bs|(x-lo*0x20)&^x)&hi != 0 {
			break
		}
		j += 8
	}
	for j < len(s) && plainStrByte[s[j]] {
		j++
	}
	return j
}

// strEnd is about the length of the string s starts inside: the offset of
// its closing quote, or len(s). It sizes the decoded string's buffer.
func strEnd(s []byte) int {
	for i := 0; ; {
		k := bytes.IndexByte(s[i:], '"')
		if k < 0 {
			return len(s)
		}
		i += k
		// The quote is escaped when an odd number of backslashes precede it.
		n := 0
		for n < i && s[i-1-n] == '\\' {
			n++
		}
		if n%2 == 0 {
			return i
		}
		i++
	}
}

func (p *jsonParser) hex4() (rune, bool) {
	if p.i+4 > len(p.s) {
		return 0, false
	}
	var r rune
	for _, c := range p.s[p.i : p.i+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	p.i += 4
	return r, true
}

// jsonOpts are the json.dumps arguments that the tojson filter forwards.
type jsonOpts struct {
	ensureASCII bool
	indent      string
	hasIndent   bool
	itemSep     string
	keySep      string
	sortKeys    bool
}

func defaultJSONOpts() jsonOpts { return jsonOpts{itemSep: ", ", keySep: ": "} }

// JSON serializes v the way Python's json.dumps(v, ensure_ascii=False) does,
// the tojson filter that transformers installs: separators ", " and ": ",
// dict insertion order, floats as repr (1.0, 1e+16), NaN/Infinity as bare
// words, and non-ASCII text unescaped.
func JSON(v Value) (string, error) {
	var b strings.Builder
	if err := writeJSON(&b, v, defaultJSONOpts(), 0); err != nil {
		return "", err
	}
	return b.String(), nil
}

func writeJSON(b *strings.Builder, v Value, o jsonOpts, level int) error {
	if level > maxJSONDepth {
		return errf("RecursionError", "maximum recursion depth exceeded while encoding a JSON object")
	}
	if b.Len() > maxReprBytes {
		return errf("LimitError", "JSON text exceeds %d bytes", maxReprBytes)
	}
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		if x {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case int64:
		b.WriteString(strconv.FormatInt(x, 10))
	case *big.Int:
		b.WriteString(x.String())
	case float64:
		b.WriteString(jsonFloat(x))
	case string:
		writeJSONString(b, x, o.ensureASCII)
	case Markup:
		writeJSONString(b, string(x), o.ensureASCII)
	case List:
		return writeJSONSeq(b, x, o, level)
	case Tuple:
		return writeJSONSeq(b, x, o, level)
	case *Dict:
		return writeJSONDict(b, x, o, level)
	default:
		return typeErrorf("Object of type %s is not JSON serializable", typeName(v))
	}
	return nil
}

func jsonFloat(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	return floatRepr(f)
}

func writeNewlineIndent(b *strings.Builder, o jsonOpts, level int) {
	b.WriteByte('\n')
	for i := 0; i < level; i++ {
		b.WriteString(o.indent)
	}
}

func writeJSONSeq(b *strings.Builder, items []Value, o jsonOpts, level int) error {
	if len(items) == 0 {
		b.WriteString("[]")
		return nil
	}
	b.WriteByte('[')
	for i, e := range items {
		if i > 0 {
			b.WriteString(o.itemSep)
		}
		if o.hasIndent {
			writeNewlineIndent(b, o, level+1)
		}
		if err := writeJSON(b, e, o, level+1); err != nil {
			return err
		}
	}
	if o.hasIndent {
		writeNewlineIndent(b, o, level)
	}
	b.WriteByte(']')
	return nil
}

func writeJSONDict(b *strings.Builder, d *Dict, o jsonOpts, level int) error {
	if d.Len() == 0 {
		b.WriteString("{}")
		return nil
	}
	ents := d.ents
	if o.sortKeys {
		ents = append([]dictEntry(nil), ents...)
		var serr error
		sort.SliceStable(ents, func(i, j int) bool {
			lt, err := pyLess(ents[i].key, ents[j].key)
			if err != nil && serr == nil {
				serr = err
			}
			return lt
		})
		if serr != nil {
			return serr
		}
	}
	b.WriteByte('{')
	for i, e := range ents {
		if i > 0 {
			b.WriteString(o.itemSep)
		}
		if o.hasIndent {
			writeNewlineIndent(b, o, level+1)
		}
		var key string
		switch k := e.key.(type) {
		case string:
			key = k
		case Markup:
			key = string(k)
		case float64:
			key = jsonFloat(k)
		case bool:
			key = "false"
			if k {
				key = "true"
			}
		case nil:
			key = "null"
		case int64, *big.Int:
			key = pyStr(k)
		default:
			return typeErrorf("keys must be str, int, float, bool or None, not %s", typeName(k))
		}
		writeJSONString(b, key, o.ensureASCII)
		b.WriteString(o.keySep)
		if err := writeJSON(b, e.val, o, level+1); err != nil {
			return err
		}
	}
	if o.hasIndent {
		writeNewlineIndent(b, o, level)
	}
	b.WriteByte('}')
	return nil
}

// writeJSONString follows json.encoder: with ensure_ascii=False only '"',
// '\\' and C0 controls are escaped; with ensure_ascii=True everything past
// ASCII becomes \uXXXX (surrogate pairs above the BMP).
func writeJSONString(b *strings.Builder, s string, ensureASCII bool) {
	b.WriteByte('"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && (c < utf8.RuneSelf || !ensureASCII) {
			i++
			continue
		}
		b.WriteString(s[start:i])
		if c < utf8.RuneSelf {
			switch c {
			case '"':
				b.WriteString(`\"`)
			case '\\':
				b.WriteString(`\\`)
			case '\n':
				b.WriteString(`\n`)
			case '\r':
				b.WriteString(`\r`)
			case '\t':
				b.WriteString(`\t`)
			case '\b':
				b.WriteString(`\b`)
			case '\f':
				b.WriteString(`\f`)
			default:
				writeU4(b, rune(c))
			}
			i++
		} else {
			r, n := utf8.DecodeRuneInString(s[i:])
			if r >= 0x10000 {
				r1, r2 := utf16.EncodeRune(r)
				writeU4(b, r1)
				writeU4(b, r2)
			} else {
				writeU4(b, r)
			}
			i += n
		}
		start = i
	}
	b.WriteString(s[start:])
	b.WriteByte('"')
}

func writeU4(b *strings.Builder, r rune) {
	b.WriteString(`\u`)
	for i := 3; i >= 0; i-- {
		b.WriteByte(hexDigits[(r>>(4*i))&0xf])
	}
}

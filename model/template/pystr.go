package template

import (
	"math"
	"math/big"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// pyStr is Python's str(v) as Jinja2 prints it ({{ v }}): None prints
// "None", containers print as their repr, Undefined prints "".
func pyStr(v Value) string {
	switch x := v.(type) {
	case string:
		return x
	case Markup:
		return string(x)
	case nil:
		return "None"
	case bool:
		if x {
			return "True"
		}
		return "False"
	case int64:
		return strconv.FormatInt(x, 10)
	case float64:
		return floatRepr(x)
	case *Undefined:
		return ""
	}
	b := reprBuf{limit: maxReprBytes}
	writeRepr(&b, v)
	return b.String()
}

// Str is Python's str(v), which is also what Jinja2 prints for {{ v }}:
// a string as it is, a container as its repr.
func Str(v Value) string { return pyStr(v) }

// pyRepr is Python's repr(v).
func pyRepr(v Value) string {
	b := reprBuf{limit: maxReprBytes}
	writeRepr(&b, v)
	return b.String()
}

// maxReprBytes caps any one str() or repr() so that printing a huge
// container cannot exhaust memory; MaxOutputBytes is clamped to it.
const maxReprBytes = 128 << 20

// reprBuf collects a repr and stops early once it passes limit (over is
// then set), so that printing a huge container cannot exhaust memory.
type reprBuf struct {
	strings.Builder
	limit int
	over  bool
}

func (b *reprBuf) full() bool {
	if b.Len() > b.limit {
		b.over = true
	}
	return b.over
}

// pyStrLimit is pyStr that gives up (ok=false) past limit bytes.
func pyStrLimit(v Value, limit int) (string, bool) {
	switch v.(type) {
	case string, Markup, nil, bool, int64, float64, *Undefined:
		s := pyStr(v)
		return s, len(s) <= limit
	}
	b := reprBuf{limit: limit}
	writeRepr(&b, v)
	return b.String(), !b.over
}

func writeRepr(b *reprBuf, v Value) {
	switch x := v.(type) {
	case nil:
		b.WriteString("None")
	case bool, int64, float64:
		b.WriteString(pyStr(x))
	case *big.Int:
		b.WriteString(x.String())
	case string:
		writeStrRepr(b, x)
	case Markup:
		b.WriteString("Markup(")
		writeStrRepr(b, string(x))
		b.WriteByte(')')
	case List:
		writeSeqRepr(b, x, '[', ']', false)
	case Tuple:
		writeSeqRepr(b, x, '(', ')', true)
	case *groupTuple:
		writeSeqRepr(b, []Value{x.grouper, x.list}, '(', ')', true)
	case *Dict:
		writeDictRepr(b, x)
	case *Undefined:
		b.WriteString("Undefined")
	case *namespace:
		b.WriteString("<Namespace ")
		writeDictRepr(b, x.attrs)
		b.WriteByte('>')
	case *loopCtx:
		b.WriteString("<LoopContext ")
		b.WriteString(strconv.Itoa(x.i + 1))
		b.WriteByte('/')
		b.WriteString(strconv.Itoa(len(x.items)))
		b.WriteByte('>')
	case *rangeVal:
		b.WriteString("range(")
		b.WriteString(itoa(x.start))
		b.WriteString(", ")
		b.WriteString(itoa(x.stop))
		if x.step != 1 {
			b.WriteString(", ")
			b.WriteString(itoa(x.step))
		}
		b.WriteByte(')')
	case *dictView:
		b.WriteString("dict_")
		b.WriteString(x.kind)
		b.WriteByte('(')
		writeSeqRepr(b, x.items(), '[', ']', false)
		b.WriteByte(')')
	case *macro:
		b.WriteString("<Macro ")
		writeStrRepr(b, x.def.name)
		b.WriteByte('>')
	case *generator:
		// Python prints an address; a fixed one keeps the length right.
		if x.fname != "" {
			b.WriteString("<generator object " + x.fname + " at 0x7f0000000000>")
		} else {
			b.WriteString("<" + x.typ + " object at 0x7f0000000000>")
		}
	case *sliceVal:
		b.WriteString("slice(")
		for i, p := range []Value{x.start, x.stop, x.step} {
			if i > 0 {
				b.WriteString(", ")
			}
			writeRepr(b, p)
		}
		b.WriteByte(')')
	case *builtinFunc:
		if x.class != "" {
			b.WriteString("<class '" + x.class + "'>")
			break
		}
		b.WriteString("<built-in function ")
		b.WriteString(x.name)
		b.WriteByte('>')
	case *boundMethod:
		b.WriteString("<built-in method ")
		b.WriteString(x.name)
		b.WriteString(" of ")
		b.WriteString(typeName(x.recv))
		b.WriteString(" object>")
	default:
		b.WriteByte('<')
		b.WriteString(typeName(v))
		b.WriteString(" object>")
	}
}

func writeSeqRepr(b *reprBuf, items []Value, open, close byte, tuple bool) {
	b.WriteByte(open)
	for i, e := range items {
		if b.full() {
			return
		}
		if i > 0 {
			b.WriteString(", ")
		}
		writeRepr(b, e)
	}
	if tuple && len(items) == 1 {
		b.WriteByte(',')
	}
	b.WriteByte(close)
}

func writeDictRepr(b *reprBuf, d *Dict) {
	b.WriteByte('{')
	for i, e := range d.ents {
		if b.full() {
			return
		}
		if i > 0 {
			b.WriteString(", ")
		}
		writeRepr(b, e.key)
		b.WriteString(": ")
		writeRepr(b, e.val)
	}
	b.WriteByte('}')
}

const hexDigits = "0123456789abcdef"

// writeStrRepr follows CPython's unicode_repr.
func writeStrRepr(b *reprBuf, s string) {
	quote := byte('\'')
	if strings.IndexByte(s, '\'') >= 0 && strings.IndexByte(s, '"') < 0 {
		quote = '"'
	}
	b.WriteByte(quote)
	for _, r := range s {
		switch {
		case r == rune(quote) || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < ' ' || r == 0x7f:
			writeHexEscape(b, 'x', r, 2)
		case r < 0x7f:
			b.WriteRune(r)
		case isPrintable(r):
			b.WriteRune(r)
		case r <= 0xff:
			writeHexEscape(b, 'x', r, 2)
		case r <= 0xffff:
			writeHexEscape(b, 'u', r, 4)
		default:
			writeHexEscape(b, 'U', r, 8)
		}
	}
	b.WriteByte(quote)
}

func writeHexEscape(b interface {
	WriteByte(byte) error
}, c byte, r rune, n int) {
	b.WriteByte('\\')
	b.WriteByte(c)
	for i := n - 1; i >= 0; i-- {
		b.WriteByte(hexDigits[(r>>(4*i))&0xf])
	}
}

// isPrintable is Python's str.isprintable for one character: everything but
// the categories Cc, Cf, Cs, Co, Cn, Zl, Zp and Zs (except the ASCII space).
// Go's unicode.IsPrint draws the same line.
func isPrintable(r rune) bool { return unicode.IsPrint(r) }

// floatRepr is Python's repr(float): the shortest string that round-trips,
// in fixed notation when the decimal exponent is in [-4, 16), else in
// scientific notation with a signed exponent of at least two digits.
func floatRepr(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	case math.IsNaN(f):
		return "nan"
	case f == 0:
		if math.Signbit(f) {
			return "-0.0"
		}
		return "0.0"
	}
	digits, decpt, neg := shortestDigits(f)
	var b []byte
	if neg {
		b = append(b, '-')
	}
	if decpt > 16 || decpt <= -4 {
		b = append(b, digits[0])
		if len(digits) > 1 {
			b = append(b, '.')
			b = append(b, digits[1:]...)
		}
		b = appendExp(b, decpt-1)
		return string(b)
	}
	switch {
	case decpt <= 0:
		b = append(b, "0."...)
		for i := 0; i < -decpt; i++ {
			b = append(b, '0')
		}
		b = append(b, digits...)
	case decpt >= len(digits):
		b = append(b, digits...)
		for i := len(digits); i < decpt; i++ {
			b = append(b, '0')
		}
		b = append(b, ".0"...)
	default:
		b = append(b, digits[:decpt]...)
		b = append(b, '.')
		b = append(b, digits[decpt:]...)
	}
	return string(b)
}

// appendExp writes e+XX / e-XX with at least two exponent digits.
func appendExp(b []byte, exp int) []byte {
	b = append(b, 'e')
	if exp < 0 {
		b = append(b, '-')
		exp = -exp
	} else {
		b = append(b, '+')
	}
	if exp < 10 {
		b = append(b, '0')
	}
	return strconv.AppendInt(b, int64(exp), 10)
}

// shortestDigits returns the shortest round-trip decimal digits of f (no
// sign, no point) and decpt, the position of the decimal point: f =
// 0.d1d2... * 10^decpt.
func shortestDigits(f float64) (digits string, decpt int, neg bool) {
	s := strconv.FormatFloat(f, 'e', -1, 64)
	if s[0] == '-' {
		neg = true
		s = s[1:]
	}
	e := strings.IndexByte(s, 'e')
	exp, _ := strconv.Atoi(s[e+1:])
	mant := s[:e]
	if len(mant) > 1 {
		mant = mant[:1] + mant[2:]
	}
	return mant, exp + 1, neg
}

// pyIsSpace is Python's str.isspace for one character. Go's unicode.IsSpace
// misses U+001C..U+001F, which Python counts as whitespace.
func pyIsSpace(r rune) bool {
	if r < utf8.RuneSelf {
		switch r {
		case ' ', '\t', '\n', '\v', '\f', '\r', 0x1c, 0x1d, 0x1e, 0x1f:
			return true
		}
		return false
	}
	return unicode.IsSpace(r)
}

package template

import (
	"math"
	"math/big"
	"strconv"
	"strings"
	"unicode/utf8"
)

// printf is Python's "format % args" (printf-style string formatting), used
// by the % operator and the format filter. With escape set (Markup on the
// left), string arguments are HTML-escaped first.
func (r *renderer) printf(format string, args Value, escape bool) (string, error) {
	var pos []Value
	var mapping *Dict
	switch a := args.(type) {
	case Tuple:
		pos = a
	case *Dict:
		mapping = a
		pos = []Value{a}
	case List, *Undefined, *rangeVal:
		// CPython treats any non-tuple, non-str object with __getitem__ as a
		// mapping here, which silences "not all arguments converted".
		mapping = NewDict(0)
		pos = []Value{a}
	default:
		pos = []Value{a}
	}
	next := 0
	usedMapping := false
	take := func() (Value, error) {
		if next >= len(pos) {
			return nil, typeErrorf("not enough arguments for format string")
		}
		next++
		return pos[next-1], nil
	}
	var b strings.Builder
	for i := 0; i < len(format); {
		c := format[i]
		if c != '%' {
			j := strings.IndexByte(format[i:], '%')
			if j < 0 {
				b.WriteString(format[i:])
				break
			}
			b.WriteString(format[i : i+j])
			i += j
			continue
		}
		i++
		if i >= len(format) {
			return "", valueErrorf("incomplete format")
		}
		var arg Value
		hasArg := false
		if format[i] == '(' {
			if mapping == nil {
				return "", typeErrorf("format requires a mapping")
			}
			depth, j := 1, i+1
			for ; j < len(format) && depth > 0; j++ {
				switch format[j] {
				case '(':
					depth++
				case ')':
					depth--
				}
			}
			if depth > 0 {
				return "", valueErrorf("incomplete format key")
			}
			key := format[i+1 : j-1]
			v, ok := mapping.GetString(key)
			if !ok {
				return "", errf("KeyError", "%s", pyRepr(key))
			}
			arg, hasArg, usedMapping = v, true, true
			i = j
		}
		var sp fmtSpec
		for ; i < len(format); i++ {
			switch format[i] {
			case '-':
				sp.align = '<'
			case '+':
				sp.sign = '+'
			case ' ':
				if sp.sign != '+' {
					sp.sign = ' '
				}
			case '#':
				sp.alt = true
			case '0':
				sp.zero = true
			default:
				goto width
			}
		}
	width:
		if i < len(format) && format[i] == '*' {
			v, err := take()
			if err != nil {
				return "", err
			}
			w, err := intArg(v, "*")
			if err != nil {
				return "", typeErrorf("* wants int")
			}
			if w < 0 {
				sp.align, w = '<', -w
			}
			sp.width = int(min(w, math.MaxInt32))
			i++
		} else {
			for i < len(format) && isDigitByte(format[i]) {
				sp.width = min(sp.width*10+int(format[i]-'0'), math.MaxInt32)
				i++
			}
		}
		sp.prec = -1
		if i < len(format) && format[i] == '.' {
			i++
			sp.prec = 0
			if i < len(format) && format[i] == '*' {
				v, err := take()
				if err != nil {
					return "", err
				}
				p, err := intArg(v, "*")
				if err != nil {
					return "", typeErrorf("* wants int")
				}
				sp.prec = int(max(0, min(p, math.MaxInt32)))
				i++
			} else {
				for i < len(format) && isDigitByte(format[i]) {
					sp.prec = min(sp.prec*10+int(format[i]-'0'), math.MaxInt32)
					i++
				}
			}
		}
		for i < len(format) && (format[i] == 'h' || format[i] == 'l' || format[i] == 'L') {
			i++
		}
		if i >= len(format) {
			return "", valueErrorf("incomplete format")
		}
		verb := format[i]
		i++
		if verb == '%' {
			b.WriteByte('%')
			continue
		}
		if !hasArg {
			v, err := take()
			if err != nil {
				return "", err
			}
			arg = v
		}
		if err := r.checkLen(b.Len() + sp.width + max(sp.prec, 0)); err != nil {
			return "", err
		}
		if sp.zero && sp.align != '<' {
			sp.fill, sp.align = '0', '='
		}
		s, err := printfOne(arg, verb, sp)
		if err != nil {
			return "", err
		}
		if escape && (verb == 's' || verb == 'r' || verb == 'a') {
			if _, isM := arg.(Markup); !isM {
				s = htmlEscape(s)
			}
		}
		b.WriteString(s)
	}
	if next < len(pos) && !usedMapping && mapping == nil {
		return "", typeErrorf("not all arguments converted during string formatting")
	}
	return b.String(), nil
}

func printfOne(arg Value, verb byte, sp fmtSpec) (string, error) {
	if u, ok := arg.(*Undefined); ok && verb != 's' && verb != 'r' && verb != 'a' {
		return "", u.err()
	}
	switch verb {
	case 's', 'r', 'a':
		var s string
		switch verb {
		case 's':
			s = pyStr(arg)
		case 'r':
			s = pyRepr(arg)
		default:
			s = asciiRepr(pyRepr(arg))
		}
		if sp.prec >= 0 {
			s = truncRunes(s, sp.prec)
		}
		if sp.fill == '0' {
			sp.fill, sp.align = ' ', '>'
		}
		if sp.align == 0 {
			sp.align = '>'
		}
		return sp.pad(s, ""), nil
	case 'd', 'i', 'u':
		if f, ok := arg.(float64); ok {
			if math.IsInf(f, 0) || math.IsNaN(f) {
				return "", errf("OverflowError", "cannot convert float %s to integer", floatRepr(f))
			}
			b, _ := big.NewFloat(math.Trunc(f)).Int(nil)
			arg = normBig(b)
		}
		if k, _, _, _ := numeric(arg); k == 0 {
			return "", typeErrorf("%%%c format: a real number is required, not %s", verb, typeName(arg))
		}
		if sp.prec >= 0 {
			// %.3d: minimum digits, which Python implements as zero fill.
			sp.minDigits = sp.prec
		}
		return sp.formatInt(toBig(arg), 'd')
	case 'o', 'x', 'X':
		if k, _, _, _ := numeric(arg); k != 1 && k != 2 {
			return "", typeErrorf("%%%c format: an integer is required, not %s", verb, typeName(arg))
		}
		if sp.prec >= 0 {
			sp.minDigits = sp.prec
		}
		return sp.formatInt(toBig(arg), verb)
	case 'e', 'E', 'f', 'F', 'g', 'G':
		f, err := toFloat(arg)
		if err != nil {
			return "", typeErrorf("must be real number, not %s", typeName(arg))
		}
		if sp.prec < 0 {
			sp.prec = 6
		}
		return sp.formatFloat(f, verb), nil
	case 'c':
		switch x := arg.(type) {
		case string:
			if utf8.RuneCountInString(x) != 1 {
				return "", typeErrorf("%%c requires int or char")
			}
			return sp.pad(x, ""), nil
		}
		i, err := intArg(arg, "c")
		if err != nil || i < 0 || i > 0x10ffff {
			return "", errf("OverflowError", "%%c arg not in range(0x110000)")
		}
		return sp.pad(string(rune(i)), ""), nil
	}
	return "", valueErrorf("unsupported format character '%c' (0x%x)", verb, verb)
}

func truncRunes(s string, n int) string {
	i := 0
	for k := range s {
		if i == n {
			return s[:k]
		}
		i++
	}
	return s
}

func asciiRepr(s string) string {
	var b strings.Builder
	for _, c := range s {
		switch {
		case c < 0x80:
			b.WriteRune(c)
		case c <= 0xff:
			writeHexEscape(&b, 'x', c, 2)
		case c <= 0xffff:
			writeHexEscape(&b, 'u', c, 4)
		default:
			writeHexEscape(&b, 'U', c, 8)
		}
	}
	return b.String()
}

// fmtSpec is a parsed format specification, shared by printf-style
// formatting and str.format's mini-language.
type fmtSpec struct {
	fill      rune
	align     byte // < > ^ =, 0 for the type's default
	sign      byte // + - space, 0 for default
	alt       bool
	zero      bool
	width     int
	grouping  byte // , or _
	prec      int  // -1 when absent
	minDigits int
	typ       byte
}

// pad aligns body (after an optional sign/prefix) to the width.
func (sp fmtSpec) pad(body, prefix string) string {
	n := utf8.RuneCountInString(body) + len(prefix)
	if sp.width <= n {
		return prefix + body
	}
	fill := sp.fill
	if fill == 0 {
		fill = ' '
	}
	f := string(fill)
	m := sp.width - n
	switch sp.align {
	case '<':
		return prefix + body + strings.Repeat(f, m)
	case '^':
		return strings.Repeat(f, m/2) + prefix + body + strings.Repeat(f, m-m/2)
	case '=':
		return prefix + strings.Repeat(f, m) + body
	}
	return strings.Repeat(f, m) + prefix + body
}

func (sp fmtSpec) signOf(neg bool) string {
	switch {
	case neg:
		return "-"
	case sp.sign == '+':
		return "+"
	case sp.sign == ' ':
		return " "
	}
	return ""
}

func group(digits string, sep byte, every int) string {
	if sep == 0 || len(digits) <= every {
		return digits
	}
	var b strings.Builder
	first := len(digits) % every
	if first > 0 {
		b.WriteString(digits[:first])
	}
	for i := first; i < len(digits); i += every {
		if b.Len() > 0 {
			b.WriteByte(sep)
		}
		b.WriteString(digits[i : i+every])
	}
	return b.String()
}

func (sp fmtSpec) formatInt(v *big.Int, verb byte) (string, error) {
	neg := v.Sign() < 0
	a := new(big.Int).Abs(v)
	var digits, prefix string
	switch verb {
	case 'b':
		digits, prefix = a.Text(2), "0b"
	case 'o':
		digits, prefix = a.Text(8), "0o"
	case 'x':
		digits, prefix = a.Text(16), "0x"
	case 'X':
		digits, prefix = strings.ToUpper(a.Text(16)), "0X"
	default:
		digits = a.String()
	}
	if !sp.alt {
		prefix = ""
	}
	for len(digits) < sp.minDigits {
		digits = "0" + digits
	}
	every := 3
	if verb != 'd' {
		every = 4
	}
	digits = group(digits, sp.grouping, every)
	if sp.align == 0 {
		sp.align = '>'
	}
	return sp.pad(digits, sp.signOf(neg)+prefix), nil
}

func (sp fmtSpec) formatFloat(f float64, verb byte) string {
	neg := math.Signbit(f) && !math.IsNaN(f)
	a := math.Abs(f)
	upper := verb == 'E' || verb == 'F' || verb == 'G'
	var body string
	switch {
	case math.IsInf(a, 0):
		body = "inf"
	case math.IsNaN(a):
		body = "nan"
	default:
		body = formatFloatBody(a, verb|0x20, sp.prec, sp.alt)
	}
	if upper {
		body = strings.ToUpper(body)
	}
	if sp.grouping != 0 && !math.IsInf(a, 0) && !math.IsNaN(a) {
		intPart, rest := body, ""
		if k := strings.IndexAny(body, ".e"); k >= 0 {
			intPart, rest = body[:k], body[k:]
		}
		body = group(intPart, sp.grouping, 3) + rest
	}
	if sp.align == 0 {
		sp.align = '>'
	}
	return sp.pad(body, sp.signOf(neg))
}

// formatFloatBody formats a non-negative finite float for verbs e, f, g,
// '%' and 'r' (str.format's empty type with a precision).
func formatFloatBody(a float64, verb byte, prec int, alt bool) string {
	switch verb {
	case 'f':
		s := strconv.FormatFloat(a, 'f', prec, 64)
		if alt && prec == 0 {
			s += "."
		}
		return s
	case 'e':
		s := strconv.FormatFloat(a, 'e', prec, 64)
		if alt && prec == 0 {
			s = strings.Replace(s, "e", ".e", 1)
		}
		return s
	case '%':
		return formatFloatBody(a*100, 'f', prec, alt) + "%"
	}
	// g (and the empty type with a precision, marked 'r'): choose by the
	// exponent after rounding to p significant digits.
	p := prec
	if p == 0 {
		p = 1
	}
	if a == 0 {
		if verb == 'r' {
			return "0.0"
		}
		if alt {
			return "0." + strings.Repeat("0", p-1)
		}
		return "0"
	}
	es := strconv.FormatFloat(a, 'e', p-1, 64)
	k := strings.IndexByte(es, 'e')
	exp, _ := strconv.Atoi(es[k+1:])
	var s string
	if exp < -4 || exp >= p {
		mant := es[:k]
		if !alt {
			mant = trimZeros(mant)
		}
		s = string(appendExp([]byte(mant), exp))
	} else {
		s = strconv.FormatFloat(a, 'f', p-1-exp, 64)
		if !alt {
			s = trimZeros(s)
		}
		if verb == 'r' && !strings.Contains(s, ".") {
			s += ".0"
		}
	}
	return s
}

func trimZeros(s string) string {
	if !strings.Contains(s, ".") {
		return s
	}
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}

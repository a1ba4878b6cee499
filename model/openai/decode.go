package openai

import (
	"math"
	"strconv"
	"strings"
)

// This file converts raw JSON values to typed fields with pydantic v2's lax
// ("python" mode) rules, which is how FastAPI validates the dict json.loads
// produced: bools accept 0/1 and "true"/"yes"/…, ints accept integral floats,
// bools and numeric strings, floats accept ints, bools and numeric strings,
// strings accept only strings. Messages follow pydantic-core's wording.

const (
	msgBool        = "Input should be a valid boolean"
	msgBoolParse   = "Input should be a valid boolean, unable to interpret input"
	msgInt         = "Input should be a valid integer"
	msgIntParse    = "Input should be a valid integer, unable to parse string as an integer"
	msgIntFraction = "Input should be a valid integer, got a number with a fractional part"
	msgFinite      = "Input should be a finite number"
	msgIntMax      = "Input should be less than or equal to 9223372036854775807"
	msgIntMin      = "Input should be greater than or equal to -9223372036854775808"
	msgFloat       = "Input should be a valid number"
	msgFloatParse  = "Input should be a valid number, unable to parse string as a number"
	msgString      = "Input should be a valid string"
	msgList        = "Input should be a valid list"
	msgDict        = "Input should be a valid dictionary"
	msgRequired    = "Field required"
)

// decoder collects field errors while converting values of one body.
type decoder struct {
	b    []byte
	errs []fieldError
}

func (d *decoder) fail(loc, msg string) { d.errs = append(d.errs, fieldError{loc, msg}) }

// boolean converts s; null is accepted when nullable (ok false).
func (d *decoder) boolean(loc string, s span, nullable bool) (v, ok bool) {
	switch s.kind {
	case kNone:
		return false, false
	case kNull:
		if !nullable {
			d.fail(loc, msgBool)
		}
		return false, false
	case kBool:
		return d.b[s.start] == 't', true
	case kNumber:
		// pydantic: 0/1 (int or float) convert; other integers and
		// integral floats are "unable to interpret"; fractions and NaN are
		// not booleans at all.
		f, good := numberValue(d.b[s.start:s.end])
		switch {
		case good && (f == 0 || f == 1):
			return f == 1, true
		case good && f == math.Trunc(f):
			d.fail(loc, msgBoolParse)
		default:
			d.fail(loc, msgBool)
		}
	case kString:
		switch str := strings.ToLower(decodeString(d.b[s.start:s.end])); str {
		case "0", "off", "f", "false", "n", "no":
			return false, true
		case "1", "on", "t", "true", "y", "yes":
			return true, true
		}
		d.fail(loc, msgBoolParse)
	default:
		d.fail(loc, msgBool)
	}
	return false, false
}

// integer converts s to an int64.
func (d *decoder) integer(loc string, s span, nullable bool) (int64, bool) {
	v, msg, ok := intValue(d.b, s)
	if msg != "" {
		d.fail(loc, msg)
		return 0, false
	}
	if s.kind == kNull && !nullable {
		d.fail(loc, msgInt)
	}
	return v, ok
}

// intValue is integer without error collection: msg is the pydantic
// message on failure; ok is false for absent or null.
func intValue(b []byte, s span) (v int64, msg string, ok bool) {
	switch s.kind {
	case kNone, kNull:
		return 0, "", false
	case kBool:
		if b[s.start] == 't' {
			return 1, "", true
		}
		return 0, "", true
	case kNumber:
		lit := b[s.start:s.end]
		if isIntLiteral(lit) {
			n, err := strconv.ParseInt(string(lit), 10, 64)
			if err != nil {
				if lit[0] == '-' {
					return 0, msgIntMin, false
				}
				return 0, msgIntMax, false
			}
			return n, "", true
		}
		return floatToInt(numberValue(lit))
	case kString:
		// Python int() text: trimmed, an optional sign, digits with single
		// underscores between them; pydantic also takes a ".0…" fraction.
		str := strings.TrimSpace(decodeString(b[s.start:s.end]))
		if i := strings.IndexByte(str, '.'); i > 0 && strings.Trim(str[i+1:], "0") == "" && len(str) > i+1 {
			str = str[:i]
		}
		digits, ok := pyDigits(strings.TrimPrefix(strings.TrimPrefix(str, "+"), "-"))
		if !ok {
			return 0, msgIntParse, false
		}
		neg := strings.HasPrefix(str, "-")
		if neg {
			digits = "-" + digits
		}
		n, err := strconv.ParseInt(digits, 10, 64)
		switch {
		case err == nil:
			return n, "", true
		case neg:
			return 0, msgIntMin, false
		}
		return 0, msgIntMax, false
	}
	return 0, msgInt, false
}

func floatToInt(f float64, good bool) (int64, string, bool) {
	switch {
	case !good:
		return 0, msgInt, false
	case math.IsNaN(f) || math.IsInf(f, 0):
		return 0, msgFinite, false
	case f != math.Trunc(f):
		return 0, msgIntFraction, false
	case f >= 9223372036854775807:
		return 0, msgIntMax, false
	case f < -9223372036854775808:
		return 0, msgIntMin, false
	}
	return int64(f), "", true
}

// float converts s to a float64 (NaN and ±Inf allowed, as pydantic's
// default allow_inf_nan).
func (d *decoder) float(loc string, s span, nullable bool) (float64, bool) {
	switch s.kind {
	case kNone:
		return 0, false
	case kNull:
		if !nullable {
			d.fail(loc, msgFloat)
		}
		return 0, false
	case kBool:
		if d.b[s.start] == 't' {
			return 1, true
		}
		return 0, true
	case kNumber:
		f, good := numberValue(d.b[s.start:s.end])
		if good {
			return f, true
		}
	case kString:
		if f, ok := pyFloatText(decodeString(d.b[s.start:s.end])); ok {
			return f, true
		}
		d.fail(loc, msgFloatParse)
		return 0, false
	}
	d.fail(loc, msgFloat)
	return 0, false
}

// pyDigits checks Python's decimal digit text (underscores only between
// digits) and returns it without underscores.
func pyDigits(s string) (string, bool) {
	if s == "" || s[0] == '_' || s[len(s)-1] == '_' {
		return "", false
	}
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= '0' && c <= '9':
			out = append(out, c)
		case c == '_' && s[i-1] != '_':
		default:
			return "", false
		}
	}
	return string(out), true
}

// pyFloatText is Python's float() of a string: trimmed decimal text with
// optional underscores between digits, or inf / infinity / nan with a sign,
// in any case. Hex floats, which Go would take, are refused.
func pyFloatText(s string) (float64, bool) {
	s = strings.TrimSpace(s)
	body := strings.TrimLeft(s, "+-")
	if len(s)-len(body) > 1 {
		return 0, false
	}
	switch strings.ToLower(body) {
	case "inf", "infinity":
		if strings.HasPrefix(s, "-") {
			return math.Inf(-1), true
		}
		return math.Inf(1), true
	case "nan":
		return math.NaN(), true
	}
	clean := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= '0' && c <= '9', c == '+', c == '-', c == '.', c == 'e', c == 'E':
			clean = append(clean, c)
		case c == '_' && i > 0 && i+1 < len(s) && isDigit(s[i-1]) && isDigit(s[i+1]):
		default:
			return 0, false
		}
	}
	f, err := strconv.ParseFloat(string(clean), 64)
	if err != nil && !isRangeErr(err) {
		return 0, false
	}
	return f, true
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isRangeErr(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

// str converts s to a string; only JSON strings are strings to pydantic.
func (d *decoder) str(loc string, s span, nullable bool) (string, bool) {
	switch s.kind {
	case kNone:
		return "", false
	case kNull:
		if !nullable {
			d.fail(loc, msgString)
		}
		return "", false
	case kString:
		return decodeString(d.b[s.start:s.end]), true
	}
	d.fail(loc, msgString)
	return "", false
}

// object checks that s is an object (or null when nullable).
func (d *decoder) object(loc string, s span, nullable bool, msg string) bool {
	switch s.kind {
	case kNone:
		return false
	case kNull:
		if !nullable {
			d.fail(loc, msg)
		}
		return false
	case kObject:
		return true
	}
	d.fail(loc, msg)
	return false
}

// list checks that s is an array (or null when nullable).
func (d *decoder) list(loc string, s span, nullable bool) bool {
	switch s.kind {
	case kNone:
		return false
	case kNull:
		if !nullable {
			d.fail(loc, msgList)
		}
		return false
	case kArray:
		return true
	}
	d.fail(loc, msgList)
	return false
}

// stop converts stop: str | list[str] | None.
func (d *decoder) stop(loc string, s span) []string {
	switch s.kind {
	case kNone, kNull:
		return nil
	case kString:
		return []string{decodeString(d.b[s.start:s.end])}
	case kArray:
		// A failing element is reported at the field itself: pydantic's
		// first error comes from the union's str member.
		var out []string
		bad := false
		each(d.b, s, func(i int, v span) {
			if v.kind != kString {
				bad = true
				return
			}
			out = append(out, decodeString(d.b[v.start:v.end]))
		})
		if bad {
			d.fail(loc, msgString)
			return nil
		}
		return out
	}
	d.fail(loc, msgString)
	return nil
}

// intList type-checks list[int] | None.
func (d *decoder) intList(loc string, s span) {
	if d.list(loc, s, true) {
		each(d.b, s, func(i int, v span) { d.integer(loc+"."+strconv.Itoa(i), v, false) })
	}
}

// ---- Python text of raw values, for messages that embed a value ----

// pyStr is Python's str() of the value json.loads made of s: strings as
// they are, everything else as repr.
func pyStr(b []byte, s span) string {
	if s.kind == kString {
		return decodeString(b[s.start:s.end])
	}
	return pyRepr(b, s)
}

// pyRepr is Python's repr() of the value json.loads made of s.
func pyRepr(b []byte, s span) string {
	switch s.kind {
	case kNone, kNull:
		return "None"
	case kBool:
		if b[s.start] == 't' {
			return "True"
		}
		return "False"
	case kNumber:
		lit := b[s.start:s.end]
		if isIntLiteral(lit) {
			if n, err := strconv.ParseInt(string(lit), 10, 64); err == nil {
				return strconv.FormatInt(n, 10)
			}
			return string(lit) // Python ints are unbounded; json keeps the digits
		}
		f, _ := numberValue(lit)
		return pyFloat(f)
	case kString:
		return pyQuote(decodeString(b[s.start:s.end]))
	case kArray:
		var sb strings.Builder
		sb.WriteByte('[')
		each(b, s, func(i int, v span) {
			if i > 0 {
				sb.WriteString(", ")
			}
			sb.WriteString(pyRepr(b, v))
		})
		sb.WriteByte(']')
		return sb.String()
	case kObject:
		var sb strings.Builder
		sb.WriteByte('{')
		n := 0
		members(b, s, func(k []byte, v span) {
			if n > 0 {
				sb.WriteString(", ")
			}
			n++
			sb.WriteString(pyQuote(string(k)))
			sb.WriteString(": ")
			sb.WriteString(pyRepr(b, v))
		})
		sb.WriteByte('}')
		return sb.String()
	}
	return ""
}

// pyFloat is Python's repr(float).
func pyFloat(f float64) string {
	switch {
	case math.IsNaN(f):
		return "nan"
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	if a := math.Abs(f); a == 0 || (a >= 1e-4 && a < 1e16) {
		s := strconv.FormatFloat(f, 'f', -1, 64)
		if !strings.ContainsRune(s, '.') {
			s += ".0"
		}
		return s
	}
	return strconv.FormatFloat(f, 'e', -1, 64)
}

// pyQuote is Python's repr(str) for printable text: single quotes unless the
// text has a single quote and no double quote; backslash, the quote, \n, \r,
// \t escaped; other control characters as \xNN.
func pyQuote(s string) string {
	q := byte('\'')
	if strings.IndexByte(s, '\'') >= 0 && strings.IndexByte(s, '"') < 0 {
		q = '"'
	}
	var sb strings.Builder
	sb.WriteByte(q)
	for _, r := range s {
		switch {
		case r == '\\' || r == rune(q):
			sb.WriteByte('\\')
			sb.WriteRune(r)
		case r == '\n':
			sb.WriteString(`\n`)
		case r == '\r':
			sb.WriteString(`\r`)
		case r == '\t':
			sb.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			sb.WriteString(`\x`)
			sb.WriteByte(hexDigits[r>>4])
			sb.WriteByte(hexDigits[r&0xf])
		default:
			sb.WriteRune(r)
		}
	}
	sb.WriteByte(q)
	return sb.String()
}

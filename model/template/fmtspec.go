package template

import (
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// strFormat is str.format as the sandbox runs it (SandboxedFormatter, a
// string.Formatter): attribute and item lookups in fields go through the
// sandbox. With escape set (Markup.format), each formatted field that is not
// Markup is HTML-escaped, as markupsafe's EscapeFormatter does.
func (r *renderer) strFormat(s string, args []Value, kw kwargs) (Value, error) {
	return r.format(s, args, kw, false)
}

func (r *renderer) format(s string, args []Value, kw kwargs, escape bool) (Value, error) {
	var b strings.Builder
	auto, manual := 0, false
	for i := 0; i < len(s); {
		c := s[i]
		if c == '}' {
			if i+1 < len(s) && s[i+1] == '}' {
				b.WriteByte('}')
				i += 2
				continue
			}
			return nil, valueErrorf("Single '}' encountered in format string")
		}
		if c != '{' {
			b.WriteByte(c)
			i++
			continue
		}
		if i+1 < len(s) && s[i+1] == '{' {
			b.WriteByte('{')
			i += 2
			continue
		}
		depth, j := 1, i+1
		for ; j < len(s) && depth > 0; j++ {
			switch s[j] {
			case '{':
				depth++
			case '}':
				depth--
			}
		}
		if depth > 0 {
			return nil, valueErrorf("expected '}' before end of string")
		}
		field := s[i+1 : j-1]
		i = j
		name, conv, spec := field, "", ""
		if k := strings.IndexAny(name, "!:"); k >= 0 {
			rest := name[k:]
			name = name[:k]
			if rest[0] == '!' {
				if len(rest) < 2 || (len(rest) > 2 && rest[2] != ':') {
					return nil, valueErrorf("expected ':' after conversion specifier")
				}
				conv = rest[1:2]
				rest = rest[2:]
			}
			if rest != "" {
				spec = rest[1:]
			}
		}
		if strings.Contains(spec, "{") {
			sub, err := r.format(spec, args, kw, false)
			if err != nil {
				return nil, err
			}
			spec = sub.(string)
		}
		first := name
		k := strings.IndexAny(name, ".[")
		if k >= 0 {
			first = name[:k]
		}
		var v Value
		switch {
		case first == "" && k >= 0:
			// string.Formatter numbers only a bare "{}"; "{.attr}" looks
			// up the keyword "".
			return nil, errf("KeyError", "''")
		case first == "":
			if manual {
				return nil, valueErrorf("cannot switch from manual field specification to automatic field numbering")
			}
			if auto >= len(args) {
				return nil, errf("IndexError", "Replacement index %d out of range for positional args tuple", auto)
			}
			v = args[auto]
			auto++
		case isAllDigits(first):
			if auto > 0 {
				return nil, valueErrorf("cannot switch from automatic field numbering to manual field specification")
			}
			manual = true
			n, _ := strconv.Atoi(first)
			if n >= len(args) {
				return nil, errf("IndexError", "Replacement index %d out of range for positional args tuple", n)
			}
			v = args[n]
		default:
			found := false
			for x, kn := range kw.names {
				if kn == first {
					v, found = kw.vals[x], true
				}
			}
			if !found {
				return nil, errf("KeyError", "%s", pyRepr(first))
			}
		}
		if k >= 0 {
			var err error
			if v, err = r.formatAccess(v, name[k:]); err != nil {
				return nil, err
			}
		}
		switch conv {
		case "r":
			v = pyRepr(v)
		case "s":
			v = pyStr(v)
		case "a":
			v = asciiRepr(pyRepr(v))
		case "":
		default:
			return nil, valueErrorf("Unknown conversion specifier %s", conv)
		}
		out, err := r.formatValue(v, spec)
		if err != nil {
			return nil, err
		}
		if _, isM := v.(Markup); escape && !isM {
			out = htmlEscape(out)
		}
		b.WriteString(out)
		if err := r.checkLen(b.Len()); err != nil {
			return nil, err
		}
	}
	return b.String(), nil
}

func isAllDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isDigitByte(s[i]) {
			return false
		}
	}
	return s != ""
}

func (r *renderer) formatAccess(v Value, path string) (Value, error) {
	for path != "" {
		if path[0] == '.' {
			end := strings.IndexAny(path[1:], ".[")
			if end < 0 {
				end = len(path) - 1
			}
			if u, ok := v.(*Undefined); ok {
				return nil, u.err()
			}
			v = r.getattr(v, path[1:1+end])
			path = path[1+end:]
			continue
		}
		end := strings.IndexByte(path, ']')
		if path[0] != '[' || end < 0 {
			return nil, valueErrorf("Only '.' or '[' may follow ']' in format field specifier")
		}
		key := path[1:end]
		var kv Value = key
		if isAllDigits(key) {
			n, _ := strconv.ParseInt(key, 10, 64)
			kv = n
		}
		var err error
		if v, err = r.getitem(v, kv); err != nil {
			return nil, err
		}
		path = path[end+1:]
	}
	return v, nil
}

func parseSpec(spec string) (fmtSpec, error) {
	sp := fmtSpec{prec: -1}
	rs := []rune(spec)
	i := 0
	isAlign := func(c rune) bool { return c == '<' || c == '>' || c == '=' || c == '^' }
	if len(rs) >= 2 && isAlign(rs[1]) {
		sp.fill, sp.align = rs[0], byte(rs[1])
		i = 2
	} else if len(rs) >= 1 && isAlign(rs[0]) {
		sp.align = byte(rs[0])
		i = 1
	}
	if i < len(rs) && (rs[i] == '+' || rs[i] == '-' || rs[i] == ' ') {
		sp.sign = byte(rs[i])
		i++
	}
	if i < len(rs) && rs[i] == 'z' {
		i++
	}
	if i < len(rs) && rs[i] == '#' {
		sp.alt = true
		i++
	}
	if i < len(rs) && rs[i] == '0' {
		sp.zero = true
		i++
	}
	for i < len(rs) && rs[i] >= '0' && rs[i] <= '9' {
		sp.width = min(sp.width*10+int(rs[i]-'0'), math.MaxInt32)
		i++
	}
	if i < len(rs) && (rs[i] == ',' || rs[i] == '_') {
		sp.grouping = byte(rs[i])
		i++
	}
	if i < len(rs) && rs[i] == '.' {
		i++
		if i >= len(rs) || rs[i] < '0' || rs[i] > '9' {
			return sp, valueErrorf("Format specifier missing precision")
		}
		sp.prec = 0
		for i < len(rs) && rs[i] >= '0' && rs[i] <= '9' {
			sp.prec = min(sp.prec*10+int(rs[i]-'0'), math.MaxInt32)
			i++
		}
	}
	if i < len(rs) {
		sp.typ = byte(rs[i])
		i++
	}
	if i < len(rs) || sp.typ >= utf8.RuneSelf {
		return sp, valueErrorf("Invalid format specifier '%s'", spec)
	}
	if sp.zero && sp.align == 0 {
		sp.fill, sp.align = '0', '='
	}
	return sp, nil
}

// formatValue is Python's format(v, spec).
func (r *renderer) formatValue(v Value, spec string) (string, error) {
	if spec == "" {
		return pyStr(v), nil
	}
	sp, err := parseSpec(spec)
	if err != nil {
		return "", err
	}
	if err := r.checkLen(sp.width + max(sp.prec, 0)); err != nil {
		return "", err
	}
	switch x := v.(type) {
	case string, Markup:
		s := pyStr(x)
		if sp.typ != 0 && sp.typ != 's' {
			return "", valueErrorf("Unknown format code '%c' for object of type 'str'", sp.typ)
		}
		if sp.sign != 0 {
			return "", valueErrorf("Sign not allowed in string format specifier")
		}
		if sp.align == '=' {
			if sp.fill == '0' && sp.zero {
				sp.align = '<'
			} else {
				return "", valueErrorf("'=' alignment not allowed in string format specifier")
			}
		}
		if sp.prec >= 0 {
			s = truncRunes(s, sp.prec)
		}
		if sp.align == 0 {
			sp.align = '<'
		}
		return sp.pad(s, ""), nil
	case bool, int64:
		return sp.formatIntSpec(v)
	case float64:
		return sp.formatFloatSpec(x)
	}
	if k, _, _, _ := numeric(v); k == 2 {
		return sp.formatIntSpec(v)
	}
	return "", typeErrorf("unsupported format string passed to %s.__format__", typeName(v))
}

func (sp fmtSpec) formatIntSpec(v Value) (string, error) {
	switch sp.typ {
	case 0, 'd', 'n':
		return sp.formatInt(toBig(v), 'd')
	case 'b', 'o', 'x', 'X':
		return sp.formatInt(toBig(v), sp.typ)
	case 'c':
		i, _ := intArg(v, "c")
		if i < 0 || i > 0x10ffff {
			return "", errf("OverflowError", "%%c arg not in range(0x110000)")
		}
		if sp.align == 0 {
			sp.align = '<'
		}
		return sp.pad(string(rune(i)), ""), nil
	case 'e', 'E', 'f', 'F', 'g', 'G', '%':
		f, err := toFloat(v)
		if err != nil {
			return "", err
		}
		return sp.formatFloatSpec(f)
	}
	return "", valueErrorf("Unknown format code '%c' for object of type 'int'", sp.typ)
}

func (sp fmtSpec) formatFloatSpec(f float64) (string, error) {
	switch sp.typ {
	case 0:
		if sp.prec < 0 {
			neg := math.Signbit(f) && !math.IsNaN(f)
			body := floatRepr(math.Abs(f))
			if sp.align == 0 {
				sp.align = '>'
			}
			return sp.pad(body, sp.signOf(neg)), nil
		}
		return sp.formatFloat(f, 'r'), nil
	case 'n':
		sp.typ = 'g'
		return sp.formatFloatSpec(f)
	case 'e', 'E', 'f', 'F', 'g', 'G', '%':
		if sp.prec < 0 {
			sp.prec = 6
		}
		return sp.formatFloat(f, sp.typ), nil
	}
	return "", valueErrorf("Unknown format code '%c' for object of type 'float'", sp.typ)
}

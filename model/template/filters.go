package template

import (
	"html"
	"math"
	"math/big"
	"strconv"
	"strings"
	"unicode"
)

// filterDef is one filter: params after the filtered value, their defaults
// (missing = required), and the implementation. raw filters take *args and
// **kwargs themselves.
type filterDef struct {
	name     string
	params   []string
	defaults []Value
	fn       func(r *renderer, v Value, a []Value) (Value, error)
	raw      func(r *renderer, v Value, args []Value, kw kwargs) (Value, error)
}

func (d *filterDef) call(r *renderer, v Value, args []Value, kw kwargs) (Value, error) {
	if d.raw != nil {
		return d.raw(r, v, args, kw)
	}
	a, err := bind(d.name, d.params, args, kw)
	if err != nil {
		return nil, err
	}
	for i := range a {
		if a[i] == missing {
			if d.defaults[i] == missing {
				return nil, typeErrorf("%s() missing required argument: '%s'", d.name, d.params[i])
			}
			a[i] = d.defaults[i]
		}
	}
	return d.fn(r, v, a)
}

// filters is the filter table: Jinja2 3.1's builtins with transformers'
// tojson. It is filled once in init (map, select and friends look filters
// and tests up by name) and never changed afterwards.
var filters map[string]*filterDef

func def(name string, params string, defaults []Value, fn func(r *renderer, v Value, a []Value) (Value, error)) *filterDef {
	return &filterDef{name: name, params: strings.Fields(params), defaults: defaults, fn: fn}
}

func rawDef(name string, fn func(r *renderer, v Value, args []Value, kw kwargs) (Value, error)) *filterDef {
	return &filterDef{name: name, raw: fn}
}

func vals(v ...Value) []Value { return v }

func unsupportedFilter(name, why string) *filterDef {
	return rawDef(name, func(*renderer, Value, []Value, kwargs) (Value, error) {
		return nil, errf("UnsupportedError", "filter %s is not supported: %s", name, why)
	})
}

func init() {
	filters = map[string]*filterDef{
		"abs":            def("abs", "", nil, fAbs),
		"attr":           def("attr", "name", vals(missing), fAttr),
		"batch":          def("batch", "linecount fill_with", vals(missing, nil), fBatch),
		"capitalize":     def("capitalize", "", nil, strFilter(pyCapitalize)),
		"center":         def("center", "width", vals(int64(80)), fCenter),
		"count":          def("count", "", nil, fLength),
		"d":              def("default", "default_value boolean", vals("", false), fDefault),
		"default":        def("default", "default_value boolean", vals("", false), fDefault),
		"dictsort":       def("dictsort", "case_sensitive by reverse", vals(false, "key", false), fDictsort),
		"e":              def("escape", "", nil, fEscape),
		"escape":         def("escape", "", nil, fEscape),
		"filesizeformat": def("filesizeformat", "binary", vals(false), fFilesize),
		"first":          def("first", "", nil, fFirst),
		"float":          def("float", "default", vals(0.0), fFloat),
		"forceescape":    def("forceescape", "", nil, fForceEscape),
		"format":         rawDef("format", fFormat),
		"groupby":        def("groupby", "attribute default case_sensitive", vals(missing, nil, false), fGroupby),
		"indent":         def("indent", "width first blank", vals(int64(4), false, false), fIndent),
		"int":            def("int", "default base", vals(int64(0), int64(10)), fInt),
		"items":          def("items", "", nil, fItems),
		"join":           def("join", "d attribute", vals("", nil), fJoin),
		"last":           def("last", "", nil, fLast),
		"length":         def("length", "", nil, fLength),
		"list":           def("list", "", nil, fList),
		"lower":          def("lower", "", nil, strFilter(pyLower)),
		"map":            rawDef("map", fMap),
		"max":            def("max", "case_sensitive attribute", vals(false, nil), fMax),
		"min":            def("min", "case_sensitive attribute", vals(false, nil), fMin),
		"pprint":         unsupportedFilter("pprint", "pprint.pformat line wrapping is not reproduced"),
		"random":         unsupportedFilter("random", "templates get no randomness"),
		"reject":         rawDef("reject", selectFilter(false, false)),
		"rejectattr":     rawDef("rejectattr", selectFilter(false, true)),
		"replace":        def("replace", "old new count", vals(missing, missing, nil), fReplace),
		"reverse":        def("reverse", "", nil, fReverse),
		"round":          def("round", "precision method", vals(int64(0), "common"), fRound),
		"safe":           def("safe", "", nil, fSafe),
		"select":         rawDef("select", selectFilter(true, false)),
		"selectattr":     rawDef("selectattr", selectFilter(true, true)),
		"slice":          def("slice", "slices fill_with", vals(missing, nil), fSlice),
		"sort":           def("sort", "reverse case_sensitive attribute", vals(false, false, nil), fSort),
		"string":         def("string", "", nil, fString),
		"striptags":      def("striptags", "", nil, fStriptags),
		"sum":            def("sum", "attribute start", vals(nil, int64(0)), fSum),
		"title":          def("title", "", nil, strFilter(jinjaTitle)),
		"tojson":         def("tojson", "ensure_ascii indent separators sort_keys", vals(false, nil, nil, false), fToJSON),
		"trim":           def("trim", "chars", vals(nil), fTrim),
		"truncate":       def("truncate", "length killwords end leeway", vals(int64(255), false, "...", nil), fTruncate),
		"unique":         def("unique", "case_sensitive attribute", vals(false, nil), fUnique),
		"upper":          def("upper", "", nil, strFilter(pyUpper)),
		"urlencode":      def("urlencode", "", nil, fURLEncode),
		"urlize":         unsupportedFilter("urlize", "not implemented"),
		"wordcount":      def("wordcount", "", nil, fWordcount),
		"wordwrap":       unsupportedFilter("wordwrap", "textwrap is not reproduced"),
		"xmlattr":        unsupportedFilter("xmlattr", "not implemented"),
	}
}

// softStr is jinja2's soft_str: Markup stays Markup, all else is str().
func softStr(v Value) Value {
	if m, ok := v.(Markup); ok {
		return m
	}
	return pyStr(v)
}

func strFilter(f func(string) string) func(*renderer, Value, []Value) (Value, error) {
	return func(_ *renderer, v Value, _ []Value) (Value, error) {
		if m, ok := v.(Markup); ok {
			return Markup(f(string(m))), nil
		}
		return f(pyStr(v)), nil
	}
}

// jinjaTitle is the title filter: the first character of every word after
// [-\s({[<]+ upper-cased, the rest lower-cased.
func jinjaTitle(s string) string {
	var b strings.Builder
	isSep := func(r rune) bool { return pyIsSpace(r) || strings.ContainsRune("-({[<", r) }
	atStart := true
	for _, c := range s {
		switch {
		case isSep(c):
			b.WriteRune(c)
			atStart = true
		case atStart:
			b.WriteString(pyUpper(string(c)))
			atStart = false
		default:
			lowerRune(&b, c)
		}
	}
	return b.String()
}

func fAbs(_ *renderer, v Value, _ []Value) (Value, error) {
	switch x := v.(type) {
	case bool:
		return int64(btoi(x)), nil
	case int64:
		if x < 0 {
			return negate(x)
		}
		return x, nil
	case *big.Int:
		return normBig(new(big.Int).Abs(x)), nil
	case float64:
		return math.Abs(x), nil
	}
	return nil, typeErrorf("bad operand type for abs(): '%s'", typeName(v))
}

func fAttr(r *renderer, v Value, a []Value) (Value, error) {
	name, ok := a[0].(string)
	if !ok {
		return nil, typeErrorf("attribute name must be string, not '%s'", typeName(a[0]))
	}
	if u, ok := v.(*Undefined); ok {
		return nil, u.err()
	}
	if x, ok := pyAttr(v, name); ok {
		return x, nil
	}
	return undefinedAttr(v, name), nil
}

func fCenter(r *renderer, v Value, a []Value) (Value, error) {
	return r.strMethod(pyStr(v), "center", a[:1], kwargs{})
}

func fDefault(_ *renderer, v Value, a []Value) (Value, error) {
	if _, ok := v.(*Undefined); ok || (truth(a[1]) && !truth(v)) {
		return a[0], nil
	}
	return v, nil
}

func fEscape(_ *renderer, v Value, _ []Value) (Value, error) {
	if m, ok := v.(Markup); ok {
		return m, nil
	}
	return Markup(htmlEscape(pyStr(v))), nil
}

func fForceEscape(_ *renderer, v Value, _ []Value) (Value, error) {
	return Markup(htmlEscape(pyStr(v))), nil
}

func fSafe(_ *renderer, v Value, _ []Value) (Value, error) { return Markup(pyStr(v)), nil }

func fString(_ *renderer, v Value, _ []Value) (Value, error) { return softStr(v), nil }

func fFilesize(_ *renderer, v Value, a []Value) (Value, error) {
	n, err := pyFloat(v)
	if err != nil {
		return nil, err
	}
	base := 1000.0
	prefixes := []string{"kB", "MB", "GB", "TB", "PB", "EB", "ZB", "YB"}
	if truth(a[0]) {
		base = 1024
		prefixes = []string{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB", "YiB"}
	}
	switch {
	case n == 1:
		return "1 Byte", nil
	case n < base:
		return strconv.FormatInt(int64(n), 10) + " Bytes", nil
	}
	unit := 0.0
	for i, p := range prefixes {
		unit = math.Pow(base, float64(i+2))
		if n < unit || i == len(prefixes)-1 {
			return strconv.FormatFloat(base*n/unit, 'f', 1, 64) + " " + p, nil
		}
	}
	return nil, nil
}

func fFloat(_ *renderer, v Value, a []Value) (Value, error) {
	if u, ok := v.(*Undefined); ok {
		return nil, u.err()
	}
	f, err := pyFloat(v)
	if err != nil {
		if e, ok := err.(*Error); ok && (e.Kind == "TypeError" || e.Kind == "ValueError") {
			return a[0], nil
		}
		return nil, err
	}
	return f, nil
}

// pyFloat is Python's float(v).
func pyFloat(v Value) (float64, error) {
	switch x := v.(type) {
	case string:
		return parsePyFloat(x)
	case Markup:
		return parsePyFloat(string(x))
	case *Undefined:
		return 0, x.err()
	}
	if isNumber(v) {
		return toFloat(v)
	}
	return 0, typeErrorf("float() argument must be a string or a real number, not '%s'", typeName(v))
}

// parsePyFloat accepts what float(str) accepts: surrounding whitespace,
// underscores between digits, inf/infinity/nan in any case.
func parsePyFloat(s string) (float64, error) {
	t := strings.TrimFunc(s, pyIsSpace)
	bad := valueErrorf("could not convert string to float: %s", pyRepr(s))
	body := strings.TrimLeft(t, "+-")
	if len(t)-len(body) > 1 {
		return 0, bad
	}
	switch strings.ToLower(body) {
	case "inf", "infinity", "nan":
		f, _ := strconv.ParseFloat(t, 64)
		return f, nil
	}
	if body == "" || strings.ContainsAny(body, "xXpP") || !validUnderscores(body) {
		return 0, bad
	}
	f, err := strconv.ParseFloat(strings.ReplaceAll(t, "_", ""), 64)
	if err != nil {
		if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
			return f, nil
		}
		return 0, bad
	}
	return f, nil
}

func validUnderscores(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == '_' && (i == 0 || i == len(s)-1 || !isDigitByte(s[i-1]) || !isDigitByte(s[i+1])) {
			return false
		}
	}
	return true
}

// parsePyInt is int(s, base).
func parsePyInt(s string, base int64) (Value, error) {
	bad := valueErrorf("invalid literal for int() with base %d: %s", base, pyRepr(s))
	t := strings.TrimFunc(s, pyIsSpace)
	neg := false
	if t != "" && (t[0] == '+' || t[0] == '-') {
		neg = t[0] == '-'
		t = t[1:]
	}
	if base != 0 && (base < 2 || base > 36) {
		return nil, valueErrorf("int() base must be >= 2 and <= 36, or 0")
	}
	if len(t) > 1 && t[0] == '0' {
		p := t[1] | 0x20
		if (p == 'x' && (base == 16 || base == 0)) || (p == 'o' && (base == 8 || base == 0)) || (p == 'b' && (base == 2 || base == 0)) {
			base = map[byte]int64{'x': 16, 'o': 8, 'b': 2}[p]
			t = strings.TrimPrefix(t[2:], "_")
		}
	}
	if base == 0 {
		if len(t) > 1 && t[0] == '0' && strings.Trim(t, "0_") != "" {
			return nil, bad
		}
		base = 10
	}
	if t == "" || !validUnderscoresAlnum(t) {
		return nil, bad
	}
	b, ok := new(big.Int).SetString(strings.ReplaceAll(t, "_", ""), int(base))
	if !ok {
		return nil, bad
	}
	if neg {
		b.Neg(b)
	}
	return normBig(b), nil
}

func validUnderscoresAlnum(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == '_' && (i == 0 || i == len(s)-1 || s[i+1] == '_') {
			return false
		}
	}
	return true
}

// fInt is jinja2's do_int.
func fInt(_ *renderer, v Value, a []Value) (Value, error) {
	if u, ok := v.(*Undefined); ok {
		return nil, u.err()
	}
	dflt := a[0]
	base, err := intArg(a[1], "base")
	if err != nil {
		return nil, err
	}
	var first error
	switch x := v.(type) {
	case string, Markup:
		var iv Value
		iv, first = parsePyInt(pyStr(x), base)
		if first == nil {
			return iv, nil
		}
	case bool, int64, *big.Int:
		return normBig(toBig(x)), nil
	case float64:
		if math.IsNaN(x) {
			return dflt, nil // ValueError, caught twice
		}
		if math.IsInf(x, 0) {
			return nil, errf("OverflowError", "cannot convert float infinity to integer")
		}
		b, _ := big.NewFloat(math.Trunc(x)).Int(nil)
		return normBig(b), nil
	}
	_ = first
	f, err := pyFloat(v)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return dflt, nil
	}
	b, _ := big.NewFloat(math.Trunc(f)).Int(nil)
	return normBig(b), nil
}

func fFormat(r *renderer, v Value, args []Value, kw kwargs) (Value, error) {
	if len(args) > 0 && kw.len() > 0 {
		return nil, errf("FilterArgumentError", "can't handle positional and keyword arguments at the same time")
	}
	var arg Value = Tuple(args)
	if kw.len() > 0 {
		arg = kw.toDict()
	}
	if m, ok := v.(Markup); ok {
		s, err := r.printf(string(m), arg, true)
		return Markup(s), err
	}
	return r.printf(pyStr(v), arg, false)
}

func fIndent(r *renderer, v Value, a []Value) (Value, error) {
	var s string
	switch x := v.(type) {
	case string:
		s = x
	case Markup:
		s = string(x)
	case *Undefined:
		return nil, x.err()
	case List:
		// list += "\n" extends the list; then s.splitlines() fails.
		return nil, errf("AttributeError", "'list' object has no attribute 'splitlines'")
	default:
		return nil, typeErrorf("unsupported operand type(s) for +=: '%s' and 'str'", typeName(v))
	}
	var ind string
	if w, ok := a[0].(string); ok {
		ind = w
	} else {
		n, err := intArg(a[0], "width")
		if err != nil {
			return nil, typeErrorf("can't multiply sequence by non-int of type '%s'", typeName(a[0]))
		}
		if err := r.checkLen(int(min(max(n, 0), int64(r.opts.MaxOutputBytes)+1))); err != nil {
			return nil, err
		}
		ind = strings.Repeat(" ", int(max(n, 0)))
	}
	lines := splitLines(s+"\n", false)
	if err := r.checkLen(len(s) + len(lines)*len(ind)); err != nil {
		return nil, err
	}
	var b strings.Builder
	if truth(a[2]) {
		for i, l := range lines {
			if i > 0 {
				b.WriteString("\n")
				b.WriteString(ind)
			}
			b.WriteString(l.(string))
		}
	} else {
		b.WriteString(lines[0].(string))
		for _, l := range lines[1:] {
			b.WriteString("\n")
			if l.(string) != "" {
				b.WriteString(ind)
			}
			b.WriteString(l.(string))
		}
	}
	out := b.String()
	if truth(a[1]) {
		out = ind + out
	}
	if _, ok := v.(Markup); ok {
		return Markup(out), nil
	}
	return out, nil
}

func fReplace(r *renderer, v Value, a []Value) (Value, error) {
	var count Value = int64(-1)
	if a[2] != nil {
		count = a[2]
	}
	s := pyStr(v)
	out, err := r.strMethod(s, "replace", []Value{pyStr(a[0]), pyStr(a[1]), count}, kwargs{})
	if _, ok := v.(Markup); ok && err == nil {
		return Markup(out.(string)), nil
	}
	return out, err
}

func fRound(_ *renderer, v Value, a []Value) (Value, error) {
	method, _ := a[1].(string)
	if method != "common" && method != "ceil" && method != "floor" {
		return nil, errf("FilterArgumentError", "method must be common, ceil or floor")
	}
	prec, err := intArg(a[0], "precision")
	if err != nil {
		return nil, err
	}
	if !isNumber(v) {
		return nil, typeErrorf("type %s doesn't define __round__ method", typeName(v))
	}
	if method == "common" {
		if _, isF := v.(float64); !isF {
			if prec >= 0 {
				return normBig(toBig(v)), nil
			}
			p := new(big.Int).Exp(big.NewInt(10), big.NewInt(-prec), nil)
			x := toBig(v)
			q, m := new(big.Int).DivMod(x, p, new(big.Int))
			twice := new(big.Int).Mul(m, big.NewInt(2))
			if c := twice.Cmp(p); c > 0 || (c == 0 && q.Bit(0) == 1) {
				q.Add(q, big.NewInt(1))
			}
			return normBig(q.Mul(q, p)), nil
		}
		return pyRoundFloat(v.(float64), int(max(min(prec, 400), -400))), nil
	}
	f, err := toFloat(v)
	if err != nil {
		return nil, err
	}
	scale := math.Pow(10, float64(prec))
	if method == "ceil" {
		return math.Ceil(f*scale) / scale, nil
	}
	return math.Floor(f*scale) / scale, nil
}

// pyRoundFloat is round(x, n) for a float: correctly rounded, ties to even.
func pyRoundFloat(x float64, n int) float64 {
	if math.IsInf(x, 0) || math.IsNaN(x) || x == 0 {
		return x
	}
	if n >= 0 {
		if n > 330 {
			return x
		}
		f, _ := strconv.ParseFloat(strconv.FormatFloat(x, 'f', n, 64), 64)
		return f
	}
	scale := math.Pow(10, float64(-n))
	return math.Copysign(math.RoundToEven(x/scale)*scale, x)
}

func fStriptags(_ *renderer, v Value, _ []Value) (Value, error) {
	return stripTags(pyStr(v)), nil
}

// stripTags is markupsafe.Markup.striptags: drop comments and tags, collapse
// whitespace, unescape entities.
func stripTags(s string) string {
	for {
		i := strings.Index(s, "<!--")
		if i < 0 {
			break
		}
		j := strings.Index(s[i:], "-->")
		if j < 0 {
			break
		}
		s = s[:i] + s[i+j+3:]
	}
	for {
		i := strings.IndexByte(s, '<')
		if i < 0 {
			break
		}
		j := strings.IndexByte(s[i:], '>')
		if j < 0 {
			break
		}
		s = s[:i] + s[i+j+1:]
	}
	return htmlUnescape(strings.Join(strings.FieldsFunc(s, pyIsSpace), " "))
}

func htmlUnescape(s string) string { return html.UnescapeString(s) }

func fTrim(_ *renderer, v Value, a []Value) (Value, error) {
	out, err := pyStrip(pyStr(v), a[0], true, true)
	if _, ok := v.(Markup); ok && err == nil {
		return Markup(out.(string)), nil
	}
	return out, err
}

func fTruncate(_ *renderer, v Value, a []Value) (Value, error) {
	var s string
	switch x := v.(type) {
	case string:
		s = x
	case Markup:
		s = string(x)
	case *Undefined:
		return x, nil // len(Undefined) is 0
	case List, Tuple, *Dict:
		// len() works; only a value longer than length+leeway reaches the
		// string operations, which then fail.
		n, _ := pyLen(x)
		length, err := intArg(a[0], "length")
		if err != nil {
			return nil, err
		}
		leeway := int64(5)
		if a[3] != nil {
			if leeway, err = intArg(a[3], "leeway"); err != nil {
				return nil, err
			}
		}
		if int64(n) <= length+leeway {
			return v, nil
		}
		return nil, typeErrorf("truncate: '%s' object is not a string", typeName(v))
	default:
		return nil, typeErrorf("object of type '%s' has no len()", typeName(v))
	}
	length, err := intArg(a[0], "length")
	if err != nil {
		return nil, err
	}
	end := pyStr(a[2])
	leeway := int64(5)
	if a[3] != nil {
		if leeway, err = intArg(a[3], "leeway"); err != nil {
			return nil, err
		}
	}
	endLen := int64(len([]rune(end)))
	if length < endLen {
		return nil, errf("AssertionError", "expected length >= %d, got %d", endLen, length)
	}
	if leeway < 0 {
		return nil, errf("AssertionError", "expected leeway >= 0, got %d", leeway)
	}
	rs := []rune(s)
	if int64(len(rs)) <= length+leeway {
		return s, nil
	}
	head := string(rs[:length-endLen])
	if truth(a[1]) {
		return head + end, nil
	}
	if i := strings.LastIndex(head, " "); i >= 0 {
		head = head[:i]
	}
	return head + end, nil
}

func fWordcount(_ *renderer, v Value, _ []Value) (Value, error) {
	n, in := int64(0), false
	for _, c := range pyStr(v) {
		w := c == '_' || unicode.IsLetter(c) || unicode.IsNumber(c)
		if w && !in {
			n++
		}
		in = w
	}
	return n, nil
}

func urlQuote(s string, forQS bool) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '.', c == '-', c == '~':
			b.WriteByte(c)
		case c == '/' && !forQS:
			b.WriteByte(c)
		case c == ' ' && forQS:
			b.WriteByte('+')
		default:
			b.WriteByte('%')
			b.WriteByte("0123456789ABCDEF"[c>>4])
			b.WriteByte("0123456789ABCDEF"[c&15])
		}
	}
	return b.String()
}

func fURLEncode(r *renderer, v Value, _ []Value) (Value, error) {
	var pairs []Value
	switch x := v.(type) {
	case string, Markup:
		return urlQuote(pyStr(x), false), nil
	case *Dict:
		pairs = (&dictView{d: x, kind: "items"}).items()
	case List, Tuple, *generator, *rangeVal, *dictView, *Undefined, *groupTuple:
		items, err := r.iterate(v)
		if err != nil {
			return nil, err
		}
		pairs = items
	default:
		return urlQuote(pyStr(v), false), nil
	}
	parts := make([]string, 0, len(pairs))
	for _, p := range pairs {
		kv, err := r.iterate(p)
		switch {
		case err != nil:
			return nil, typeErrorf("cannot unpack non-iterable %s object", typeName(p))
		case len(kv) > 2:
			return nil, valueErrorf("too many values to unpack (expected 2)")
		case len(kv) < 2:
			return nil, valueErrorf("not enough values to unpack (expected 2, got %d)", len(kv))
		}
		parts = append(parts, urlQuote(pyStr(kv[0]), true)+"="+urlQuote(pyStr(kv[1]), true))
	}
	return strings.Join(parts, "&"), nil
}

// fToJSON is transformers' tojson: json.dumps(x, ensure_ascii=False,
// indent=None, separators=None, sort_keys=False), so the first positional
// argument is ensure_ascii, as in transformers.
func fToJSON(r *renderer, v Value, a []Value) (Value, error) {
	o := defaultJSONOpts()
	o.ensureASCII = truth(a[0])
	if a[1] != nil {
		o.hasIndent = true
		o.itemSep = ","
		switch x := a[1].(type) {
		case string:
			o.indent = x
		default:
			n, err := intArg(x, "indent")
			if err != nil {
				return nil, typeErrorf("can't multiply sequence by non-int of type '%s'", typeName(x))
			}
			if err := r.checkLen(int(min(max(n, 0), int64(r.opts.MaxOutputBytes)+1))); err != nil {
				return nil, err
			}
			o.indent = strings.Repeat(" ", int(max(n, 0)))
		}
	}
	if a[2] != nil {
		seps, err := r.iterate(a[2])
		if err != nil || len(seps) != 2 {
			return nil, valueErrorf("separators must be an (item_separator, key_separator) pair")
		}
		i, ok1 := strArg(seps[0])
		k, ok2 := strArg(seps[1])
		if !ok1 || !ok2 {
			return nil, typeErrorf("separators must be strings")
		}
		o.itemSep, o.keySep = i, k
	}
	o.sortKeys = truth(a[3])
	var b strings.Builder
	if err := writeJSON(&b, v, o, 0); err != nil {
		return nil, err
	}
	if err := r.checkLen(b.Len()); err != nil {
		return nil, err
	}
	return b.String(), nil
}

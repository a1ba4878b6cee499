package template

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Python str methods, with their arguments and CPython's edge cases.
// Indexes are in code points, as in Python.

func (r *renderer) strMethod(s, name string, args []Value, kw kwargs) (Value, error) {
	// Methods that take keyword arguments in CPython 3.11.
	switch name {
	case "split", "rsplit":
		a, err := bind(name, []string{"sep", "maxsplit"}, args, kw)
		if err != nil {
			return nil, err
		}
		return pySplit(s, a[0], a[1], name == "rsplit")
	case "splitlines":
		a, err := bind(name, []string{"keepends"}, args, kw)
		if err != nil {
			return nil, err
		}
		return splitLines(s, a[0] != missing && truth(a[0])), nil
	case "expandtabs":
		a, err := bind(name, []string{"tabsize"}, args, kw)
		if err != nil {
			return nil, err
		}
		size := int64(8)
		if a[0] != missing {
			if size, err = intArg(a[0], name); err != nil {
				return nil, err
			}
		}
		return r.expandTabs(s, size)
	case "format":
		return r.strFormat(s, args, kw)
	}
	if kw.len() > 0 {
		return nil, typeErrorf("str.%s() takes no keyword arguments", name)
	}
	nargs := func(lo, hi int) error {
		if len(args) < lo || len(args) > hi {
			return typeErrorf("str.%s() takes from %d to %d arguments (%d given)", name, lo, hi, len(args))
		}
		return nil
	}
	switch name {
	case "strip", "lstrip", "rstrip":
		if err := nargs(0, 1); err != nil {
			return nil, err
		}
		var chars Value
		if len(args) == 1 {
			chars = args[0]
		}
		return pyStrip(s, chars, name != "rstrip", name != "lstrip")
	case "upper", "lower", "title", "capitalize", "swapcase", "casefold":
		if err := nargs(0, 0); err != nil {
			return nil, err
		}
		switch name {
		case "upper":
			return pyUpper(s), nil
		case "lower":
			return pyLower(s), nil
		case "title":
			return pyTitle(s), nil
		case "capitalize":
			return pyCapitalize(s), nil
		case "swapcase":
			return pySwapcase(s), nil
		}
		return mapRunes(s, pyCasefoldExceptions, unicode.ToLower), nil
	case "startswith", "endswith":
		if err := nargs(1, 3); err != nil {
			return nil, err
		}
		return tailMatch(s, args, name == "endswith")
	case "find", "rfind", "index", "rindex", "count":
		if err := nargs(1, 3); err != nil {
			return nil, err
		}
		sub, ok := strArg(args[0])
		if !ok {
			return nil, typeErrorf("must be str, not %s", typeName(args[0]))
		}
		rs, start, end, err := adjustIndices(s, args[1:])
		if err != nil {
			return nil, err
		}
		if name == "count" {
			return strCount(rs, sub, start, end), nil
		}
		i := strFind(rs, sub, start, end, name[0] == 'r')
		if i < 0 && strings.HasSuffix(name, "index") {
			return nil, valueErrorf("substring not found")
		}
		return int64(i), nil
	case "replace":
		if err := nargs(2, 3); err != nil {
			return nil, err
		}
		old, ok1 := strArg(args[0])
		nw, ok2 := strArg(args[1])
		if !ok1 || !ok2 {
			return nil, typeErrorf("replace() argument must be str")
		}
		n := int64(-1)
		if len(args) == 3 {
			var err error
			if n, err = intArg(args[2], "replace"); err != nil {
				return nil, err
			}
		}
		if n < 0 || n > int64(len(s))+1 {
			n = -1
		}
		if old == "" && nw != "" {
			cnt := utf8.RuneCountInString(s) + 1
			if n >= 0 && int(n) < cnt {
				cnt = int(n)
			}
			if err := r.checkLen(len(s) + cnt*len(nw)); err != nil {
				return nil, err
			}
		} else if len(nw) > len(old) && old != "" {
			if err := r.checkLen(len(s) + strings.Count(s, old)*(len(nw)-len(old))); err != nil {
				return nil, err
			}
		}
		return strings.Replace(s, old, nw, int(n)), nil
	case "join":
		if err := nargs(1, 1); err != nil {
			return nil, err
		}
		items, err := r.iterate(args[0])
		if err != nil {
			return nil, typeErrorf("can only join an iterable")
		}
		parts := make([]string, len(items))
		n := 0
		for i, it := range items {
			p, ok := strArg(it)
			if !ok {
				return nil, typeErrorf("sequence item %d: expected str instance, %s found", i, typeName(it))
			}
			parts[i] = p
			n += len(p) + len(s)
		}
		if err := r.checkLen(n); err != nil {
			return nil, err
		}
		return strings.Join(parts, s), nil
	case "center", "ljust", "rjust":
		if err := nargs(1, 2); err != nil {
			return nil, err
		}
		w, err := intArg(args[0], name)
		if err != nil {
			return nil, err
		}
		fill := " "
		if len(args) == 2 {
			f, ok := strArg(args[1])
			if !ok || utf8.RuneCountInString(f) != 1 {
				return nil, typeErrorf("The fill character must be exactly one character long")
			}
			fill = f
		}
		if err := r.checkLen(int(min(w, int64(r.opts.MaxOutputBytes)+1)) * len(fill)); err != nil {
			return nil, err
		}
		return pad(s, int(w), fill, name), nil
	case "zfill":
		if err := nargs(1, 1); err != nil {
			return nil, err
		}
		w, err := intArg(args[0], name)
		if err != nil {
			return nil, err
		}
		if err := r.checkLen(int(min(w, int64(r.opts.MaxOutputBytes)+1))); err != nil {
			return nil, err
		}
		return zfill(s, int(w)), nil
	case "partition", "rpartition":
		if err := nargs(1, 1); err != nil {
			return nil, err
		}
		sep, ok := strArg(args[0])
		if !ok {
			return nil, typeErrorf("must be str, not %s", typeName(args[0]))
		}
		if sep == "" {
			return nil, valueErrorf("empty separator")
		}
		var i int
		if name == "partition" {
			i = strings.Index(s, sep)
		} else {
			i = strings.LastIndex(s, sep)
		}
		if i < 0 {
			if name == "partition" {
				return Tuple{s, "", ""}, nil
			}
			return Tuple{"", "", s}, nil
		}
		return Tuple{s[:i], sep, s[i+len(sep):]}, nil
	case "removeprefix", "removesuffix":
		if err := nargs(1, 1); err != nil {
			return nil, err
		}
		a, ok := strArg(args[0])
		if !ok {
			return nil, typeErrorf("%s() argument must be str, not %s", name, typeName(args[0]))
		}
		if name == "removeprefix" {
			return strings.TrimPrefix(s, a), nil
		}
		return strings.TrimSuffix(s, a), nil
	case "isalnum", "isalpha", "isascii", "isdecimal", "isdigit", "isidentifier", "islower",
		"isnumeric", "isprintable", "isspace", "istitle", "isupper":
		if err := nargs(0, 0); err != nil {
			return nil, err
		}
		return strPredicate(s, name), nil
	}
	return nil, errf("UnsupportedError", "str.%s() is not supported", name)
}

func strArg(v Value) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case Markup:
		return string(x), true
	}
	return "", false
}

func pyStrip(s string, chars Value, left, right bool) (Value, error) {
	pred := pyIsSpace
	if chars != nil {
		cs, ok := strArg(chars)
		if !ok {
			return nil, typeErrorf("strip arg must be None or str")
		}
		pred = func(r rune) bool { return strings.ContainsRune(cs, r) }
	}
	if left {
		s = strings.TrimLeftFunc(s, pred)
	}
	if right {
		s = strings.TrimRightFunc(s, pred)
	}
	return s, nil
}

// pySplit is str.split / str.rsplit.
func pySplit(s string, sepV, maxV Value, fromRight bool) (Value, error) {
	maxsplit := int64(-1)
	if maxV != missing {
		var err error
		if maxsplit, err = intArg(maxV, "split"); err != nil {
			return nil, err
		}
	}
	var parts []string
	if sepV == missing || sepV == nil {
		parts = splitWhitespace(s, maxsplit, fromRight)
	} else {
		sep, ok := strArg(sepV)
		if !ok {
			return nil, typeErrorf("must be str or None, not %s", typeName(sepV))
		}
		if sep == "" {
			return nil, valueErrorf("empty separator")
		}
		switch {
		case maxsplit < 0:
			parts = strings.Split(s, sep)
		case !fromRight:
			parts = strings.SplitN(s, sep, int(min(maxsplit, int64(len(s)))+1))
		default:
			for int64(len(parts)) < maxsplit {
				i := strings.LastIndex(s, sep)
				if i < 0 {
					break
				}
				parts = append(parts, s[i+len(sep):])
				s = s[:i]
			}
			parts = append(parts, s)
			reverseStrings(parts)
		}
	}
	out := make(List, len(parts))
	for i, p := range parts {
		out[i] = p
	}
	return out, nil
}

func reverseStrings(p []string) {
	for i, j := 0, len(p)-1; i < j; i, j = i+1, j-1 {
		p[i], p[j] = p[j], p[i]
	}
}

func splitWhitespace(s string, maxsplit int64, fromRight bool) []string {
	var parts []string
	if !fromRight {
		for {
			s = strings.TrimLeftFunc(s, pyIsSpace)
			if s == "" {
				return parts
			}
			if maxsplit >= 0 && int64(len(parts)) >= maxsplit {
				return append(parts, s)
			}
			i := strings.IndexFunc(s, pyIsSpace)
			if i < 0 {
				return append(parts, s)
			}
			parts = append(parts, s[:i])
			s = s[i:]
		}
	}
	for {
		s = strings.TrimRightFunc(s, pyIsSpace)
		if s == "" {
			break
		}
		if maxsplit >= 0 && int64(len(parts)) >= maxsplit {
			parts = append(parts, s)
			break
		}
		i := strings.LastIndexFunc(s, pyIsSpace)
		if i < 0 {
			parts = append(parts, s)
			break
		}
		_, n := utf8.DecodeRuneInString(s[i:])
		parts = append(parts, s[i+n:])
		s = s[:i+n]
	}
	reverseStrings(parts)
	return parts
}

// isLineBreak reports the line boundaries of str.splitlines.
func isLineBreak(r rune) bool {
	switch r {
	case '\n', '\r', '\v', '\f', 0x1c, 0x1d, 0x1e, 0x85, 0x2028, 0x2029:
		return true
	}
	return false
}

func splitLines(s string, keepends bool) List {
	out := List{}
	for len(s) > 0 {
		i := strings.IndexFunc(s, isLineBreak)
		if i < 0 {
			out = append(out, s)
			break
		}
		_, n := utf8.DecodeRuneInString(s[i:])
		end := i + n
		if s[i] == '\r' && end < len(s) && s[end] == '\n' {
			end++
		}
		if keepends {
			out = append(out, s[:end])
		} else {
			out = append(out, s[:i])
		}
		s = s[end:]
	}
	return out
}

func (r *renderer) expandTabs(s string, size int64) (Value, error) {
	var b strings.Builder
	col := int64(0)
	for _, c := range s {
		switch c {
		case '\t':
			if size > 0 {
				n := size - col%size
				if err := r.checkLen(b.Len() + int(min(n, int64(r.opts.MaxOutputBytes)+1))); err != nil {
					return nil, err
				}
				b.WriteString(strings.Repeat(" ", int(n)))
				col += n
			}
		case '\n', '\r':
			b.WriteRune(c)
			col = 0
		default:
			b.WriteRune(c)
			col++
		}
	}
	return b.String(), nil
}

// adjustIndices applies optional start/end arguments (ADJUST_INDICES) and
// returns the string as runes with the clamped bounds.
func adjustIndices(s string, se []Value) ([]rune, int, int, error) {
	rs := []rune(s)
	n := len(rs)
	start, end := 0, n
	get := func(v Value, def int) (int, error) {
		if v == nil {
			return def, nil
		}
		i, err := intArg(v, "slice")
		if err != nil {
			return 0, typeErrorf("slice indices must be integers or None or have an __index__ method")
		}
		if i > int64(n) {
			return n + 1, nil
		}
		if i < -int64(n) {
			return -n - 1, nil
		}
		return int(i), nil
	}
	var err error
	if len(se) > 0 {
		if start, err = get(se[0], 0); err != nil {
			return nil, 0, 0, err
		}
	}
	if len(se) > 1 {
		if end, err = get(se[1], n); err != nil {
			return nil, 0, 0, err
		}
	}
	if end > n {
		end = n
	} else if end < 0 {
		end += n
		if end < 0 {
			end = 0
		}
	}
	if start < 0 {
		start += n
		if start < 0 {
			start = 0
		}
	}
	return rs, start, end, nil
}

func strFind(rs []rune, sub string, start, end int, fromRight bool) int {
	if start > len(rs) || end-start < utf8.RuneCountInString(sub) {
		return -1
	}
	hay := string(rs[start:end])
	var i int
	if fromRight {
		i = strings.LastIndex(hay, sub)
	} else {
		i = strings.Index(hay, sub)
	}
	if i < 0 {
		return -1
	}
	return start + utf8.RuneCountInString(hay[:i])
}

func strCount(rs []rune, sub string, start, end int) int64 {
	if start > len(rs) || end < start {
		return 0
	}
	if sub == "" {
		return int64(end - start + 1)
	}
	return int64(strings.Count(string(rs[start:end]), sub))
}

func tailMatch(s string, args []Value, suffix bool) (Value, error) {
	var subs []string
	switch x := args[0].(type) {
	case string:
		subs = []string{x}
	case Markup:
		subs = []string{string(x)}
	case Tuple:
		for _, e := range x {
			p, ok := strArg(e)
			if !ok {
				return nil, typeErrorf("tuple for startswith must only contain str, not %s", typeName(e))
			}
			subs = append(subs, p)
		}
	default:
		name := "startswith"
		if suffix {
			name = "endswith"
		}
		return nil, typeErrorf("%s first arg must be str or a tuple of str, not %s", name, typeName(args[0]))
	}
	rs, start, end, err := adjustIndices(s, args[1:])
	if err != nil {
		return nil, err
	}
	for _, sub := range subs {
		sr := []rune(sub)
		e := end - len(sr)
		if e < start {
			continue
		}
		if suffix {
			if string(rs[e:end]) == sub {
				return true, nil
			}
		} else if string(rs[start:start+len(sr)]) == sub {
			return true, nil
		}
	}
	return false, nil
}

// pad is str.center/ljust/rjust.
func pad(s string, width int, fill, how string) string {
	n := utf8.RuneCountInString(s)
	if width <= n {
		return s
	}
	marg := width - n
	var left int
	switch how {
	case "ljust":
		left = 0
	case "rjust":
		left = marg
	default:
		left = marg/2 + (marg & width & 1)
	}
	return strings.Repeat(fill, left) + s + strings.Repeat(fill, marg-left)
}

func zfill(s string, width int) string {
	n := utf8.RuneCountInString(s)
	if width <= n {
		return s
	}
	fillN := width - n
	if s != "" && (s[0] == '+' || s[0] == '-') {
		return s[:1] + strings.Repeat("0", fillN) + s[1:]
	}
	return strings.Repeat("0", fillN) + s
}

func mapRunes(s string, exc map[rune]string, simple func(rune) rune) string {
	var b strings.Builder
	b.Grow(len(s))
	for _, c := range s {
		if e, ok := exc[c]; ok {
			b.WriteString(e)
		} else {
			b.WriteRune(simple(c))
		}
	}
	return b.String()
}

func pyUpper(s string) string {
	if isASCII(s) {
		return strings.ToUpper(s)
	}
	return mapRunes(s, pyUpperExceptions, unicode.ToUpper)
}

// pyLower is str.lower, including the final-sigma rule.
func pyLower(s string) string {
	if isASCII(s) {
		return strings.ToLower(s)
	}
	if !strings.ContainsRune(s, 'Σ') {
		return mapRunes(s, pyLowerExceptions, unicode.ToLower)
	}
	rs := []rune(s)
	var b strings.Builder
	for i, c := range rs {
		if c == 'Σ' && finalSigma(rs, i) {
			b.WriteRune('ς')
			continue
		}
		if e, ok := pyLowerExceptions[c]; ok {
			b.WriteString(e)
		} else {
			b.WriteRune(unicode.ToLower(c))
		}
	}
	return b.String()
}

func isCased(r rune) bool { return unicode.IsUpper(r) || unicode.IsLower(r) || unicode.IsTitle(r) }

func isCaseIgnorable(r rune) bool {
	return unicode.In(r, unicode.Mn, unicode.Me, unicode.Cf, unicode.Lm, unicode.Sk) ||
		r == '\'' || r == '.' || r == ':' || r == 0xb7 || r == 0x2019
}

func finalSigma(rs []rune, i int) bool {
	j := i - 1
	for j >= 0 && isCaseIgnorable(rs[j]) {
		j--
	}
	if j < 0 || !isCased(rs[j]) {
		return false
	}
	k := i + 1
	for k < len(rs) && isCaseIgnorable(rs[k]) {
		k++
	}
	return k == len(rs) || !isCased(rs[k])
}

func titleRune(b *strings.Builder, c rune) {
	if e, ok := pyTitleExceptions[c]; ok {
		b.WriteString(e)
	} else {
		b.WriteRune(unicode.ToTitle(c))
	}
}

func lowerRune(b *strings.Builder, c rune) {
	if e, ok := pyLowerExceptions[c]; ok {
		b.WriteString(e)
	} else {
		b.WriteRune(unicode.ToLower(c))
	}
}

// pyTitle is str.title: a cased character after an uncased one is
// title-cased, every other cased character lower-cased.
func pyTitle(s string) string {
	var b strings.Builder
	prevCased := false
	for _, c := range s {
		if prevCased {
			lowerRune(&b, c)
		} else {
			titleRune(&b, c)
		}
		prevCased = isCased(c)
	}
	return b.String()
}

// pyCapitalize is str.capitalize (3.8+): the first character title-cased,
// the rest lower-cased.
func pyCapitalize(s string) string {
	var b strings.Builder
	for i, c := range s {
		if i == 0 {
			titleRune(&b, c)
		} else {
			lowerRune(&b, c)
		}
	}
	return b.String()
}

func pySwapcase(s string) string {
	var b strings.Builder
	for _, c := range s {
		switch {
		case unicode.IsUpper(c):
			lowerRune(&b, c)
		case unicode.IsLower(c):
			if e, ok := pyUpperExceptions[c]; ok {
				b.WriteString(e)
			} else {
				b.WriteRune(unicode.ToUpper(c))
			}
		default:
			b.WriteRune(c)
		}
	}
	return b.String()
}

func isPyDecimal(c rune) bool { return unicode.Is(unicode.Nd, c) }

func isPyDigit(c rune) bool {
	return isPyDecimal(c) || (unicode.Is(unicode.No, c) && digitLike(c))
}

// digitLike approximates Numeric_Type=Digit among No characters:
// superscripts, subscripts and circled/parenthesized digits.
func digitLike(c rune) bool {
	return c == 0xb2 || c == 0xb3 || c == 0xb9 || (c >= 0x2070 && c <= 0x2089) ||
		(c >= 0x2460 && c <= 0x249b) || (c >= 0x24ea && c <= 0x24ff) || (c >= 0x2776 && c <= 0x2793)
}

func strPredicate(s, name string) bool {
	if name == "isascii" {
		return isASCII(s)
	}
	if name == "isidentifier" {
		if s == "" || !isIdentifier(s) {
			return false
		}
		for _, c := range s {
			if !isNameRune(c) {
				return false
			}
		}
		return true
	}
	if s == "" {
		return name == "isprintable"
	}
	switch name {
	case "islower", "isupper":
		cased := false
		for _, c := range s {
			if unicode.IsUpper(c) || unicode.IsTitle(c) {
				if name == "islower" {
					return false
				}
				cased = true
			} else if unicode.IsLower(c) {
				if name == "isupper" {
					return false
				}
				cased = true
			}
		}
		return cased
	case "istitle":
		cased, prevCased := false, false
		for _, c := range s {
			switch {
			case unicode.IsUpper(c) || unicode.IsTitle(c):
				if prevCased {
					return false
				}
				prevCased, cased = true, true
			case unicode.IsLower(c):
				if !prevCased {
					return false
				}
				prevCased, cased = true, true
			default:
				prevCased = false
			}
		}
		return cased
	}
	for _, c := range s {
		var ok bool
		switch name {
		case "isalnum":
			ok = unicode.IsLetter(c) || unicode.IsNumber(c)
		case "isalpha":
			ok = unicode.IsLetter(c)
		case "isdecimal":
			ok = isPyDecimal(c)
		case "isdigit":
			ok = isPyDigit(c)
		case "isnumeric":
			ok = unicode.IsNumber(c) || unicode.Is(unicode.Han, c) && strings.ContainsRune("〇一二三四五六七八九十百千万亿億兆零壹贰叁肆伍陆柒捌玖拾佰仟", c)
		case "isprintable":
			ok = isPrintable(c)
		case "isspace":
			ok = pyIsSpace(c)
		}
		if !ok {
			return false
		}
	}
	return true
}

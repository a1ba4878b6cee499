package template

import (
	"math/big"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The lexer follows jinja2/lexer.py (3.1) with the settings transformers
// uses: trim_blocks (a block or comment tag eats one newline after it),
// lstrip_blocks (spaces and tabs before a block or comment tag on its own
// line are dropped), "-" and "+" whitespace control, raw blocks, and
// keep_trailing_newline=False.

type tokKind uint8

const (
	tEOF tokKind = iota
	tData
	tVarBegin
	tVarEnd
	tBlockBegin
	tBlockEnd
	tName
	tString
	tInt
	tFloat
	tOp
)

type token struct {
	kind tokKind
	val  string // data, name, operator, decoded string literal
	num  Value  // int64, *big.Int or float64 for number tokens
	line int
}

type lexer struct {
	src          string
	pos          int
	line         int
	toks         []token
	lineStarting bool
	balance      []byte
}

func syntaxErr(line int, format string, args ...any) *Error {
	e := errf("TemplateSyntaxError", format, args...)
	e.Line = line
	return e
}

// normalizeNewlines turns \r\n and \r into \n and drops one trailing
// newline, as Lexer.tokeniter does.
func normalizeNewlines(src string) string {
	if strings.IndexByte(src, '\r') >= 0 {
		src = strings.ReplaceAll(src, "\r\n", "\n")
		src = strings.ReplaceAll(src, "\r", "\n")
	}
	return strings.TrimSuffix(src, "\n")
}

func tokenize(src string) ([]token, error) {
	lx := &lexer{src: normalizeNewlines(src), line: 1, lineStarting: true}
	if err := lx.run(); err != nil {
		return nil, err
	}
	lx.toks = append(lx.toks, token{kind: tEOF, line: lx.line})
	return lx.toks, nil
}

func (lx *lexer) emit(kind tokKind, val string) {
	lx.toks = append(lx.toks, token{kind: kind, val: val, line: lx.line})
}

// advance moves pos to end, counting lines and remembering whether the
// consumed text ended a line (jinja's line_starting).
func (lx *lexer) advance(end int) {
	if end > lx.pos {
		lx.line += strings.Count(lx.src[lx.pos:end], "\n")
		lx.lineStarting = lx.src[end-1] == '\n'
	}
	lx.pos = end
}

func (lx *lexer) run() error {
	src := lx.src
	for lx.pos < len(src) {
		start := lx.pos
		i := start
		tagAt, kind := -1, byte(0)
		for {
			j := strings.IndexByte(src[i:], '{')
			if j < 0 || i+j+1 >= len(src) {
				break
			}
			i += j
			if c := src[i+1]; c == '%' || c == '{' || c == '#' {
				tagAt, kind = i, c
				break
			}
			i++
		}
		if tagAt < 0 {
			lx.emitData(src[start:])
			lx.advance(len(src))
			return nil
		}
		sign := byte(0)
		if tagAt+2 < len(src) && (src[tagAt+2] == '-' || src[tagAt+2] == '+') {
			sign = src[tagAt+2]
		}
		rawEnd, rawSign := -1, byte(0)
		if kind == '%' {
			rawEnd, rawSign = matchRawBegin(src, tagAt)
			if rawEnd >= 0 {
				sign = rawSign
			}
		}
		text := lx.stripBefore(src[start:tagAt], sign, kind != '{')
		lx.emitData(text)
		switch {
		case rawEnd >= 0:
			lx.advance(rawEnd)
			if err := lx.raw(); err != nil {
				return err
			}
		case kind == '#':
			lx.advance(tagAt + 2 + btoi(sign != 0))
			if err := lx.comment(); err != nil {
				return err
			}
		default:
			lx.advance(tagAt)
			if kind == '%' {
				lx.emit(tBlockBegin, "")
			} else {
				lx.emit(tVarBegin, "")
			}
			lx.advance(tagAt + 2 + btoi(sign != 0))
			if err := lx.tag(kind == '%'); err != nil {
				return err
			}
		}
	}
	return nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (lx *lexer) emitData(text string) {
	if text == "" {
		return
	}
	lx.toks = append(lx.toks, token{kind: tData, val: text, line: lx.line})
}

// stripBefore applies "-" (strip all whitespace before the tag) or
// lstrip_blocks (strip spaces on the tag's own line) to the text before a tag.
func (lx *lexer) stripBefore(text string, sign byte, lstrip bool) string {
	if sign == '-' {
		return strings.TrimRightFunc(text, pyIsSpace)
	}
	if sign == '+' || !lstrip {
		return text
	}
	lpos := strings.LastIndexByte(text, '\n') + 1
	if lpos > 0 || lx.lineStarting {
		rest := text[lpos:]
		if rest != "" && strings.TrimLeftFunc(rest, pyIsSpace) == "" {
			return text[:lpos]
		}
	}
	return text
}

// matchRawBegin matches {%(-|+|)\s*raw\s*(-%}\s*|%}) at i and returns the
// end of the match and the sign.
func matchRawBegin(src string, i int) (int, byte) {
	j := i + 2
	sign := byte(0)
	if j < len(src) && (src[j] == '-' || src[j] == '+') {
		sign = src[j]
		j++
	}
	j = skipSpace(src, j)
	if !strings.HasPrefix(src[j:], "raw") {
		return -1, 0
	}
	j = skipSpace(src, j+3)
	switch {
	case strings.HasPrefix(src[j:], "-%}"):
		return skipSpace(src, j+3), sign
	case strings.HasPrefix(src[j:], "%}"):
		return j + 2, sign
	}
	return -1, 0
}

func skipSpace(s string, i int) int {
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		if !pyIsSpace(r) {
			break
		}
		i += n
	}
	return i
}

// blockEnd matches the end of a block tag at i: "+%}", "-%}\s*" or "%}\n?".
func blockEnd(src string, i int, open byte) int {
	closeTag := "%}"
	switch open {
	case '#':
		closeTag = "#}"
	case '{':
		closeTag = "}}"
	}
	switch {
	case open != '{' && strings.HasPrefix(src[i:], "+"+closeTag):
		return i + 3
	case strings.HasPrefix(src[i:], "-"+closeTag):
		return skipSpace(src, i+3)
	case strings.HasPrefix(src[i:], closeTag):
		if open != '{' && i+2 < len(src) && src[i+2] == '\n' {
			return i + 3
		}
		return i + 2
	}
	return -1
}

func (lx *lexer) comment() error {
	src := lx.src
	for i := lx.pos; i < len(src); i++ {
		if src[i] != '+' && src[i] != '-' && src[i] != '#' {
			continue
		}
		if end := blockEnd(src, i, '#'); end >= 0 {
			lx.advance(end)
			return nil
		}
	}
	return syntaxErr(lx.line, "Missing end of comment tag")
}

func (lx *lexer) raw() error {
	src := lx.src
	for i := lx.pos; i < len(src); i++ {
		if src[i] != '{' || i+1 >= len(src) || src[i+1] != '%' {
			continue
		}
		j := i + 2
		sign := byte(0)
		if j < len(src) && (src[j] == '-' || src[j] == '+') {
			sign = src[j]
			j++
		}
		j = skipSpace(src, j)
		if !strings.HasPrefix(src[j:], "endraw") {
			continue
		}
		j = skipSpace(src, j+6)
		end := blockEnd(src, j, '%')
		if end < 0 {
			continue
		}
		text := lx.stripBefore(src[lx.pos:i], sign, true)
		lx.emitData(text)
		lx.advance(end)
		return nil
	}
	return syntaxErr(lx.line, "Missing end of raw directive")
}

var operators3 = []string{"//", "**", "==", "!=", ">=", "<="}

const operators1 = "+-/*%~[](){}><=.:|,;"

func (lx *lexer) tag(block bool) error {
	src := lx.src
	open := byte('{')
	if block {
		open = '%'
	}
	for lx.pos < len(src) {
		if len(lx.balance) == 0 {
			if end := blockEnd(src, lx.pos, open); end >= 0 {
				if block {
					lx.emit(tBlockEnd, "")
				} else {
					lx.emit(tVarEnd, "")
				}
				lx.advance(end)
				return nil
			}
		}
		r, n := utf8.DecodeRuneInString(src[lx.pos:])
		if pyIsSpace(r) {
			lx.advance(skipSpace(src, lx.pos))
			continue
		}
		if end, num, ok := lexNumber(src, lx.pos); ok {
			kind := tInt
			if _, isF := num.(float64); isF {
				kind = tFloat
			}
			lx.toks = append(lx.toks, token{kind: kind, num: num, val: src[lx.pos:end], line: lx.line})
			lx.advance(end)
			continue
		}
		if isNameRune(r) {
			end := lx.pos + n
			for end < len(src) {
				r2, n2 := utf8.DecodeRuneInString(src[end:])
				if !isNameRune(r2) {
					break
				}
				end += n2
			}
			name := src[lx.pos:end]
			if !isIdentifier(name) {
				return syntaxErr(lx.line, "Invalid character in identifier")
			}
			lx.emit(tName, name)
			lx.advance(end)
			continue
		}
		if r == '\'' || r == '"' {
			end := stringEnd(src, lx.pos)
			if end > 0 {
				s, err := decodeString(src[lx.pos+1 : end-1])
				if err != nil {
					return syntaxErr(lx.line, "%s", err.(*Error).Msg)
				}
				lx.emit(tString, s)
				lx.advance(end)
				continue
			}
		}
		op := ""
		for _, o := range operators3 {
			if strings.HasPrefix(src[lx.pos:], o) {
				op = o
				break
			}
		}
		if op == "" && strings.IndexByte(operators1, src[lx.pos]) >= 0 {
			op = src[lx.pos : lx.pos+1]
		}
		if op == "" {
			return syntaxErr(lx.line, "unexpected char %s at %d", pyRepr(string(r)), lx.pos)
		}
		switch op {
		case "(":
			lx.balance = append(lx.balance, ')')
		case "[":
			lx.balance = append(lx.balance, ']')
		case "{":
			lx.balance = append(lx.balance, '}')
		case ")", "]", "}":
			if len(lx.balance) == 0 {
				return syntaxErr(lx.line, "unexpected '%s'", op)
			}
			want := lx.balance[len(lx.balance)-1]
			lx.balance = lx.balance[:len(lx.balance)-1]
			if want != op[0] {
				return syntaxErr(lx.line, "unexpected '%s', expected '%c'", op, want)
			}
		}
		lx.emit(tOp, op)
		lx.advance(lx.pos + len(op))
	}
	return nil // end of source inside a tag: the parser reports it
}

func isNameRune(r rune) bool {
	return r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsNumber(r) ||
		unicode.In(r, unicode.Mn, unicode.Mc, unicode.Pc) || r == 0xb7
}

func isIdentifier(s string) bool {
	r, _ := utf8.DecodeRuneInString(s)
	return r == '_' || unicode.IsLetter(r) || unicode.Is(unicode.Nl, r)
}

// stringEnd returns the index after the closing quote of the literal at i,
// or -1 when it is not closed.
func stringEnd(src string, i int) int {
	q := src[i]
	for j := i + 1; j < len(src); j++ {
		switch src[j] {
		case '\\':
			j++
		case q:
			return j + 1
		}
	}
	return -1
}

func isDigitByte(c byte) bool { return c >= '0' && c <= '9' }

// lexNumber matches jinja's float_re, then integer_re, at i.
func lexNumber(src string, i int) (int, Value, bool) {
	if i >= len(src) || !isDigitByte(src[i]) {
		return 0, nil, false
	}
	if i == 0 || src[i-1] != '.' {
		if end, ok := matchFloat(src, i); ok {
			text := strings.ReplaceAll(src[i:end], "_", "")
			f, err := strconv.ParseFloat(text, 64)
			if err != nil {
				f, _ = strconv.ParseFloat(text, 64) // ±Inf on overflow, as literal_eval
			}
			return end, f, true
		}
	}
	end, base := matchInt(src, i)
	text := strings.ReplaceAll(src[i:end], "_", "")
	if base != 10 {
		text = text[2:]
	}
	b, ok := new(big.Int).SetString(text, base)
	if !ok {
		b = new(big.Int)
	}
	return end, normBig(b), true
}

// digitRun matches (\d+_)*\d+ at i.
func digitRun(src string, i int) int {
	if i >= len(src) || !isDigitByte(src[i]) {
		return -1
	}
	j := i
	for {
		for j < len(src) && isDigitByte(src[j]) {
			j++
		}
		if j+1 < len(src) && src[j] == '_' && isDigitByte(src[j+1]) {
			j++
			continue
		}
		return j
	}
}

func matchFloat(src string, i int) (int, bool) {
	j := digitRun(src, i)
	if j < 0 {
		return 0, false
	}
	frac := -1
	if j < len(src) && src[j] == '.' {
		frac = digitRun(src, j+1)
	}
	exp := func(k int) int {
		if k < len(src) && (src[k] == 'e' || src[k] == 'E') {
			k++
			if k < len(src) && (src[k] == '+' || src[k] == '-') {
				k++
			}
			return digitRun(src, k)
		}
		return -1
	}
	if frac >= 0 {
		if e := exp(frac); e >= 0 {
			return e, true
		}
		return frac, true
	}
	if e := exp(j); e >= 0 {
		return e, true
	}
	return 0, false
}

func matchInt(src string, i int) (int, int) {
	if src[i] == '0' && i+1 < len(src) {
		prefixes := []struct {
			c    byte
			base int
		}{{'b', 2}, {'o', 8}, {'x', 16}}
		for _, p := range prefixes {
			if src[i+1]|0x20 != p.c {
				continue
			}
			j := i + 2
			for {
				k := j
				if k < len(src) && src[k] == '_' {
					k++
				}
				if k < len(src) && isBaseDigit(src[k], p.base) {
					j = k + 1
					continue
				}
				break
			}
			if j > i+2 {
				return j, p.base
			}
		}
	}
	j := i + 1
	for {
		k := j
		if k < len(src) && src[k] == '_' {
			k++
		}
		if k < len(src) && isDigitByte(src[k]) && (src[i] != '0' || src[k] == '0') {
			j = k + 1
			continue
		}
		return j, 10
	}
}

func isBaseDigit(c byte, base int) bool {
	switch base {
	case 2:
		return c == '0' || c == '1'
	case 8:
		return c >= '0' && c <= '7'
	}
	return isDigitByte(c) || (c|0x20 >= 'a' && c|0x20 <= 'f')
}

// decodeString applies Python's "unicode-escape" decoding to the body of a
// string literal after non-ASCII characters were backslash-escaped, as
// Lexer.wrap does: known escapes are decoded, unknown ones stay verbatim.
func decodeString(s string) (string, error) {
	if strings.IndexByte(s, '\\') < 0 {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		c := s[i]
		if c != '\\' {
			b.WriteByte(c)
			i++
			continue
		}
		if i+1 >= len(s) {
			return "", errf("", "\\ at end of string")
		}
		e := s[i+1]
		i += 2
		switch e {
		case '\n':
		case '\\', '\'', '"':
			b.WriteByte(e)
		case 'a':
			b.WriteByte('\a')
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
		case 'v':
			b.WriteByte('\v')
		case '0', '1', '2', '3', '4', '5', '6', '7':
			v := rune(e - '0')
			for k := 0; k < 2 && i < len(s) && s[i] >= '0' && s[i] <= '7'; k++ {
				v = v*8 + rune(s[i]-'0')
				i++
			}
			b.WriteRune(v)
		case 'x', 'u', 'U':
			n := map[byte]int{'x': 2, 'u': 4, 'U': 8}[e]
			trunc := errf("", "truncated \\%c%s escape", e, strings.Repeat("X", n))
			if i+n > len(s) {
				return "", trunc
			}
			v, err := strconv.ParseUint(s[i:i+n], 16, 32)
			if err != nil {
				return "", trunc
			}
			if v > unicode.MaxRune {
				return "", errf("", "illegal Unicode character")
			}
			b.WriteRune(rune(v))
			i += n
		case 'N':
			return "", errf("", "\\N{...} escapes are not supported")
		default:
			if e >= utf8.RuneSelf {
				// The backslash pairs with the "\" of the backslashreplace
				// escape of this character; the rest of that escape is text.
				r, n := utf8.DecodeRuneInString(s[i-1:])
				i += n - 1
				b.WriteByte('\\')
				switch {
				case r < 0x100:
					b.WriteString("x" + hex2(r, 2))
				case r < 0x10000:
					b.WriteString("u" + hex2(r, 4))
				default:
					b.WriteString("U" + hex2(r, 8))
				}
				continue
			}
			b.WriteByte('\\')
			b.WriteByte(e)
		}
	}
	return b.String(), nil
}

func hex2(r rune, n int) string {
	out := make([]byte, n)
	for i := n - 1; i >= 0; i-- {
		out[i] = hexDigits[r&0xf]
		r >>= 4
	}
	return string(out)
}

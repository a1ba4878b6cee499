package hf

// Hand-written matchers for the Split patterns that real byte-level BPE models use.
// Each reproduces Oniguruma's leftmost-first, backtracking semantics for one pattern
// exactly (see the comments on each alternative); any other pattern runs on regexp2.
// The benchmarks in scanner_test.go compare the two on the Qwen pattern.

// Patterns with a hand-written matcher, keyed by their exact tokenizer.json text.
const (
	// patCL100K is the GPT-4 (cl100k) pattern as Qwen2, Qwen2.5 and Qwen3 ship it,
	// with single digits.
	patCL100K = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	// patCL100K3 is the same with runs of up to three digits, as Llama 3 and GPT-4 use it.
	patCL100K3 = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	// patGPT2 is GPT-2's pattern, which the ByteLevel pre-tokenizer applies when
	// use_regex is true.
	patGPT2 = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
)

// scanner is a hand-written matcher for one of the patterns above. Under each of
// these patterns every position starts a non-empty match, so matches tile the text.
type scanner struct {
	gpt2      bool // GPT-2 family (optional leading space on letters/numbers) vs cl100k family
	fold      bool // contractions are case-insensitive: (?i:'s|...)
	maxDigits int  // cl100k: \p{N}{1,maxDigits}
}

func scannerFor(pattern string) (*scanner, bool) {
	switch pattern {
	case patCL100K:
		return &scanner{fold: true, maxDigits: 1}, true
	case patCL100K3:
		return &scanner{fold: true, maxDigits: 3}, true
	case patGPT2:
		return &scanner{gpt2: true}, true
	}
	return nil, false
}

// find implements finder: the match starting at pos is always non-empty.
func (sc *scanner) find(s string, pos int) (int, int, bool) {
	if pos >= len(s) {
		return 0, 0, false
	}
	if sc.gpt2 {
		return pos, sc.matchGPT2(s, pos), true
	}
	return pos, sc.matchCL100K(s, pos), true
}

// contraction returns the length after the apostrophe of 's|'t|'re|'ve|'m|'ll|'d at
// s[j:], or 0. With fold, Oniguruma's Unicode case folding also lets U+017F (ſ, which
// folds to s) match 's.
func contraction(s string, j int, fold bool) int {
	if j >= len(s) {
		return 0
	}
	c := s[j]
	if fold {
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c == 0xC5 && j+1 < len(s) && s[j+1] == 0xBF { // U+017F
			return 2
		}
	}
	switch c {
	case 's', 't', 'm', 'd':
		return 1
	case 'r', 'v', 'l':
		if j+1 >= len(s) {
			return 0
		}
		d := s[j+1]
		if fold && d >= 'A' && d <= 'Z' {
			d += 'a' - 'A'
		}
		if (c == 'r' || c == 'v') && d == 'e' || c == 'l' && d == 'l' {
			return 2
		}
	}
	return 0
}

// scanClass advances over runes whose class has any bit of want.
func scanClass(s string, j int, want uint8) int {
	for j < len(s) {
		c := s[j]
		if c < 0x80 {
			if asciiClass[c]&want == 0 {
				return j
			}
			j++
			continue
		}
		r, w := decode(s, j)
		if classOf(r)&want == 0 {
			return j
		}
		j += w
	}
	return j
}

// scanOther advances over runes that are not \s, \p{L} or \p{N}.
func scanOther(s string, j int) int {
	for j < len(s) {
		c := s[j]
		if c < 0x80 {
			if asciiClass[c]&(clL|clN|clS) != 0 {
				return j
			}
			j++
			continue
		}
		r, w := decode(s, j)
		if classOf(r)&(clL|clN|clS) != 0 {
			return j
		}
		j += w
	}
	return j
}

// matchWhitespace handles the whitespace alternatives at i, where s[i] is \s:
// cl100k's \s*[\r\n]+ (when nl), then \s+(?!\S) and \s+.
func matchWhitespace(s string, i int, nl bool) int {
	e := scanClass(s, i, clS)
	if nl {
		// \s* takes the run, then backtracks until [\r\n]+ can match: the match ends
		// just after the run's last \r or \n.
		for k := e - 1; k >= i; k-- {
			if s[k] == '\n' || s[k] == '\r' {
				return k + 1
			}
		}
	}
	// \s+(?!\S): the run, unless text follows it; then the run less its last rune.
	if e == len(s) {
		return e
	}
	if last := lastRuneStart(s, e); last > i {
		return last
	}
	// \s+
	return e
}

// matchCL100K is the cl100k-family pattern:
//
//	(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,n}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
func (sc *scanner) matchCL100K(s string, i int) int {
	c0, w0 := decode(s, i)
	if c0 == '\'' {
		if n := contraction(s, i+1, sc.fold); n > 0 {
			return i + 1 + n
		}
	}
	k0 := classOf(c0)
	// [^\r\n\p{L}\p{N}]?\p{L}+
	if k0&clL != 0 {
		return scanClass(s, i+w0, clL)
	}
	if k0&(clNL|clN) == 0 && i+w0 < len(s) {
		if c1, w1 := decode(s, i+w0); classOf(c1)&clL != 0 {
			return scanClass(s, i+w0+w1, clL)
		}
	}
	// \p{N}{1,n}
	if k0&clN != 0 {
		j := i + w0
		for n := 1; n < sc.maxDigits && j < len(s); n++ {
			r, w := decode(s, j)
			if classOf(r)&clN == 0 {
				break
			}
			j += w
		}
		return j
	}
	// ` ?[^\s\p{L}\p{N}]+[\r\n]*`
	j := i
	if c0 == ' ' {
		j++
	}
	if j < len(s) {
		if e := scanOther(s, j); e > j {
			for e < len(s) && (s[e] == '\r' || s[e] == '\n') {
				e++
			}
			return e
		}
	}
	// c0 is \s here: every other rune matched above.
	return matchWhitespace(s, i, true)
}

// matchGPT2 is GPT-2's pattern:
//
//	's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
func (sc *scanner) matchGPT2(s string, i int) int {
	if s[i] == '\'' {
		if n := contraction(s, i+1, false); n > 0 {
			return i + 1 + n
		}
	}
	j := i
	if s[i] == ' ' {
		j++
	}
	if j < len(s) {
		r, w := decode(s, j)
		k := classOf(r)
		switch {
		case k&clL != 0:
			return scanClass(s, j+w, clL)
		case k&clN != 0:
			return scanClass(s, j+w, clN)
		case k&clS == 0:
			return scanOther(s, j+w)
		}
	}
	// s[i] is \s here (a space followed by \s, or other whitespace).
	return matchWhitespace(s, i, false)
}

package load

// The Prometheus text format, one line at a time (exposition format 0.0.4
// as prometheus_client's generate_latest writes it, read leniently):
//
//	# HELP name text
//	# TYPE name counter
//	name{label="value",other="a \"quoted\" \\ value\n"} 1.5e+06 1700000000000
//
// Nothing here allocates; every result is a sub-slice of the line.

// isBlank reports whether c separates tokens.
func isBlank(c byte) bool { return c == ' ' || c == '\t' }

// skipBlanks returns the index of the first byte at or after i that is not
// a blank.
func skipBlanks(l []byte, i int) int {
	for i < len(l) && isBlank(l[i]) {
		i++
	}
	return i
}

// isNameByte reports whether c may appear in a metric name
// ([a-zA-Z_:][a-zA-Z0-9_:]*); first is true for its first byte.
func isNameByte(c byte, first bool) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '_', c == ':':
		return true
	case c >= '0' && c <= '9':
		return !first
	}
	return false
}

// isLabelByte is isNameByte for label names, which have no colons.
func isLabelByte(c byte, first bool) bool {
	return c != ':' && isNameByte(c, first)
}

// lineName returns the metric name a sample line starts with and the index
// just past it. It returns nil for blank lines, comments and lines that do
// not start with a name (garbage, or the quoted names of the UTF-8 format,
// none of which the engines write).
func lineName(l []byte) (name []byte, end int) {
	i := skipBlanks(l, 0)
	j := i
	for j < len(l) && isNameByte(l[j], j == i) {
		j++
	}
	if j == i {
		return nil, 0
	}
	return l[i:j], j
}

// sample is the rest of a sample line after its name.
type sample struct {
	labels []byte // between the braces, raw; nil without braces
	value  []byte // the value token, unparsed
	ts     []byte // the timestamp token, or nil
}

// parseSample reads the rest of a sample line from index i, just past the
// name: optional labels, blanks, the value, and optionally a timestamp and
// an OpenMetrics exemplar (" # {...} value [ts]", skipped). ok is false when
// the line is malformed.
func parseSample(l []byte, i int) (s sample, ok bool) {
	if j := skipBlanks(l, i); j < len(l) && l[j] == '{' {
		i = j // expfmt's parser, too, allows blanks before the labels
	}
	if i < len(l) && l[i] == '{' {
		end, ok := scanLabels(l, i+1)
		if !ok {
			return s, false
		}
		s.labels = l[i+1 : end-1]
		i = end
	}
	j := skipBlanks(l, i)
	if j == i && s.labels == nil {
		return s, false // a name must be followed by a blank or labels
	}
	i = j
	j = tokenEnd(l, i)
	if j == i {
		return s, false
	}
	s.value = l[i:j]
	i = skipBlanks(l, j)
	if i == len(l) {
		return s, true
	}
	if l[i] != '#' {
		j = tokenEnd(l, i)
		s.ts = l[i:j]
		i = skipBlanks(l, j)
		if i == len(l) {
			return s, true
		}
	}
	// Only an exemplar may follow: "# {labels} value [timestamp]".
	return s, l[i] == '#'
}

// tokenEnd returns the index of the first blank at or after i, or len(l).
func tokenEnd(l []byte, i int) int {
	for i < len(l) && !isBlank(l[i]) {
		i++
	}
	return i
}

// scanLabels checks the label list starting at i, just past '{', and returns
// the index just past the closing '}'. It accepts blanks between tokens and
// a trailing comma. A backslash in a value escapes the byte after it.
func scanLabels(l []byte, i int) (end int, ok bool) {
	for {
		i = skipBlanks(l, i)
		if i >= len(l) {
			return 0, false
		}
		if l[i] == '}' {
			return i + 1, true
		}
		j := i
		for j < len(l) && isLabelByte(l[j], j == i) {
			j++
		}
		if j == i {
			return 0, false
		}
		i = skipBlanks(l, j)
		if i >= len(l) || l[i] != '=' {
			return 0, false
		}
		i = skipBlanks(l, i+1)
		if i >= len(l) || l[i] != '"' {
			return 0, false
		}
		i++
		for {
			if i >= len(l) {
				return 0, false
			}
			if l[i] == '\\' {
				i += 2
				continue
			}
			if l[i] == '"' {
				break
			}
			i++
		}
		i = skipBlanks(l, i+1)
		if i >= len(l) {
			return 0, false
		}
		switch l[i] {
		case ',':
			i++
		case '}':
			return i + 1, true
		default:
			return 0, false
		}
	}
}

// labelIter walks a label list that scanLabels accepted. It stays in bounds
// on any input.
type labelIter struct {
	b []byte
	i int
}

// next returns the next label's name and raw (still escaped) value.
func (it *labelIter) next() (name, value []byte, ok bool) {
	b, i := it.b, skipBlanks(it.b, it.i)
	j := i
	for j < len(b) && isLabelByte(b[j], j == i) {
		j++
	}
	if j == i {
		return nil, nil, false
	}
	name = b[i:j]
	i = skipBlanks(b, j)
	if i >= len(b) || b[i] != '=' {
		return nil, nil, false
	}
	i = skipBlanks(b, i+1)
	if i >= len(b) || b[i] != '"' {
		return nil, nil, false
	}
	i++
	j = i
	for j < len(b) && b[j] != '"' {
		if b[j] == '\\' {
			j++
		}
		j++
	}
	if j >= len(b) {
		return nil, nil, false
	}
	value = b[i:j]
	i = skipBlanks(b, j+1)
	if i < len(b) && b[i] == ',' {
		i++
	}
	it.i = i
	return name, value, true
}

// parseCount reads a label value such as num_gpu_blocks="4096" as a
// non-negative integer no larger than limit. "None" and anything else that
// is not plain digits give ok == false.
func parseCount(b []byte, limit int64) (n int64, ok bool) {
	if len(b) == 0 || len(b) > 18 { // 18 digits cannot overflow
		return 0, false
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, n <= limit
}

// FNV-1a, 64 bits, for series identities. Collisions only merge series of
// one page, which is the engine's to write anyway.
const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

func hashBytes(h uint64, b []byte) uint64 {
	for _, c := range b {
		h ^= uint64(c)
		h *= fnvPrime
	}
	return h
}

// hashLabel hashes one name="value" pair; a label set's identity is the sum
// of its pairs' hashes, so it does not depend on the order of the labels.
// The finalizer (splitmix64's) spreads each pair over all 64 bits before the
// sum.
func hashLabel(name, value []byte) uint64 {
	h := hashBytes(fnvOffset, name)
	h ^= 0xff // never in a label name: separates name and value
	h *= fnvPrime
	h = hashBytes(h, value)
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	return h
}

package openai

import "bytes"

// FindUsage reads the top-level "usage" member of an engine's response: a
// whole non-streamed body, or the JSON of one stream chunk (the final usage
// chunk, or any chunk with continuous_usage_stats). It reports false when b
// is not a JSON object or has no usage object with an integer
// prompt_tokens. CompletionTokens and CachedTokens are 0 when absent;
// Details is set when prompt_tokens_details is an object (vLLM's
// --enable-prompt-tokens-details). Nothing else of b is decoded.
func FindUsage(b []byte) (Usage, bool) {
	f, err := FindMember(b, "usage")
	if err != nil || !f.Found || f.End <= f.Start || b[f.Start] != '{' {
		return Usage{}, false
	}
	var u Usage
	prompt := false
	members(b, span{f.Start, f.End, kObject}, func(key []byte, v span) {
		switch string(key) {
		case "prompt_tokens":
			u.PromptTokens, prompt = tokenCount(b, v)
		case "completion_tokens":
			u.CompletionTokens, _ = tokenCount(b, v)
		case "prompt_tokens_details":
			if v.kind != kObject {
				return
			}
			u.Details = true
			members(b, v, func(key []byte, v span) {
				if string(key) == "cached_tokens" {
					u.CachedTokens, _ = tokenCount(b, v)
				}
			})
		}
	})
	return u, prompt
}

// tokenCount reads a token count: a non-negative JSON integer, as UsageInfo's
// int fields serialize.
func tokenCount(b []byte, v span) (int, bool) {
	if v.kind != kNumber || !isIntLiteral(b[v.start:v.end]) {
		return 0, false
	}
	n, _, ok := intValue(b, v)
	if !ok || n < 0 || n > 1<<40 {
		return 0, false
	}
	return int(n), true
}

// tailBytes is how much of a stream's end a StreamTail keeps: room for the
// final usage chunk (a few hundred bytes from vLLM, §5.2 of the vLLM notes)
// and data: [DONE] many times over.
const tailBytes = 2 << 10

// StreamTail follows a server-sent event stream as a relay passes it on,
// keeping only its last bytes, so that once the stream ends one can tell
// whether it ended with data: [DONE] and read its final usage chunk,
// without holding the stream or anything per token. A relay calls Write
// with every piece it has passed on. The zero value is ready; Reset makes
// it so again. A StreamTail is owned by one goroutine.
type StreamTail struct {
	buf [2 * tailBytes]byte
	n   int  // bytes held in buf
	cut bool // bytes before buf[0] were dropped
}

// Reset empties t for another stream.
func (t *StreamTail) Reset() { t.n, t.cut = 0, false }

// Write notes p, the next bytes of the stream. It copies at most tailBytes
// of them, and moves what it holds only once per tailBytes written.
func (t *StreamTail) Write(p []byte) {
	if len(p) >= tailBytes {
		t.cut = t.cut || t.n > 0 || len(p) > tailBytes
		t.n = copy(t.buf[:], p[len(p)-tailBytes:])
		return
	}
	if t.n+len(p) > len(t.buf) {
		// Here t.n > tailBytes: keep the last tailBytes of what is held.
		t.n = copy(t.buf[:], t.buf[t.n-tailBytes:t.n])
		t.cut = true
	}
	t.n += copy(t.buf[t.n:], p)
}

var (
	sseData = []byte("data:")
	sseDone = []byte("[DONE]")
)

// Done reports whether the stream so far ends with the data: [DONE] event,
// its blank line included: the last event an OpenAI-compatible stream
// sends (vLLM notes §5.2), after which the client has the whole answer.
func (t *StreamTail) Done() bool {
	v, ok := t.LastData()
	return ok && bytes.Equal(v, sseDone)
}

// LastData returns the data of the stream's last event when the stream so
// far ends with that event, its blank line included: its last line is a
// data field. Anthropic's streams end with a message_stop event, which
// Done does not know.
func (t *StreamTail) LastData() ([]byte, bool) {
	b, cut := t.last()
	end := len(b)
	for end > 0 && (b[end-1] == '\n' || b[end-1] == '\r') {
		end--
	}
	if !blankLineEnd(b[end:]) {
		return nil, false
	}
	line := lastLine(b[:end], cut)
	if line == nil {
		return nil, false
	}
	return dataValue(line)
}

// LastDataEnd is LastData for a stream whose last event may be longer
// than the tail: the data of the stream's last event when the stream so
// far ends with one, whole when its line is all in the tail, else the
// line's last bytes (whole false), which may not be a data line at all.
// A Responses stream ends with response.completed, which carries the
// whole response.
func (t *StreamTail) LastDataEnd() (v []byte, whole, ok bool) {
	b, cut := t.last()
	end := len(b)
	for end > 0 && (b[end-1] == '\n' || b[end-1] == '\r') {
		end--
	}
	if !blankLineEnd(b[end:]) {
		return nil, false, false
	}
	if line := lastLine(b[:end], cut); line != nil {
		v, ok = dataValue(line)
		return v, true, ok
	}
	return b[:end], false, end > 0
}

// Usage returns the usage of the last data event the tail holds that
// carries one: the final usage chunk of a stream sent with
// stream_options.include_usage. It reports false when the tail holds none.
func (t *StreamTail) Usage() (Usage, bool) {
	var u Usage
	found := false
	t.EachData(func(v []byte) {
		if x, ok := FindUsage(v); ok {
			u, found = x, true
		}
	})
	return u, found
}

// EachData calls fn with the value of every whole data line the tail
// holds that is a JSON object, in stream order. fn must not keep v.
func (t *StreamTail) EachData(fn func(v []byte)) {
	b, cut := t.last()
	if cut {
		// The first line is a fragment of a longer one.
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			return
		}
		b = b[i+1:]
	}
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			return // an unfinished line: not an event yet
		}
		line := b[:i]
		b = b[i+1:]
		v, ok := dataValue(bytes.TrimSuffix(line, []byte("\r")))
		if ok && len(v) > 0 && v[0] == '{' {
			fn(v)
		}
	}
}

// last returns the stream's last tailBytes bytes (fewer when it is
// shorter), and whether bytes before them were dropped: what Done and Usage
// read, so that their answers depend only on the stream, never on how it
// was cut into writes.
func (t *StreamTail) last() (b []byte, cut bool) {
	if t.n > tailBytes {
		return t.buf[t.n-tailBytes : t.n], true
	}
	return t.buf[:t.n], t.cut
}

// blankLineEnd reports whether term, the line breaks ending a stream, ends
// its last line and then the event (\n\n, \r\n\r\n or \r\r, as the SSE
// format allows).
func blankLineEnd(term []byte) bool {
	return bytes.Count(term, []byte("\n")) >= 2 || bytes.Count(term, []byte("\r")) >= 2 && !bytes.Contains(term, []byte("\n"))
}

// lastLine returns the last line of b (which ends without a line break), or
// nil when the line may have begun before b does.
func lastLine(b []byte, cut bool) []byte {
	i := bytes.LastIndexAny(b, "\r\n")
	if i < 0 {
		if cut {
			return nil
		}
		return b
	}
	return b[i+1:]
}

// dataValue returns the value of an SSE data field line ("data:" and one
// optional space, then the value).
func dataValue(line []byte) ([]byte, bool) {
	if !bytes.HasPrefix(line, sseData) {
		return nil, false
	}
	v := line[len(sseData):]
	if len(v) > 0 && v[0] == ' ' {
		v = v[1:]
	}
	return v, true
}

// FindMaxTokens reads the completion budget a request body names:
// max_completion_tokens if it is a whole number, else max_tokens, as vLLM
// takes them. It reports false when b is not a JSON object or names
// neither as a non-negative integer (absent, null, or anything else, which
// the engine will refuse or default).
func FindMaxTokens(b []byte) (int64, bool) {
	r := reader{b: b}
	r.ws()
	if r.i >= len(r.b) || r.b[r.i] != '{' {
		return 0, false
	}
	// One pass over the members; the last of each key wins, as in
	// Python's json module.
	var vals [2]span
	var found [2]bool
	r.object(func(k, v span) {
		raw, plain := rawKey(b, k)
		if !plain {
			return
		}
		switch string(raw) {
		case "max_completion_tokens":
			vals[0], found[0] = v, true
		case "max_tokens":
			vals[1], found[1] = v, true
		}
	})
	if r.err != nil {
		return 0, false
	}
	for i := range vals {
		if !found[i] || vals[i].end <= vals[i].start || vals[i].end-vals[i].start > 18 {
			continue
		}
		n, ok := int64(0), true
		for _, c := range b[vals[i].start:vals[i].end] {
			if c < '0' || c > '9' {
				ok = false
				break
			}
			n = n*10 + int64(c-'0')
		}
		if ok {
			return n, true
		}
	}
	return 0, false
}

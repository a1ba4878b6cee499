package openai

// IncludeUsage returns body asking for the final usage chunk
// (stream_options.include_usage: true), appended to dst, for a streamed
// request (stream is JSON true) that did not ask for it, and reports
// whether it changed anything; the gateway's observability.usage_for_accuracy
// "inject" reads the engine's cached tokens from that chunk and strips it
// from the client's stream (UsageStrip). Every byte of body is kept: the
// member is inserted before the closing brace of the body, or of its
// stream_options object, so that it is the last of its name (Python's json
// keeps the last). A body it cannot read, a request that is not streamed,
// one with include_usage already true, and one with
// stream_options.continuous_usage_stats (which include_usage would turn on
// for every chunk) are returned unchanged.
func IncludeUsage(dst, body []byte) ([]byte, bool) {
	r := reader{b: body}
	r.ws()
	if r.i >= len(r.b) || r.b[r.i] != '{' {
		return append(dst, body...), false
	}
	var stream, opts span
	r.object(func(k, v span) {
		switch memberKey(body, k) {
		case "stream":
			stream = v
		case "stream_options":
			opts = v
		}
	})
	end := r.i - 1 // the body's closing brace
	if r.err != nil || stream.kind != kBool || body[stream.start] != 't' {
		return append(dst, body...), false
	}
	switch opts.kind {
	case kNone, kNull:
		dst = append(dst, body[:end]...)
		dst = append(dst, `,"stream_options":{"include_usage":true}`...)
		return append(dst, body[end:]...), true
	case kObject:
		var include, continuous span
		members(body, opts, func(key []byte, v span) {
			switch string(key) {
			case "include_usage":
				include = v
			case "continuous_usage_stats":
				continuous = v
			}
		})
		if include.kind == kBool && body[include.start] == 't' || truthy(body, continuous) {
			return append(dst, body...), false
		}
		close := opts.end - 1
		dst = append(dst, body[:close]...)
		if !emptyObject(body[opts.start+1 : opts.end]) {
			dst = append(dst, ',')
		}
		dst = append(dst, `"include_usage":true`...)
		return append(dst, body[close:]...), true
	}
	return append(dst, body...), false
}

// memberKey is a member's key, decoded when it has escapes.
func memberKey(b []byte, k span) string {
	if raw, plain := rawKey(b, k); plain {
		return string(raw)
	}
	return decodeString(b[k.start:k.end])
}

// maxHeldEvent bounds the event a UsageStrip holds back: a usage chunk is
// a few hundred bytes, so an event longer than this is passed on as it
// comes.
const maxHeldEvent = 8 << 10

// UsageStrip passes a server-sent event stream on without its usage chunk:
// the event whose data is a JSON object with an empty choices array and a
// usage object, which an engine sends before data: [DONE] when asked
// (stream_options.include_usage). Every other byte goes through unchanged
// and in order; an event leaves once its blank line has arrived (so an
// event the engine split over two writes leaves with the second), and an
// event longer than maxHeldEvent leaves as it comes. It holds at most one
// event, never anything per token. The zero value is ready. A UsageStrip
// is owned by one goroutine.
type UsageStrip struct {
	held    []byte // the current event's bytes so far, when held back
	passing bool   // the current event outgrew maxHeldEvent and is passed on
	lineLen int    // bytes in the current line so far
	cr      bool   // the last byte was \r: a \n next ends no line
	lines   int    // lines of the current event so far
}

// Write appends to out what of p may go to the client now, and returns it.
func (s *UsageStrip) Write(out, p []byte) []byte {
	from := 0 // p[from:] is not yet in out or held
	for i, c := range p {
		eol := false
		switch {
		case c == '\n' && s.cr:
			s.cr = false
			continue
		case c == '\n':
			eol = true
		case c == '\r':
			s.cr, eol = true, true
		default:
			s.cr = false
			s.lineLen++
		}
		if !eol {
			continue
		}
		if s.lineLen > 0 {
			s.lineLen = 0
			s.lines++
			continue
		}
		// A blank line: the event ends with p[i].
		out = s.end(out, p[from:i+1])
		from = i + 1
	}
	rest := p[from:]
	switch {
	case s.passing:
		out = append(out, rest...)
	case len(s.held)+len(rest) > maxHeldEvent:
		out = append(append(out, s.held...), rest...)
		s.held, s.passing = s.held[:0], true
	default:
		s.held = append(s.held, rest...)
	}
	return out
}

// end finishes the current event, whose last bytes are tail: out gets it
// unless it is the usage chunk.
func (s *UsageStrip) end(out, tail []byte) []byte {
	switch {
	case s.passing:
		out = append(out, tail...)
	case len(s.held)+len(tail) > maxHeldEvent:
		out = append(append(out, s.held...), tail...)
	default:
		s.held = append(s.held, tail...)
		if !(s.lines == 1 && isUsageChunk(s.held)) {
			out = append(out, s.held...)
		}
	}
	s.held, s.passing, s.lines = s.held[:0], false, 0
	return out
}

// Flush appends what is still held, an event the stream did not finish,
// to out: at the stream's end nothing may be lost.
func (s *UsageStrip) Flush(out []byte) []byte {
	out = append(out, s.held...)
	s.held, s.passing, s.lines, s.lineLen, s.cr = s.held[:0], false, 0, 0, false
	return out
}

// isUsageChunk reports whether ev, one event of a single line (leading line
// breaks left by the last event's \r\n, and its own terminators, aside), is
// data: with a JSON object holding "choices": [] and a "usage" object.
func isUsageChunk(ev []byte) bool {
	i, j := 0, len(ev)
	for i < j && (ev[i] == '\n' || ev[i] == '\r') {
		i++
	}
	for j > i && (ev[j-1] == '\n' || ev[j-1] == '\r') {
		j--
	}
	v, ok := dataValue(ev[i:j])
	if !ok || len(v) == 0 || v[0] != '{' {
		return false
	}
	r := reader{b: v}
	var choices, usage span
	r.object(func(k, val span) {
		switch memberKey(v, k) {
		case "choices":
			choices = val
		case "usage":
			usage = val
		}
	})
	r.ws()
	if r.err != nil || r.i != len(v) || choices.kind != kArray || usage.kind != kObject {
		return false
	}
	empty := true
	each(v, choices, func(int, span) { empty = false })
	return empty
}

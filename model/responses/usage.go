package responses

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/inferrail/inferrail/model/openai"
)

// FindUsage reads the usage of a Responses answer: the top-level "usage"
// of a response body, else "response"."usage" (the response.completed
// event, the only one vLLM fills it in). vLLM's ResponseUsage counts the
// whole prompt in input_tokens and its cached part in
// input_tokens_details.cached_tokens. It reports false when b is not a
// JSON object or has no usage object with an integer input_tokens.
func FindUsage(b []byte) (openai.Usage, bool) {
	f, err := openai.FindMember(b, "usage")
	if err != nil {
		return openai.Usage{}, false
	}
	if !f.Found {
		r, err := openai.FindMember(b, "response")
		if err != nil || !r.Found || r.End <= r.Start || b[r.Start] != '{' {
			return openai.Usage{}, false
		}
		return FindUsage(b[r.Start:r.End])
	}
	return usageObject(b[f.Start:f.End])
}

// usageObject reads a ResponseUsage object.
func usageObject(raw []byte) (openai.Usage, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return openai.Usage{}, false
	}
	var w struct {
		Input   *int64 `json:"input_tokens"`
		Output  *int64 `json:"output_tokens"`
		Details *struct {
			Cached *int64 `json:"cached_tokens"`
		} `json:"input_tokens_details"`
	}
	if json.Unmarshal(raw, &w) != nil || w.Input == nil {
		return openai.Usage{}, false
	}
	count := func(p *int64) int {
		if p == nil || *p < 0 || *p > 1<<40 {
			return 0
		}
		return int(*p)
	}
	u := openai.Usage{PromptTokens: count(w.Input), CompletionTokens: count(w.Output)}
	if w.Details != nil {
		u.Details, u.CachedTokens = true, count(w.Details.Cached)
	}
	return u, true
}

// The types of the events that end a Responses stream: vLLM ends it with
// response.completed (its status says whether the answer is incomplete),
// or with an error event when generation failed; OpenAI's API also sends
// response.failed and response.incomplete.
var finalEvents = []string{"response.completed", "response.failed", "response.incomplete", "error"}

// Final reads the last event of a stream from the end of its data: v is
// the event's data, whole when it is all there, else only its last bytes
// (the response.completed event carries the whole response, which a
// bounded tail may not hold). It reports whether the event ends the
// stream and, when the event carries one, its usage. vLLM writes the
// event's response first and its type last, and the response's usage
// after its output, so the end of the data holds both.
func Final(v []byte, whole bool) (final bool, u openai.Usage, found bool) {
	if whole {
		f, err := openai.FindMember(v, "type")
		if err != nil || !f.Found || !f.IsString {
			return false, openai.Usage{}, false
		}
		u, found = FindUsage(v)
		return isFinal(f.Name), u, found
	}
	end := bytes.TrimRight(v, " \t\r\n")
	if !bytes.HasSuffix(end, []byte("}")) {
		return false, openai.Usage{}, false
	}
	i := bytes.LastIndex(end, []byte(`"type":`))
	if i < 0 {
		return false, openai.Usage{}, false
	}
	var typ string
	if json.Unmarshal(bytes.TrimSuffix(end[i+len(`"type":`):], []byte("}")), &typ) != nil || !isFinal(typ) {
		return false, openai.Usage{}, false
	}
	if j := bytes.LastIndex(end, []byte(`"usage":`)); j >= 0 {
		d := json.NewDecoder(bytes.NewReader(end[j+len(`"usage":`):]))
		var raw json.RawMessage
		if d.Decode(&raw) == nil {
			u, found = usageObject(raw)
		}
	}
	return true, u, found
}

func isFinal(typ string) bool {
	for _, f := range finalEvents {
		if typ == f {
			return true
		}
	}
	return false
}

// ID reads the id of the response a Responses answer carries: the
// top-level "id" of a response body, or, for an event stream, the
// response.id of its first event (response.created), which head, the
// stream's first bytes, need not hold in full: vLLM writes the response
// first in the event and its id first in the response. "" when there is
// none.
func ID(head []byte) string {
	b := bytes.TrimLeft(head, " \t\r\n")
	if len(b) > 0 && b[0] == '{' {
		f, err := openai.FindMember(b, "id")
		if err != nil || !f.Found || !f.IsString {
			return ""
		}
		return f.Name
	}
	for len(b) > 0 {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		if v, ok := bytes.CutPrefix(bytes.TrimRight(line, "\r"), []byte("data:")); ok {
			s := scanner{b: bytes.TrimLeft(v, " ")}
			return s.responseID()
		}
	}
	return ""
}

// scanner reads the start of a JSON object that may be cut short.
type scanner struct {
	b []byte
	i int
}

// responseID finds "response"."id" in the object s holds, reading only up
// to it.
func (s *scanner) responseID() string {
	if !s.eat('{') || !s.member("response") || !s.eat('{') || !s.member("id") {
		return ""
	}
	id, ok := s.str()
	if !ok {
		return ""
	}
	return id
}

// member moves past the members of the object s is in until the one
// named key, and past its colon; false when the object ends first or is
// cut short. s must be just inside the object's brace.
func (s *scanner) member(key string) bool {
	for {
		s.space()
		if s.i < len(s.b) && s.b[s.i] == ',' {
			s.i++
			s.space()
		}
		k, ok := s.str()
		if !ok {
			return false
		}
		s.space()
		if !s.eat(':') {
			return false
		}
		if k == key {
			s.space()
			return true
		}
		if !s.skip() {
			return false
		}
	}
}

// str reads a JSON string.
func (s *scanner) str() (string, bool) {
	s.space()
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return "", false
	}
	start := s.i
	for s.i++; s.i < len(s.b); s.i++ {
		switch s.b[s.i] {
		case '\\':
			s.i++
		case '"':
			s.i++
			var out string
			if json.Unmarshal(s.b[start:s.i], &out) != nil {
				return "", false
			}
			return out, true
		}
	}
	return "", false
}

// skip moves past one JSON value.
func (s *scanner) skip() bool {
	s.space()
	if s.i >= len(s.b) {
		return false
	}
	switch s.b[s.i] {
	case '"':
		_, ok := s.str()
		return ok
	case '{', '[':
		depth := 0
		for ; s.i < len(s.b); s.i++ {
			switch s.b[s.i] {
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					s.i++
					return true
				}
			case '"':
				if _, ok := s.str(); !ok {
					return false
				}
				s.i--
			}
		}
		return false
	}
	for ; s.i < len(s.b); s.i++ {
		switch s.b[s.i] {
		case ',', '}', ']', ' ', '\t', '\r', '\n':
			return true
		}
	}
	return false
}

func (s *scanner) eat(c byte) bool {
	s.space()
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

func (s *scanner) space() {
	for s.i < len(s.b) && (s.b[s.i] == ' ' || s.b[s.i] == '\t' || s.b[s.i] == '\r' || s.b[s.i] == '\n') {
		s.i++
	}
}

// AppendFailed appends the event OpenAI's Responses API ends a stream with
// when the response fails after it started: response.failed, numbered seq,
// with the response (id, status "failed") and its error, code
// server_error:
//
//	event: response.failed\ndata: {"type":"response.failed","sequence_number":7,"response":{"id":"resp_…","object":"response","status":"failed","error":{"code":"server_error","message":"…"}}}\n\n
func AppendFailed(dst []byte, id string, seq int64, message string) []byte {
	dst = append(dst, `event: response.failed`+"\n"+`data: {"type":"response.failed","sequence_number":`...)
	dst = strconv.AppendInt(dst, seq, 10)
	dst = append(dst, `,"response":{"id":`...)
	dst = openai.AppendString(dst, id)
	dst = append(dst, `,"object":"response","status":"failed","error":{"code":"server_error","message":`...)
	dst = openai.AppendString(dst, message)
	return append(dst, "}}}\n\n"...)
}

// NextSequence is the sequence_number the event after the data values
// each gives (a stream's last events, in order) is to carry: one past the
// last sequence_number seen, 0 when none is.
func NextSequence(each func(fn func(v []byte))) int64 {
	next := int64(0)
	each(func(v []byte) {
		f, err := openai.FindMember(v, "sequence_number")
		if err != nil || !f.Found || f.IsString {
			return
		}
		if n, err := strconv.ParseInt(string(v[f.Start:f.End]), 10, 64); err == nil && n >= next {
			next = n + 1
		}
	})
	return next
}

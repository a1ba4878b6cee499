package openai

import "errors"

// ErrNotObject is returned by FindModel for a body that is not one JSON
// object.
var ErrNotObject = errors.New("openai: body is not a JSON object")

// ModelField locates the top-level "model" member of a request body without
// decoding the rest, so a proxy can route on it and forward every other byte
// untouched.
type ModelField struct {
	Name  string // the model name; "" when absent or null
	Found bool   // a top-level "model" member exists (with any value)
	// IsString reports whether its value is a JSON string without escapes,
	// the only kind a proxy can splice safely; a name with escapes is still
	// decoded into Name.
	IsString bool
	// Start and End delimit the member's value in the body: body[Start:End]
	// is `"name"` or `null`. For a body without the member, Start is the
	// offset just after the opening brace, where one can be inserted.
	Start, End int
}

// FindModel scans body, which must be a JSON object, for its top-level
// "model" member. It checks only as much syntax as it needs to find member
// boundaries; the engine validates the rest. The last "model" member wins,
// as in Python's json module.
func FindModel(body []byte) (ModelField, error) {
	r := reader{b: body}
	r.ws()
	if r.i >= len(r.b) || r.b[r.i] != '{' {
		return ModelField{}, ErrNotObject
	}
	f := ModelField{Start: r.i + 1, End: r.i + 1}
	r.object(func(key, val span) {
		if k, plain := rawKey(body, key); plain && string(k) != "model" ||
			!plain && decodeString(body[key.start:key.end]) != "model" {
			return
		}
		f.Found, f.Start, f.End = true, val.start, val.end
		f.Name, f.IsString = "", false
		if val.kind == kString {
			_, f.IsString = rawKey(body, val)
			f.Name = decodeString(body[val.start:val.end])
		}
	})
	if r.err != nil {
		return ModelField{}, ErrNotObject
	}
	r.ws()
	if r.i != len(r.b) {
		return ModelField{}, ErrNotObject
	}
	return f, nil
}

// SpliceModel returns body with its model member's value replaced by name,
// or, when the body has no model member, with `"model":name` inserted first.
// Every other byte is kept. name must need no JSON escaping.
func SpliceModel(dst, body []byte, f ModelField, name string) []byte {
	dst = append(dst, body[:f.Start]...)
	if !f.Found {
		dst = append(dst, `"model":"`...)
		dst = append(dst, name...)
		dst = append(dst, '"')
		if !emptyObject(body[f.Start:]) {
			dst = append(dst, ',')
		}
		return append(dst, body[f.Start:]...)
	}
	dst = append(dst, '"')
	dst = append(dst, name...)
	dst = append(dst, '"')
	return append(dst, body[f.End:]...)
}

// emptyObject reports whether rest, the bytes after an object's opening
// brace, hold only whitespace before its closing brace.
func emptyObject(rest []byte) bool {
	for _, c := range rest {
		switch c {
		case ' ', '\t', '\n', '\r':
		default:
			return c == '}'
		}
	}
	return false
}

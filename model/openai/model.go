package openai

import "errors"

// ErrNotObject is returned by FindModel for a body that is not one JSON
// object.
var ErrNotObject = errors.New("openai: body is not a JSON object")

// ModelField locates a top-level member of a JSON object, such as a request's
// "model" or a model card's "id", without decoding the rest, so a proxy can
// route on it and forward every other byte untouched.
type ModelField struct {
	Name  string // the member's string value; "" when absent, null or not a string
	Found bool   // the member exists (with any value)
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
func FindModel(body []byte) (ModelField, error) { return FindMember(body, "model") }

// FindMember is FindModel for the member named key.
func FindMember(body []byte, key string) (ModelField, error) {
	var f [1]ModelField
	err := FindMembers(body, []Member{{Key: key, Value: true}}, f[:])
	return f[0], err
}

// Member names a top-level member for FindMembers. Value asks for its
// string value in ModelField.Name; without it Name stays "", and a long
// value (a prompt) is not copied.
type Member struct {
	Key   string
	Value bool
}

// FindMembers is FindMember for several members in one scan of body:
// out[i] locates members[i] (len(out) must be at least len(members)), with
// the last of duplicate members winning, as in FindMember.
func FindMembers(body []byte, members []Member, out []ModelField) error {
	out = out[:len(members)]
	r := reader{b: body}
	r.ws()
	if r.i >= len(r.b) || r.b[r.i] != '{' {
		clear(out)
		return ErrNotObject
	}
	for i := range out {
		out[i] = ModelField{Start: r.i + 1, End: r.i + 1}
	}
	r.object(func(k span, val span) {
		raw, plain := rawKey(body, k)
		var decoded string
		if !plain {
			decoded = decodeString(body[k.start:k.end])
		}
		for i, m := range members {
			if plain && string(raw) != m.Key || !plain && decoded != m.Key {
				continue
			}
			f := &out[i]
			f.Found, f.Start, f.End = true, val.start, val.end
			f.Name, f.IsString = "", false
			if val.kind == kString {
				_, f.IsString = rawKey(body, val)
				if m.Value {
					f.Name = decodeString(body[val.start:val.end])
				}
			}
		}
	})
	if r.err != nil {
		clear(out)
		return ErrNotObject
	}
	r.ws()
	if r.i != len(r.b) {
		clear(out)
		return ErrNotObject
	}
	return nil
}

// SpliceModel returns body with its model member's value replaced by name,
// or, when the body has no model member, with `"model":name` inserted first.
// Every other byte is kept.
func SpliceModel(dst, body []byte, f ModelField, name string) []byte {
	return SpliceMember(dst, body, f, "model", name)
}

// SpliceMember is SpliceModel for the member named key (found by FindMember).
func SpliceMember(dst, body []byte, f ModelField, key, name string) []byte {
	dst = append(dst, body[:f.Start]...)
	if !f.Found {
		dst = appendString(dst, key)
		dst = append(dst, ':')
		dst = appendString(dst, name)
		if !emptyObject(body[f.Start:]) {
			dst = append(dst, ',')
		}
		return append(dst, body[f.Start:]...)
	}
	dst = appendString(dst, name)
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

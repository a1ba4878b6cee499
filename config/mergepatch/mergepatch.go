// Package mergepatch applies JSON merge patches (RFC 7396) to decoded JSON
// values: objects are map[string]any, arrays []any, and the rest scalars or
// nil, as encoding/json decodes them into an any.
package mergepatch

// Apply returns target with patch applied, as RFC 7396 section 2 defines
// it: an object patch merges key by key into the target (an object, or {}
// when the target is anything else), null deleting a key and every other
// value merged recursively; any other patch replaces the target whole.
// Nulls inside a patch object never reach the result; arrays are values
// like any other and are copied in as they are.
//
// Apply modifies neither argument. The result may share the values it does
// not change with target and patch.
func Apply(target, patch any) any {
	p, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	t, _ := target.(map[string]any)
	out := make(map[string]any, len(t)+len(p))
	for k, v := range t {
		out[k] = v
	}
	for k, v := range p {
		if v == nil {
			delete(out, k)
			continue
		}
		out[k] = Apply(out[k], v)
	}
	return out
}

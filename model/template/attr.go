package template

import (
	"errors"
	"math/big"
	"strings"
	"unicode/utf8"
)

// Python attribute names of the builtin types templates see. Jinja2's
// getattr tries the Python attribute first and the item second, so
// message.items is dict.items even when the dict has an "items" key.
// ImmutableSandboxedEnvironment blocks the methods that modify a known
// mutable type (jinja2.sandbox._mutable_spec).

func isStrAttr(name string) bool {
	switch name {
	case "capitalize", "casefold", "center", "count", "encode", "endswith", "expandtabs", "find", "format",
		"format_map", "index", "isalnum", "isalpha", "isascii", "isdecimal", "isdigit", "isidentifier",
		"islower", "isnumeric", "isprintable", "isspace", "istitle", "isupper", "join", "ljust", "lower",
		"lstrip", "maketrans", "partition", "removeprefix", "removesuffix", "replace", "rfind", "rindex",
		"rjust", "rpartition", "rsplit", "rstrip", "split", "splitlines", "startswith", "strip", "swapcase",
		"title", "translate", "upper", "zfill":
		return true
	}
	return false
}

func isMarkupAttr(name string) bool {
	return name == "escape" || name == "unescape" || name == "striptags" || isStrAttr(name)
}

// dictAttr reports whether name is a dict attribute and whether the
// sandbox blocks it.
func dictAttr(name string) (exists, unsafe bool) {
	switch name {
	case "copy", "fromkeys", "get", "items", "keys", "values":
		return true, false
	case "clear", "pop", "popitem", "setdefault", "update":
		return true, true
	}
	return false, false
}

func listAttr(name string) (exists, unsafe bool) {
	switch name {
	case "copy", "count", "index":
		return true, false
	case "append", "clear", "extend", "insert", "pop", "remove", "reverse", "sort":
		return true, true
	}
	return false, false
}

func isTupleAttr(name string) bool { return name == "count" || name == "index" }

func isIntAttr(name string) bool {
	switch name {
	case "as_integer_ratio", "bit_count", "bit_length", "conjugate", "from_bytes", "to_bytes":
		return true
	}
	return false
}

func isFloatAttr(name string) bool {
	switch name {
	case "as_integer_ratio", "conjugate", "fromhex", "hex", "is_integer":
		return true
	}
	return false
}

func unsafeUndefined(obj Value, name string) *Undefined {
	return &Undefined{name: name, obj: obj, hasObj: true, kind: "SecurityError",
		hint: "access to attribute '" + name + "' of '" + typeName(obj) + "' object is unsafe."}
}

// isMethod reports whether obj.name is a safe method of a str, dict, list
// or tuple, which a call can then run without building a bound method.
func isMethod(obj Value, name string) bool {
	switch obj.(type) {
	case string:
		return isStrAttr(name)
	case *Dict:
		ok, unsafe := dictAttr(name)
		return ok && !unsafe
	case List:
		ok, unsafe := listAttr(name)
		return ok && !unsafe
	case Tuple:
		return isTupleAttr(name)
	}
	return false
}

// pyAttr looks up a Python attribute (not an item) of obj.
func pyAttr(obj Value, name string) (Value, bool) {
	if strings.HasPrefix(name, "__") && strings.HasSuffix(name, "__") && len(name) > 4 {
		return unsafeUndefined(obj, name), true
	}
	switch x := obj.(type) {
	case string:
		if isStrAttr(name) {
			return &boundMethod{recv: x, name: name}, true
		}
	case Markup:
		if isMarkupAttr(name) {
			return &boundMethod{recv: x, name: name}, true
		}
	case *Dict:
		if ok, unsafe := dictAttr(name); unsafe {
			return unsafeUndefined(obj, name), true
		} else if ok {
			return &boundMethod{recv: x, name: name}, true
		}
	case List:
		if ok, unsafe := listAttr(name); unsafe {
			return unsafeUndefined(obj, name), true
		} else if ok {
			return &boundMethod{recv: x, name: name}, true
		}
	case Tuple:
		if isTupleAttr(name) {
			return &boundMethod{recv: x, name: name}, true
		}
	case bool, int64, *big.Int:
		switch name {
		case "real", "numerator":
			k, i, b, _ := numeric(x)
			if k == 2 {
				return b, true
			}
			return i, true
		case "imag":
			return int64(0), true
		case "denominator":
			return int64(1), true
		}
		if isIntAttr(name) {
			return &boundMethod{recv: x, name: name}, true
		}
	case float64:
		switch name {
		case "real":
			return x, true
		case "imag":
			return 0.0, true
		}
		if isFloatAttr(name) {
			return &boundMethod{recv: x, name: name}, true
		}
	case *namespace:
		return x.attrs.GetString(name)
	case *loopCtx:
		return x.attr(name)
	case *groupTuple:
		switch name {
		case "grouper":
			return x.grouper, true
		case "list":
			return x.list, true
		case "count", "index":
			return &boundMethod{recv: Tuple{x.grouper, x.list}, name: name}, true
		}
	case *macro:
		switch name {
		case "name":
			return x.def.name, true
		case "arguments":
			t := make(Tuple, len(x.def.params))
			for i, p := range x.def.params {
				t[i] = p
			}
			return t, true
		case "catch_kwargs":
			return x.def.catchKwargs, true
		case "catch_varargs":
			return x.def.catchVarargs, true
		case "caller":
			return x.def.callerUsed, true
		}
	case *cycler:
		switch name {
		case "current":
			return x.items[x.pos], true
		case "items":
			return List(x.items), true
		case "next", "reset":
			return &boundMethod{recv: x, name: name}, true
		}
	case *dictView:
		if name == "mapping" {
			return x.d, true
		}
	case *rangeVal:
		switch name {
		case "start":
			return x.start, true
		case "stop":
			return x.stop, true
		case "step":
			return x.step, true
		case "count", "index":
			return &boundMethod{recv: x.items(), name: name}, true
		}
	}
	return nil, false
}

// getattr is SandboxedEnvironment.getattr: attribute first, then item.
func (r *renderer) getattr(obj Value, name string) Value {
	if v, ok := pyAttr(obj, name); ok {
		return v
	}
	if d, ok := obj.(*Dict); ok {
		if v, ok := d.GetString(name); ok {
			return v
		}
	}
	return undefinedAttr(obj, name)
}

// errLookup is an IndexError/KeyError/TypeError from obj[key], which
// Jinja2's getitem turns into an attribute lookup or Undefined.
var errLookup = errors.New("lookup failed")

// getitem is SandboxedEnvironment.getitem: item first, then attribute.
func (r *renderer) getitem(obj, key Value) (Value, error) {
	v, err := r.item(obj, key)
	if err == nil {
		return v, nil
	}
	if err != errLookup {
		return nil, err
	}
	if s, ok := key.(string); ok {
		if v, ok := pyAttr(obj, s); ok {
			return v, nil
		}
	}
	return undefinedAttr(obj, key), nil
}

func (r *renderer) item(obj, key Value) (Value, error) {
	if s, ok := key.(*sliceVal); ok {
		return r.slice(obj, s)
	}
	switch x := obj.(type) {
	case *Dict:
		h, err := hashKey(key)
		if err != nil {
			return nil, errLookup
		}
		if i := x.find(h); i >= 0 {
			return x.ents[i].val, nil
		}
		return nil, errLookup
	case List:
		return seqIndex(x, key)
	case Tuple:
		return seqIndex(x, key)
	case *groupTuple:
		return seqIndex([]Value{x.grouper, x.list}, key)
	case string:
		return strIndex(x, key)
	case Markup:
		v, err := strIndex(string(x), key)
		if err != nil {
			return nil, err
		}
		return Markup(v.(string)), nil
	case *rangeVal:
		return seqIndex(x.items(), key)
	}
	return nil, errLookup
}

func indexOf(key Value, n int) (int, bool) {
	k, i, b, _ := numeric(key)
	switch k {
	case 1:
	case 2:
		_ = b
		return 0, false
	default:
		return 0, false
	}
	if i < 0 {
		i += int64(n)
	}
	if i < 0 || i >= int64(n) {
		return 0, false
	}
	return int(i), true
}

func seqIndex(items []Value, key Value) (Value, error) {
	if i, ok := indexOf(key, len(items)); ok {
		return items[i], nil
	}
	return nil, errLookup
}

func strIndex(s string, key Value) (Value, error) {
	if k, _, _, _ := numeric(key); k != 1 && k != 2 {
		return nil, errLookup
	}
	if isASCII(s) {
		if i, ok := indexOf(key, len(s)); ok {
			return s[i : i+1], nil
		}
		return nil, errLookup
	}
	rs := []rune(s)
	if i, ok := indexOf(key, len(rs)); ok {
		return string(rs[i]), nil
	}
	return nil, errLookup
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// sliceIndices is slice.indices(n).
func sliceIndices(s *sliceVal, n int) (start, stop, step int, err error) {
	get := func(v Value, def int) (int, error) {
		if v == nil {
			return def, nil
		}
		k, i, b, _ := numeric(v)
		switch k {
		case 1:
			if i > int64(n)+1 {
				return n + 1, nil
			}
			if i < -int64(n)-1 {
				return -n - 1, nil
			}
			return int(i), nil
		case 2:
			if b.Sign() > 0 {
				return n + 1, nil
			}
			return -n - 1, nil
		}
		return 0, typeErrorf("slice indices must be integers or None or have an __index__ method")
	}
	st, err := get(s.step, 1)
	if err != nil {
		return 0, 0, 0, err
	}
	if st == 0 {
		return 0, 0, 0, valueErrorf("slice step cannot be zero")
	}
	lower, upper := 0, n
	if st < 0 {
		lower, upper = -1, n-1
	}
	norm := func(v Value, def int) (int, error) {
		if v == nil {
			return def, nil
		}
		x, err := get(v, 0)
		if err != nil {
			return 0, err
		}
		if x < 0 {
			x += n
			if x < lower {
				x = lower
			}
		} else if x > upper {
			x = upper
		}
		return x, nil
	}
	defStart, defStop := lower, upper
	if st < 0 {
		defStart, defStop = upper, lower
	}
	if start, err = norm(s.start, defStart); err != nil {
		return
	}
	stop, err = norm(s.stop, defStop)
	return start, stop, st, err
}

func sliceItems[T any](items []T, s *sliceVal) ([]T, error) {
	start, stop, step, err := sliceIndices(s, len(items))
	if err != nil {
		return nil, err
	}
	var out []T
	if step > 0 {
		for i := start; i < stop; i += step {
			out = append(out, items[i])
		}
	} else {
		for i := start; i > stop; i += step {
			out = append(out, items[i])
		}
	}
	return out, nil
}

func (r *renderer) slice(obj Value, s *sliceVal) (Value, error) {
	switch x := obj.(type) {
	case List:
		out, err := sliceItems(x, s)
		if out == nil && err == nil {
			out = List{}
		}
		return List(out), err
	case Tuple:
		out, err := sliceItems(x, s)
		if out == nil && err == nil {
			out = Tuple{}
		}
		return Tuple(out), err
	case string:
		return sliceString(x, s)
	case Markup:
		v, err := sliceString(string(x), s)
		if err != nil {
			return nil, err
		}
		return Markup(v.(string)), nil
	case *rangeVal:
		start, stop, step, err := sliceIndices(s, int(x.length()))
		if err != nil {
			return nil, err
		}
		return &rangeVal{start: x.start + int64(start)*x.step, stop: x.start + int64(stop)*x.step, step: x.step * int64(step)}, nil
	case *Dict:
		return nil, typeErrorf("unhashable type: 'slice'")
	}
	return nil, typeErrorf("'%s' object is not subscriptable", typeName(obj))
}

func sliceString(x string, s *sliceVal) (Value, error) {
	if isASCII(x) {
		out, err := sliceItems([]byte(x), s)
		return string(out), err
	}
	out, err := sliceItems([]rune(x), s)
	return string(out), err
}

// iterate is iter(v), materialized; it charges one step per item.
func (r *renderer) iterate(v Value) ([]Value, error) {
	items, err := r.iterItems(v)
	if err == nil {
		err = r.charge(len(items))
	}
	return items, err
}

func (r *renderer) iterItems(v Value) ([]Value, error) {
	if g, ok := v.(*rangeVal); ok && g.length() > maxRange {
		return nil, errf("OverflowError", "Range too big. The sandbox blocks ranges larger than MAX_RANGE (%d).", maxRange)
	}
	switch x := v.(type) {
	case List:
		return x, nil
	case Tuple:
		return x, nil
	case *Dict:
		return x.Keys(), nil
	case string:
		return strChars(x), nil
	case Markup:
		return strChars(string(x)), nil
	case *Undefined:
		return nil, nil
	case *rangeVal:
		return x.items(), nil
	case *dictView:
		return x.items(), nil
	case *generator:
		return x.consume()
	case *groupTuple:
		return []Value{x.grouper, x.list}, nil
	}
	return nil, typeErrorf("'%s' object is not iterable", typeName(v))
}

func strChars(s string) []Value {
	out := make([]Value, 0, len(s))
	for _, c := range s {
		out = append(out, string(c))
	}
	return out
}

// pyLen is len(v).
func pyLen(v Value) (int, error) {
	switch x := v.(type) {
	case List:
		return len(x), nil
	case Tuple:
		return len(x), nil
	case *Dict:
		return x.Len(), nil
	case string:
		return utf8.RuneCountInString(x), nil
	case Markup:
		return utf8.RuneCountInString(string(x)), nil
	case *Undefined:
		return 0, nil
	case *rangeVal:
		return int(x.length()), nil
	case *dictView:
		return x.d.Len(), nil
	case *groupTuple:
		return 2, nil
	}
	return 0, typeErrorf("object of type '%s' has no len()", typeName(v))
}

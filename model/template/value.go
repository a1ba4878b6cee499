package template

import (
	"fmt"
	"math"
	"math/big"
	"sort"
	"strconv"
)

// Value is a template value. Its dynamic type mirrors a Python object:
//
//	nil        None
//	bool       bool
//	int64      int (and *big.Int once it leaves the int64 range)
//	float64    float
//	string     str
//	Markup     markupsafe.Markup (from |safe and |escape)
//	List       list
//	Tuple      tuple
//	*Dict      dict, keeping insertion order
//	*Undefined jinja2.Undefined
//	Func       a callable supplied by the caller
//
// Templates also create values of unexported types (namespace(), loop,
// macros, range(), dict views and the generators that filters such as
// select return). Callers build contexts from the exported types, from
// ParseJSON, or from plain Go values through FromGo.
type Value = any

// List is a Python list. Templates cannot change it (the sandbox blocks
// append and friends), so a List may be shared between concurrent renders.
type List []Value

// Tuple is a Python tuple; it prints with parentheses and is hashable. Like
// List, it is never modified once built.
type Tuple []Value

// Markup is a string that is already HTML-safe (markupsafe.Markup). Adding a
// plain string to it escapes the plain string, as Python does.
type Markup string

// Func is a callable that a caller places in the context. It receives the
// positional arguments and the keyword arguments (nil when there are none).
// A Func in a context shared by concurrent renders must be safe for
// concurrent use; the renderer never retains args after the call.
type Func func(args []Value, kwargs *Dict) (Value, error)

// Undefined is jinja2.Undefined: it prints as "", is false, iterates as
// empty, and raises an UndefinedError on attribute access, arithmetic,
// comparison or call. It is immutable.
type Undefined struct {
	name   string // the missing name or attribute
	obj    Value  // the object the attribute was looked up on (hasObj)
	key    Value  // the missing attribute or item (hasObj)
	hasObj bool
	hint   string // explicit message
	kind   string // error kind raised on use ("UndefinedError" or "SecurityError")
}

func undefinedName(name string) *Undefined { return &Undefined{name: name} }

func undefinedAttr(obj Value, name Value) *Undefined {
	return &Undefined{obj: obj, key: name, hasObj: true}
}

func undefinedHint(hint string) *Undefined { return &Undefined{hint: hint} }

func undefinedAttrMsg(obj Value, name Value) string {
	if s, ok := name.(string); ok {
		return fmt.Sprintf("'%s' has no attribute %s", objectTypeRepr(obj), pyRepr(s))
	}
	return fmt.Sprintf("%s has no element %s", objectTypeRepr(obj), pyRepr(name))
}

func objectTypeRepr(obj Value) string {
	if obj == nil {
		return "None"
	}
	return typeName(obj) + " object"
}

// message is the text of the UndefinedError raised when u is used.
func (u *Undefined) message() string {
	if u.hint != "" {
		return u.hint
	}
	if u.hasObj {
		return undefinedAttrMsg(u.obj, u.key)
	}
	return pyRepr(u.name) + " is undefined"
}

func (u *Undefined) err() error {
	k := u.kind
	if k == "" {
		k = "UndefinedError"
	}
	return &Error{Kind: k, Msg: u.message()}
}

// Dict is a Python dict: it keeps insertion order and treats keys as Python
// does (1, 1.0 and True are the same key). A Dict is not safe for concurrent
// mutation; once built it is only read, so one Dict may be shared between
// concurrent renders.
type Dict struct {
	ents  []dictEntry
	index map[any]int // built once the dict grows past smallDict entries
}

type dictEntry struct {
	key, val Value
	h        any
}

const smallDict = 8

// NewDict returns an empty Dict with room for n entries.
func NewDict(n int) *Dict { return &Dict{ents: make([]dictEntry, 0, n)} }

// Len reports the number of entries.
func (d *Dict) Len() int {
	if d == nil {
		return 0
	}
	return len(d.ents)
}

// Set sets key to val. A new key goes last; an existing key keeps its place.
// It fails only for keys Python cannot hash (lists, dicts).
func (d *Dict) Set(key, val Value) error {
	h, err := hashKey(key)
	if err != nil {
		return err
	}
	if i := d.find(h); i >= 0 {
		d.ents[i].val = val
		return nil
	}
	d.ents = append(d.ents, dictEntry{key: key, val: val, h: h})
	if d.index != nil {
		d.index[h] = len(d.ents) - 1
	} else if len(d.ents) > smallDict {
		d.index = make(map[any]int, len(d.ents)*2)
		for i, e := range d.ents {
			d.index[e.h] = i
		}
	}
	return nil
}

// SetString is Set for a string key, which cannot fail.
func (d *Dict) SetString(key string, val Value) {
	if i := d.find(key); i >= 0 {
		d.ents[i].val = val
		return
	}
	d.ents = append(d.ents, dictEntry{key: key, val: val, h: key})
	if d.index != nil {
		d.index[key] = len(d.ents) - 1
	} else if len(d.ents) > smallDict {
		d.index = make(map[any]int, len(d.ents)*2)
		for i, e := range d.ents {
			d.index[e.h] = i
		}
	}
}

func (d *Dict) find(h any) int {
	if d == nil {
		return -1
	}
	if d.index != nil {
		if i, ok := d.index[h]; ok {
			return i
		}
		return -1
	}
	if s, ok := h.(string); ok {
		for i := range d.ents {
			if k, ok := d.ents[i].h.(string); ok && k == s {
				return i
			}
		}
		return -1
	}
	for i := range d.ents {
		if d.ents[i].h == h {
			return i
		}
	}
	return -1
}

// Get returns the value for key.
func (d *Dict) Get(key Value) (Value, bool) {
	h, err := hashKey(key)
	if err != nil {
		return nil, false
	}
	if i := d.find(h); i >= 0 {
		return d.ents[i].val, true
	}
	return nil, false
}

// GetString is Get for a string key.
func (d *Dict) GetString(key string) (Value, bool) {
	if i := d.find(key); i >= 0 {
		return d.ents[i].val, true
	}
	return nil, false
}

// Keys returns the keys in insertion order.
func (d *Dict) Keys() []Value {
	out := make([]Value, d.Len())
	for i := range out {
		out[i] = d.ents[i].key
	}
	return out
}

// Range calls f for each entry in order until f returns false.
func (d *Dict) Range(f func(key, val Value) bool) {
	if d == nil {
		return
	}
	for _, e := range d.ents {
		if !f(e.key, e.val) {
			return
		}
	}
}

func (d *Dict) clone() *Dict {
	n := &Dict{ents: append([]dictEntry(nil), d.ents...)}
	if d.index != nil {
		n.index = make(map[any]int, len(d.index))
		for k, v := range d.index {
			n.index[k] = v
		}
	}
	return n
}

type nilKey struct{}
type undefinedKey struct{}
type bigKey string
type tupleKey string

// hashKey maps a Python-hashable value to a comparable Go value such that
// equal Python keys map to equal Go values (1 == 1.0 == True).
func hashKey(v Value) (any, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case Markup:
		return string(x), nil
	case int64:
		return x, nil
	case bool:
		if x {
			return int64(1), nil
		}
		return int64(0), nil
	case nil:
		return nilKey{}, nil
	case float64:
		if x == math.Trunc(x) && !math.IsInf(x, 0) {
			if x >= -9.223372036854775808e18 && x < 9.223372036854775808e18 {
				return int64(x), nil
			}
			b, _ := big.NewFloat(x).Int(nil)
			return bigKey(b.String()), nil
		}
		return x, nil
	case *big.Int:
		return bigKey(x.String()), nil
	case Tuple:
		s := make([]byte, 0, 16)
		for _, e := range x {
			h, err := hashKey(e)
			if err != nil {
				return nil, err
			}
			s = fmt.Appendf(s, "%T:%v,", h, h)
		}
		return tupleKey(s), nil
	case *Undefined:
		return undefinedKey{}, nil // all Undefineds are equal, and not None
	case List, *Dict, *namespace:
		return nil, typeErrorf("unhashable type: '%s'", typeName(v))
	}
	return fmt.Sprintf("%T:%p", v, v), nil
}

// typeName is Python's type(v).__name__.
func typeName(v Value) string {
	switch x := v.(type) {
	case nil:
		return "NoneType"
	case bool:
		return "bool"
	case int64, *big.Int:
		return "int"
	case float64:
		return "float"
	case string:
		return "str"
	case Markup:
		return "Markup"
	case List:
		return "list"
	case Tuple:
		return "tuple"
	case *Dict:
		return "dict"
	case *Undefined:
		return "Undefined"
	case Func, *builtinFunc, *boundMethod:
		return "builtin_function_or_method"
	case *macro:
		return "Macro"
	case *namespace:
		return "Namespace"
	case *loopCtx:
		return "LoopContext"
	case *rangeVal:
		return "range"
	case *dictView:
		return "dict_" + x.kind
	case *generator:
		return x.typ
	case *cycler:
		return "Cycler"
	case *joiner:
		return "Joiner"
	}
	return fmt.Sprintf("%T", v)
}

// truth is Python's bool(v).
func truth(v Value) bool {
	switch x := v.(type) {
	case nil:
		return false
	case bool:
		return x
	case int64:
		return x != 0
	case *big.Int:
		return x.Sign() != 0
	case float64:
		return x != 0
	case string:
		return x != ""
	case Markup:
		return x != ""
	case List:
		return len(x) > 0
	case Tuple:
		return len(x) > 0
	case *Dict:
		return x.Len() > 0
	case *Undefined:
		return false
	case *rangeVal:
		return x.length() > 0
	case *dictView:
		return x.d.Len() > 0
	}
	return true
}

// FromGo converts plain Go values into template values: ints and floats of
// any width, []any, []string, map[string]any (keys sorted, since Go maps have
// no order) and json-like nesting. Values already in template form pass
// through unchanged.
func FromGo(v any) (Value, error) {
	switch x := v.(type) {
	case nil, bool, int64, float64, string, Markup, *Undefined, Func, *big.Int:
		return x, nil
	case int:
		return int64(x), nil
	case int8:
		return int64(x), nil
	case int16:
		return int64(x), nil
	case int32:
		return int64(x), nil
	case uint8:
		return int64(x), nil
	case uint16:
		return int64(x), nil
	case uint32:
		return int64(x), nil
	case uint:
		return normBig(new(big.Int).SetUint64(uint64(x))), nil
	case uint64:
		return normBig(new(big.Int).SetUint64(x)), nil
	case float32:
		return float64(x), nil
	case []string:
		l := make(List, len(x))
		for i, s := range x {
			l[i] = s
		}
		return l, nil
	case List:
		return convertSlice(x, func(l []Value) Value { return List(l) })
	case Tuple:
		return convertSlice(x, func(l []Value) Value { return Tuple(l) })
	case []any:
		return convertSlice(x, func(l []Value) Value { return List(l) })
	case *Dict:
		var out *Dict
		for i, e := range x.ents {
			c, err := FromGo(e.val)
			if err != nil {
				return nil, err
			}
			if out == nil && !same(c, e.val) {
				out = x.clone()
			}
			if out != nil {
				out.ents[i].val = c
			}
		}
		if out == nil {
			return x, nil
		}
		return out, nil
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		d := NewDict(len(keys))
		for _, k := range keys {
			c, err := FromGo(x[k])
			if err != nil {
				return nil, err
			}
			d.SetString(k, c)
		}
		return d, nil
	case func(args []Value, kwargs *Dict) (Value, error):
		return Func(x), nil
	}
	return nil, fmt.Errorf("template: cannot use Go value of type %T", v)
}

func convertSlice(x []Value, wrap func([]Value) Value) (Value, error) {
	var out []Value
	for i, e := range x {
		c, err := FromGo(e)
		if err != nil {
			return nil, err
		}
		if out == nil && !same(c, e) {
			out = append([]Value(nil), x...)
		}
		if out != nil {
			out[i] = c
		}
	}
	if out == nil {
		out = x
	}
	return wrap(out), nil
}

// same reports whether FromGo left a value as it was (identity for
// containers, equality for scalars).
func same(a, b Value) bool {
	switch x := a.(type) {
	case List:
		y, ok := b.(List)
		return ok && len(x) == len(y) && (len(x) == 0 || &x[0] == &y[0])
	case Tuple:
		y, ok := b.(Tuple)
		return ok && len(x) == len(y) && (len(x) == 0 || &x[0] == &y[0])
	case *Dict:
		y, ok := b.(*Dict)
		return ok && x == y
	case Func:
		_, ok := b.(Func)
		return ok
	case *big.Int:
		y, ok := b.(*big.Int)
		return ok && x == y
	}
	switch b.(type) {
	case nil, bool, int64, float64, string, Markup, *Undefined:
		return a == b
	}
	return false
}

// normBig returns b as int64 when it fits.
func normBig(b *big.Int) Value {
	if b.IsInt64() {
		return b.Int64()
	}
	return b
}

func itoa(i int64) string { return strconv.FormatInt(i, 10) }

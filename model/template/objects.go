package template

import "errors"

// Objects that templates create but callers never pass in.

// namespace is jinja2.utils.Namespace: the one mutable object a template
// may change ({% set ns.x = ... %}). It lives only inside one render.
type namespace struct{ attrs *Dict }

// loopCtx is jinja2.runtime.LoopContext for one for loop.
type loopCtx struct {
	items   []Value
	i       int
	depth0  int
	stmt    *forStmt
	frame   *frame
	last    Value // loop.changed state
	hasLast bool
}

func (l *loopCtx) attr(name string) (Value, bool) {
	n := len(l.items)
	switch name {
	case "index":
		return int64(l.i + 1), true
	case "index0":
		return int64(l.i), true
	case "revindex":
		return int64(n - l.i), true
	case "revindex0":
		return int64(n - l.i - 1), true
	case "first":
		return l.i == 0, true
	case "last":
		return l.i == n-1, true
	case "length":
		return int64(n), true
	case "depth":
		return int64(l.depth0 + 1), true
	case "depth0":
		return int64(l.depth0), true
	case "previtem":
		if l.i == 0 {
			return undefinedHint("there is no previous item"), true
		}
		return l.items[l.i-1], true
	case "nextitem":
		if l.i >= n-1 {
			return undefinedHint("there is no next item"), true
		}
		return l.items[l.i+1], true
	case "cycle", "changed":
		return &boundMethod{recv: l, name: name}, true
	}
	return nil, false
}

// macro is a macro or the caller of a call block, closed over the frame it
// was defined in.
type macro struct {
	def     *macroDef
	closure *frame
}

// rangeVal is Python's range object.
type rangeVal struct{ start, stop, step int64 }

func (g *rangeVal) length() int64 {
	if g.step > 0 && g.start < g.stop {
		return (g.stop - g.start + g.step - 1) / g.step
	}
	if g.step < 0 && g.start > g.stop {
		return (g.start - g.stop - g.step - 1) / (-g.step)
	}
	return 0
}

func (g *rangeVal) items() List {
	n := g.length()
	out := make(List, n)
	for i := int64(0); i < n; i++ {
		out[i] = g.start + i*g.step
	}
	return out
}

// dictView is dict.items(), dict.keys() or dict.values().
type dictView struct {
	d    *Dict
	kind string // items, keys, values
}

func (v *dictView) items() []Value {
	out := make([]Value, v.d.Len())
	for i, e := range v.d.ents {
		switch v.kind {
		case "keys":
			out[i] = e.key
		case "values":
			out[i] = e.val
		default:
			out[i] = Tuple{e.key, e.val}
		}
	}
	return out
}

// generator is a one-shot iterator that filters such as map, select and
// reverse return in Jinja2: always true, no len(), and empty once consumed.
//
// Filters compute a generator's items at once; an error on the way is kept
// in err and raised only when iteration reaches it, as Python's lazy
// generators do ({% if x|select %} never iterates and never fails).
type generator struct {
	typ   string // Python type name, e.g. "generator", "list_reverseiterator"
	fname string // the generator function, for repr (Python prints it)
	items []Value
	pos   int
	err   error
}

func (g *generator) consume() ([]Value, error) {
	rest := g.items[g.pos:]
	g.pos = len(g.items)
	return rest, g.err
}

func newGenerator(fname string, items []Value) *generator {
	return &generator{typ: "generator", fname: fname, items: items}
}

// lazy wraps the result of a generator filter: items produced before an
// error are kept and the error waits for iteration. Limit errors stop the
// render at once.
func lazy(fname string, items []Value, err error) (Value, error) {
	if errors.Is(err, ErrLimit) {
		return nil, err
	}
	return &generator{typ: "generator", fname: fname, items: items, err: err}, nil
}

// groupTuple is the (grouper, list) namedtuple that groupby yields.
type groupTuple struct {
	grouper Value
	list    List
}

// cycler is jinja2.utils.Cycler.
type cycler struct {
	items []Value
	pos   int
}

// joiner is jinja2.utils.Joiner.
type joiner struct {
	sep   string
	spent bool
}

// builtinFunc is a global function such as range or namespace.
type builtinFunc struct {
	name  string
	class string // Python prints classes (namespace, joiner, ...) as <class '...'>
	fn    func(r *renderer, args []Value, kw kwargs) (Value, error)
}

// boundMethod is obj.method not yet called.
type boundMethod struct {
	recv Value
	name string
}

// kwargs are the keyword arguments of one call, in call order.
type kwargs struct {
	names []string
	vals  []Value
}

func (k kwargs) len() int { return len(k.names) }

func (k kwargs) toDict() *Dict {
	d := NewDict(len(k.names))
	for i, n := range k.names {
		d.SetString(n, k.vals[i])
	}
	return d
}

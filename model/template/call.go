package template

import (
	"math"
	"math/big"
	"strings"
)

// missing marks a parameter that the call did not pass.
type missingT struct{}

var missing Value = missingT{}

// bind maps positional and keyword arguments onto params, Python style;
// parameters not passed are missing.
func bind(fname string, params []string, args []Value, kw kwargs) ([]Value, error) {
	if len(args) > len(params) {
		return nil, typeErrorf("%s() takes at most %d arguments (%d given)", fname, len(params), len(args))
	}
	if len(args) == len(params) && kw.len() == 0 {
		return args, nil
	}
	out := make([]Value, len(params))
	for i := range out {
		out[i] = missing
	}
	copy(out, args)
	for i, n := range kw.names {
		j := -1
		for k, p := range params {
			if p == n {
				j = k
				break
			}
		}
		if j < 0 {
			return nil, typeErrorf("%s() got an unexpected keyword argument '%s'", fname, n)
		}
		if out[j] != missing {
			return nil, typeErrorf("%s() got multiple values for argument '%s'", fname, n)
		}
		out[j] = kw.vals[i]
	}
	return out, nil
}

// call calls a template value.
func (r *renderer) call(callee Value, args []Value, kw kwargs) (Value, error) {
	switch c := callee.(type) {
	case *macro:
		return r.callMacro(c, args, kw)
	case *boundMethod:
		return r.callMethod(c.recv, c.name, args, kw)
	case *builtinFunc:
		return c.fn(r, args, kw)
	case Func:
		var d *Dict
		if kw.len() > 0 {
			d = kw.toDict()
		}
		return c(args, d)
	case *loopCtx:
		if len(args) != 1 || kw.len() > 0 {
			return nil, typeErrorf("loop() takes exactly one argument")
		}
		if !c.stmt.recursive {
			return nil, typeErrorf("Tried to call non recursive loop.  Maybe you forgot the 'recursive' modifier.")
		}
		if err := r.enter(); err != nil {
			return nil, err
		}
		defer r.leave()
		saved := r.out
		r.out = &strings.Builder{}
		err := r.runLoop(c.stmt, c.frame, args[0], c.depth0+1)
		s := r.out.String()
		r.out = saved
		return s, err
	case *joiner:
		if c.spent {
			return c.sep, nil
		}
		c.spent = true
		return "", nil
	case *Undefined:
		return nil, c.err()
	}
	return nil, typeErrorf("'%s' object is not callable", typeName(callee))
}

// callMacro follows jinja2.runtime.Macro.__call__.
func (r *renderer) callMacro(m *macro, args []Value, kw kwargs) (Value, error) {
	if err := r.enter(); err != nil {
		return nil, err
	}
	defer r.leave()
	if err := r.step(); err != nil {
		return nil, err
	}
	d := m.def
	n := len(d.params)
	var extra []Value
	if len(args) > n {
		extra = args[n:]
		args = args[:n]
	}
	vals := make([]Value, n)
	for i := range vals {
		vals[i] = missing
	}
	copy(vals, args)
	var left kwargs
	for i, name := range kw.names {
		j := -1
		for k := len(args); k < n; k++ {
			if d.params[k] == name {
				j = k
				break
			}
		}
		if j >= 0 && vals[j] == missing {
			vals[j] = kw.vals[i]
			continue
		}
		left.names = append(left.names, name)
		left.vals = append(left.vals, kw.vals[i])
	}
	foundCaller := d.explicitCallr
	fr := newFrame(m.closure, d.decl)
	if d.callerUsed && !foundCaller {
		var caller Value = undefinedHint("No caller defined")
		for i, name := range left.names {
			if name == "caller" {
				caller = left.vals[i]
				left.names = append(left.names[:i:i], left.names[i+1:]...)
				left.vals = append(left.vals[:i:i], left.vals[i+1:]...)
				break
			}
		}
		fr.set("caller", caller)
	}
	if d.catchKwargs {
		fr.set("kwargs", left.toDict())
	} else if left.len() > 0 {
		for _, name := range left.names {
			if name == "caller" {
				return nil, typeErrorf("macro '%s' was invoked with two values for the special caller argument. This is most likely a bug.", d.name)
			}
		}
		return nil, typeErrorf("macro '%s' takes no keyword argument '%s'", d.name, left.names[0])
	}
	if d.catchVarargs {
		fr.set("varargs", Tuple(append([]Value{}, extra...)))
	} else if len(extra) > 0 {
		return nil, typeErrorf("macro '%s' takes not more than %d argument(s)", d.name, n)
	}
	firstDefault := n - len(d.defaults)
	for i, p := range d.params {
		v := vals[i]
		if v == missing {
			if i >= firstDefault {
				var err error
				if v, err = d.defaults[i-firstDefault].eval(r, fr); err != nil {
					return nil, err
				}
			} else {
				v = undefinedHint("parameter '" + p + "' was not provided")
			}
		}
		fr.set(p, v)
	}
	out, err := r.capture(d.body, fr)
	if err != nil {
		return nil, err
	}
	if r.autoescape {
		return Markup(out), nil
	}
	return out, nil
}

// callMethod calls obj.name(...).
func (r *renderer) callMethod(obj Value, name string, args []Value, kw kwargs) (Value, error) {
	if err := r.step(); err != nil {
		return nil, err
	}
	switch x := obj.(type) {
	case string:
		v, err := r.strMethod(x, name, args, kw)
		if s, ok := v.(string); ok && len(s) == len(x) && (name == "strip" || name == "lstrip" || name == "rstrip") {
			return obj, err // unchanged: reuse the boxed string
		}
		return v, err
	case Markup:
		switch name {
		case "escape":
			return x, nil
		case "unescape":
			return htmlUnescape(string(x)), nil
		case "striptags":
			return stripTags(string(x)), nil
		case "format":
			v, err := r.format(string(x), args, kw, true)
			if err != nil {
				return nil, err
			}
			return Markup(v.(string)), nil
		}
		switch name {
		case "capitalize", "title", "lower", "upper", "replace", "ljust", "rjust", "lstrip", "rstrip",
			"center", "strip", "expandtabs", "swapcase", "zfill":
			// markupsafe escapes the string arguments of these methods.
			esc := make([]Value, len(args))
			for i, a := range args {
				if s, ok := a.(string); ok {
					a = htmlEscape(s)
				}
				esc[i] = a
			}
			args = esc
		case "join":
			if len(args) == 1 {
				items, err := r.iterate(args[0])
				if err != nil {
					return nil, err
				}
				esc := make(List, len(items))
				for i, it := range items {
					if s, ok := it.(string); ok {
						it = htmlEscape(s)
					}
					esc[i] = it
				}
				args = []Value{esc}
			}
		}
		v, err := r.strMethod(string(x), name, args, kw)
		if err != nil {
			return nil, err
		}
		// markupsafe wraps str results (and the parts of split and
		// partition) back into Markup.
		switch y := v.(type) {
		case string:
			return Markup(y), nil
		case List:
			return markupItems(y), nil
		case Tuple:
			return Tuple(markupItems(y)), nil
		}
		return v, nil
	case *Dict:
		return dictMethod(x, name, args, kw)
	case List:
		return seqMethod(x, name, args, kw, true)
	case Tuple:
		return seqMethod(x, name, args, kw, false)
	case float64:
		switch name {
		case "is_integer":
			return x == math.Trunc(x) && !math.IsInf(x, 0), nil
		case "conjugate":
			return x, nil
		}
	case bool, int64, *big.Int:
		switch name {
		case "bit_length":
			return int64(toBig(x).BitLen()), nil
		case "conjugate":
			return normBig(toBig(x)), nil
		}
	case *loopCtx:
		switch name {
		case "cycle":
			if len(args) == 0 {
				return nil, typeErrorf("no items for cycling given")
			}
			return args[x.i%len(args)], nil
		case "changed":
			var v Value = Tuple(args)
			if x.hasLast && pyEqual(x.last, v) {
				return false, nil
			}
			x.last, x.hasLast = v, true
			return true, nil
		}
	case *cycler:
		switch name {
		case "next":
			v := x.items[x.pos]
			x.pos = (x.pos + 1) % len(x.items)
			return v, nil
		case "reset":
			x.pos = 0
			return nil, nil
		}
	}
	return nil, errf("UnsupportedError", "%s.%s() is not supported", typeName(obj), name)
}

func markupItems(items []Value) List {
	out := make(List, len(items))
	for i, it := range items {
		if s, ok := it.(string); ok {
			out[i] = Markup(s)
		} else {
			out[i] = it
		}
	}
	return out
}

func dictMethod(d *Dict, name string, args []Value, kw kwargs) (Value, error) {
	switch name {
	case "get":
		if kw.len() > 0 {
			return nil, typeErrorf("dict.get() takes no keyword arguments")
		}
		if len(args) < 1 || len(args) > 2 {
			return nil, typeErrorf("get expected at most 2 arguments, got %d", len(args))
		}
		h, err := hashKey(args[0])
		if err != nil {
			return nil, err
		}
		if i := d.find(h); i >= 0 {
			return d.ents[i].val, nil
		}
		if len(args) == 2 {
			return args[1], nil
		}
		return nil, nil
	case "items", "keys", "values":
		if len(args) > 0 || kw.len() > 0 {
			return nil, typeErrorf("dict.%s() takes no arguments (%d given)", name, len(args))
		}
		return &dictView{d: d, kind: name}, nil
	case "copy":
		return d.clone(), nil
	}
	return nil, errf("UnsupportedError", "dict.%s() is not supported", name)
}

func seqMethod(items []Value, name string, args []Value, kw kwargs, isList bool) (Value, error) {
	if kw.len() > 0 {
		return nil, typeErrorf("%s() takes no keyword arguments", name)
	}
	switch name {
	case "count":
		if len(args) != 1 {
			return nil, typeErrorf("count() takes exactly one argument (%d given)", len(args))
		}
		n := int64(0)
		for _, e := range items {
			if pyEqual(e, args[0]) {
				n++
			}
		}
		return n, nil
	case "index":
		if len(args) < 1 {
			return nil, typeErrorf("index expected at least 1 argument, got 0")
		}
		for i, e := range items {
			if pyEqual(e, args[0]) {
				return int64(i), nil
			}
		}
		if isList {
			return nil, valueErrorf("%s is not in list", pyRepr(args[0]))
		}
		return nil, valueErrorf("tuple.index(x): x not in tuple")
	case "copy":
		if isList {
			return append(List{}, items...), nil
		}
	}
	return nil, errf("UnsupportedError", "%s() is not supported", name)
}

// globals are the names every template sees (jinja2.defaults plus the two
// that transformers adds). Context variables shadow them.
var globals = map[string]Value{
	"range":           &builtinFunc{name: "range", class: "range", fn: globalRange},
	"dict":            &builtinFunc{name: "dict", class: "dict", fn: globalDict},
	"namespace":       &builtinFunc{name: "namespace", class: "jinja2.utils.Namespace", fn: globalNamespace},
	"cycler":          &builtinFunc{name: "cycler", class: "jinja2.utils.Cycler", fn: globalCycler},
	"joiner":          &builtinFunc{name: "joiner", class: "jinja2.utils.Joiner", fn: globalJoiner},
	"lipsum":          &builtinFunc{name: "lipsum", fn: globalLipsum},
	"raise_exception": &builtinFunc{name: "raise_exception", fn: globalRaise},
	"strftime_now":    &builtinFunc{name: "strftime_now", fn: globalStrftime},
}

func intArg(v Value, what string) (int64, error) {
	k, i, b, _ := numeric(v)
	switch k {
	case 1:
		return i, nil
	case 2:
		if b.Sign() > 0 {
			return math.MaxInt64, nil
		}
		return math.MinInt64, nil
	}
	return 0, typeErrorf("'%s' object cannot be interpreted as an integer", typeName(v))
}

func globalRange(_ *renderer, args []Value, kw kwargs) (Value, error) {
	if kw.len() > 0 {
		return nil, typeErrorf("range() takes no keyword arguments")
	}
	if len(args) < 1 || len(args) > 3 {
		return nil, typeErrorf("range expected at most 3 arguments, got %d", len(args))
	}
	n := make([]int64, len(args))
	for i, a := range args {
		v, err := intArg(a, "range")
		if err != nil {
			return nil, err
		}
		n[i] = v
	}
	g := &rangeVal{stop: n[0], step: 1}
	if len(n) >= 2 {
		g.start, g.stop = n[0], n[1]
	}
	if len(n) == 3 {
		if n[2] == 0 {
			return nil, valueErrorf("range() arg 3 must not be zero")
		}
		g.step = n[2]
	}
	if g.length() > maxRange || g.length() < 0 {
		return nil, errf("OverflowError", "Range too big. The sandbox blocks ranges larger than MAX_RANGE (%d).", maxRange)
	}
	return g, nil
}

// pyDict is dict(*args, **kwargs).
func (r *renderer) pyDict(args []Value, kw kwargs) (*Dict, error) {
	if len(args) > 1 {
		return nil, typeErrorf("dict expected at most 1 argument, got %d", len(args))
	}
	d := NewDict(kw.len())
	if len(args) == 1 {
		switch src := args[0].(type) {
		case *Dict:
			d = src.clone()
		case *namespace:
			return nil, typeErrorf("'Namespace' object is not iterable")
		default:
			items, err := r.iterate(src)
			if err != nil {
				return nil, err
			}
			for i, it := range items {
				pair, err := r.iterate(it)
				if err != nil {
					return nil, typeErrorf("cannot convert dictionary update sequence element #%d to a sequence", i)
				}
				if len(pair) != 2 {
					return nil, valueErrorf("dictionary update sequence element #%d has length %d; 2 is required", i, len(pair))
				}
				if err := d.Set(pair[0], pair[1]); err != nil {
					return nil, err
				}
			}
		}
	}
	for i, n := range kw.names {
		d.SetString(n, kw.vals[i])
	}
	return d, nil
}

func globalDict(r *renderer, args []Value, kw kwargs) (Value, error) { return r.pyDict(args, kw) }

func globalNamespace(r *renderer, args []Value, kw kwargs) (Value, error) {
	d, err := r.pyDict(args, kw)
	if err != nil {
		return nil, err
	}
	return &namespace{attrs: d}, nil
}

func globalCycler(_ *renderer, args []Value, kw kwargs) (Value, error) {
	if len(args) == 0 {
		return nil, runtimeErrorf("at least one item has to be provided")
	}
	return &cycler{items: append([]Value{}, args...)}, nil
}

func globalJoiner(_ *renderer, args []Value, kw kwargs) (Value, error) {
	a, err := bind("joiner", []string{"sep"}, args, kw)
	if err != nil {
		return nil, err
	}
	sep := ", "
	if a[0] != missing {
		sep = pyStr(a[0])
	}
	return &joiner{sep: sep}, nil
}

func globalLipsum(*renderer, []Value, kwargs) (Value, error) {
	return nil, errf("UnsupportedError", "lipsum() needs randomness, which templates here do not get")
}

// globalRaise is transformers' raise_exception: it raises TemplateError.
func globalRaise(_ *renderer, args []Value, kw kwargs) (Value, error) {
	a, err := bind("raise_exception", []string{"message"}, args, kw)
	if err != nil {
		return nil, err
	}
	if a[0] == missing {
		return nil, typeErrorf("raise_exception() missing 1 required positional argument: 'message'")
	}
	return nil, &Error{Kind: "TemplateError", Msg: pyStr(a[0])}
}

func globalStrftime(r *renderer, args []Value, kw kwargs) (Value, error) {
	a, err := bind("strftime_now", []string{"format"}, args, kw)
	if err != nil {
		return nil, err
	}
	if a[0] == missing {
		return nil, typeErrorf("strftime_now() missing 1 required positional argument: 'format'")
	}
	fs, ok := a[0].(string)
	if !ok {
		return nil, typeErrorf("strftime() argument 1 must be str, not %s", typeName(a[0]))
	}
	if r.opts.Now.IsZero() {
		return nil, errf("RuntimeError", "strftime_now: no clock was passed to the render")
	}
	return strftime(r.opts.Now, fs), nil
}

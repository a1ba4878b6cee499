package template

import (
	"fmt"
	"strings"
)

func (e *constExpr) eval(*renderer, *frame) (Value, error) { return e.v, nil }

func (e *nameExpr) eval(r *renderer, f *frame) (Value, error) {
	if v, ok := r.lookup(f, e.name); ok {
		return v, nil
	}
	return undefinedName(e.name), nil
}

func evalAll(r *renderer, f *frame, xs []expr) ([]Value, error) {
	out := make([]Value, len(xs))
	for i, x := range xs {
		v, err := x.eval(r, f)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

func (e *listExpr) eval(r *renderer, f *frame) (Value, error) {
	v, err := evalAll(r, f, e.items)
	if err != nil {
		return nil, err
	}
	return List(v), nil
}

func (e *tupleExpr) eval(r *renderer, f *frame) (Value, error) {
	v, err := evalAll(r, f, e.items)
	if err != nil {
		return nil, err
	}
	return Tuple(v), nil
}

func (e *dictExpr) eval(r *renderer, f *frame) (Value, error) {
	d := NewDict(len(e.keys))
	for i := range e.keys {
		k, err := e.keys[i].eval(r, f)
		if err != nil {
			return nil, err
		}
		v, err := e.vals[i].eval(r, f)
		if err != nil {
			return nil, err
		}
		if err := d.Set(k, v); err != nil {
			return nil, err
		}
	}
	return d, nil
}

func (e *getattrExpr) eval(r *renderer, f *frame) (Value, error) {
	obj, err := e.obj.eval(r, f)
	if err != nil {
		return nil, err
	}
	if u, ok := obj.(*Undefined); ok {
		return nil, withLine(u.err(), e.line)
	}
	return r.getattr(obj, e.name), nil
}

// sliceVal is an evaluated slice subscript; nil parts are omitted.
type sliceVal struct{ start, stop, step Value }

func (e *sliceExpr) eval(r *renderer, f *frame) (Value, error) {
	s := &sliceVal{}
	for _, p := range []struct {
		x   expr
		dst *Value
	}{{e.start, &s.start}, {e.stop, &s.stop}, {e.step, &s.step}} {
		if p.x == nil {
			continue
		}
		v, err := p.x.eval(r, f)
		if err != nil {
			return nil, err
		}
		*p.dst = v
	}
	return s, nil
}

// splitIndex evaluates s.split(sep)[i] and s.rsplit(sep, n)[i] on a
// string without building the list (the Qwen3 and DeepSeek templates do
// this for every assistant turn). ok=false means "not this shape": nothing
// was evaluated and the caller takes the general path.
func (e *getitemExpr) splitIndex(r *renderer, f *frame) (Value, bool, error) {
	c, ok := e.obj.(*callExpr)
	if !ok || len(c.kwNames) > 0 || c.dynArgs != nil || c.dynKwargs != nil || len(c.args) < 1 || len(c.args) > 2 {
		return nil, false, nil
	}
	ga, ok := c.fn.(*getattrExpr)
	if !ok || (ga.name != "split" && ga.name != "rsplit") {
		return nil, false, nil
	}
	k, ok := e.key.(*constExpr)
	if !ok {
		return nil, false, nil
	}
	idx, ok := k.v.(int64)
	if !ok {
		return nil, false, nil
	}
	recv, err := ga.obj.eval(r, f)
	if err != nil {
		return nil, true, err
	}
	args, err := evalAll(r, f, c.args)
	if err != nil {
		return nil, true, err
	}
	if err := r.step(); err != nil {
		return nil, true, err
	}
	s, isStr := recv.(string)
	sep, sepOK := args[0].(string)
	maxsplit := int64(-1)
	if len(args) == 2 {
		m, ok := args[1].(int64)
		if !ok {
			sepOK = false
		}
		maxsplit = m
	}
	if !isStr || !sepOK || sep == "" {
		// Same semantics as the unfused expression, from the values
		// already evaluated.
		var list Value
		if u, ok := recv.(*Undefined); ok {
			return nil, true, u.err()
		}
		if list, err = r.call(r.getattr(recv, ga.name), args, kwargs{}); err != nil {
			return nil, true, err
		}
		v, err := r.getitem(list, idx)
		return v, true, err
	}
	if err := r.charge(len(s) >> 6); err != nil {
		return nil, true, err
	}
	var parts []string
	switch {
	case maxsplit < 0:
		parts = strings.Split(s, sep)
	default:
		v, err := pySplit(s, sep, maxsplit, ga.name == "rsplit")
		if err != nil {
			return nil, true, err
		}
		for _, p := range v.(List) {
			parts = append(parts, p.(string))
		}
	}
	if idx < 0 {
		idx += int64(len(parts))
	}
	if idx < 0 || idx >= int64(len(parts)) {
		return undefinedAttr(List(nil), k.v), true, nil
	}
	return parts[idx], true, nil
}

func (e *getitemExpr) eval(r *renderer, f *frame) (Value, error) {
	if v, ok, err := e.splitIndex(r, f); ok {
		return v, withLine(err, e.line)
	}
	obj, err := e.obj.eval(r, f)
	if err != nil {
		return nil, err
	}
	key, err := e.key.eval(r, f)
	if err != nil {
		return nil, err
	}
	if u, ok := obj.(*Undefined); ok {
		return nil, withLine(u.err(), e.line)
	}
	if s, ok := key.(*sliceVal); ok {
		// Jinja2 compiles a slice to a plain Python subscript, not to
		// environment.getitem, so its errors are not swallowed (unless the
		// optimizer folded it).
		v, err := r.slice(obj, s)
		if err != nil && r.constMode > 0 {
			if x, ok := err.(*Error); ok && x.Kind == "TypeError" {
				return undefinedAttr(obj, s), nil
			}
		}
		return v, withLine(err, e.line)
	}
	v, err := r.getitem(obj, key)
	return v, withLine(err, e.line)
}

func (e *callExpr) eval(r *renderer, f *frame) (Value, error) {
	v, err := r.evalCall(e, f, nil)
	return v, withLine(err, e.line)
}

// evalArgs evaluates positional and keyword arguments, expanding *args and
// **kwargs.
func (r *renderer) evalArgs(f *frame, c callArgs) ([]Value, kwargs, error) {
	var kw kwargs
	args, err := evalAll(r, f, c.args)
	if err != nil {
		return nil, kw, err
	}
	for i, n := range c.kwNames {
		v, err := c.kwVals[i].eval(r, f)
		if err != nil {
			return nil, kw, err
		}
		kw.names = append(kw.names, n)
		kw.vals = append(kw.vals, v)
	}
	if c.dynArgs != nil {
		v, err := c.dynArgs.eval(r, f)
		if err != nil {
			return nil, kw, err
		}
		items, err := r.iterate(v)
		if err != nil {
			return nil, kw, err
		}
		args = append(args, items...)
	}
	if c.dynKwargs != nil {
		v, err := c.dynKwargs.eval(r, f)
		if err != nil {
			return nil, kw, err
		}
		d, ok := v.(*Dict)
		if !ok {
			return nil, kw, typeErrorf("argument after ** must be a mapping, not %s", typeName(v))
		}
		for _, e := range d.ents {
			k, ok := e.key.(string)
			if !ok {
				return nil, kw, typeErrorf("keywords must be strings")
			}
			kw.names = append(kw.names, k)
			kw.vals = append(kw.vals, e.val)
		}
	}
	return args, kw, nil
}

// evalCall evaluates a call; caller is the caller macro of a call block.
func (r *renderer) evalCall(e *callExpr, f *frame, caller *macro) (Value, error) {
	if err := r.step(); err != nil {
		return nil, err
	}
	var callee Value
	if ga, ok := e.fn.(*getattrExpr); ok {
		obj, err := ga.obj.eval(r, f)
		if err != nil {
			return nil, err
		}
		if u, ok := obj.(*Undefined); ok {
			return nil, u.err()
		}
		if isMethod(obj, ga.name) {
			args, kw, err := r.evalArgs(f, callArgs{args: e.args, kwNames: e.kwNames, kwVals: e.kwVals, dynArgs: e.dynArgs, dynKwargs: e.dynKwargs})
			if err != nil {
				return nil, err
			}
			if caller != nil {
				kw.names = append(kw.names, "caller")
				kw.vals = append(kw.vals, caller)
			}
			return r.callMethod(obj, ga.name, args, kw)
		}
		callee = r.getattr(obj, ga.name)
	} else {
		var err error
		if callee, err = e.fn.eval(r, f); err != nil {
			return nil, err
		}
	}
	args, kw, err := r.evalArgs(f, callArgs{args: e.args, kwNames: e.kwNames, kwVals: e.kwVals, dynArgs: e.dynArgs, dynKwargs: e.dynKwargs})
	if err != nil {
		return nil, err
	}
	if caller != nil {
		kw.names = append(kw.names, "caller")
		kw.vals = append(kw.vals, caller)
	}
	return r.call(callee, args, kw)
}

func (e *filterExpr) eval(r *renderer, f *frame) (Value, error) {
	var v Value
	if e.node != nil {
		var err error
		if v, err = e.node.eval(r, f); err != nil {
			return nil, err
		}
	}
	out, err := r.callFilter(e, v, f)
	return out, withLine(err, e.line)
}

func (r *renderer) callFilter(e *filterExpr, v Value, f *frame) (Value, error) {
	if err := r.step(); err != nil {
		return nil, err
	}
	if e.fn == nil {
		return nil, runtimeErrorf("No filter named '%s' found.", e.name)
	}
	args, kw, err := r.evalArgs(f, e.call)
	if err != nil {
		return nil, err
	}
	return e.fn.call(r, v, args, kw)
}

func (e *testExpr) eval(r *renderer, f *frame) (Value, error) {
	if ga, ok := e.node.(*getattrExpr); ok && (e.name == "defined" || e.name == "undefined") && len(e.call.args) == 0 {
		// x.attr is defined: look the attribute up without building the
		// Undefined that a miss would give.
		obj, err := ga.obj.eval(r, f)
		if err != nil {
			return nil, err
		}
		if u, ok := obj.(*Undefined); ok {
			return nil, withLine(u.err(), e.line)
		}
		found := false
		if v, isAttr := pyAttr(obj, ga.name); isAttr {
			_, u := v.(*Undefined)
			found = !u
		} else if d, ok := obj.(*Dict); ok {
			_, found = d.GetString(ga.name)
		}
		return found == (e.name == "defined"), nil
	}
	v, err := e.node.eval(r, f)
	if err != nil {
		return nil, err
	}
	if e.fn == nil {
		return nil, withLine(runtimeErrorf("No test named '%s' found.", e.name), e.line)
	}
	args, kw, err := r.evalArgs(f, e.call)
	if err != nil {
		return nil, err
	}
	if kw.len() > 0 {
		return nil, withLine(typeErrorf("test %s takes no keyword arguments", e.name), e.line)
	}
	if len(args) < e.fn.minArgs || len(args) > e.fn.maxArgs {
		return nil, withLine(typeErrorf("test %s: wrong number of arguments (%d given)", e.name, len(args)), e.line)
	}
	ok, err := e.fn.fn(r, v, args)
	return ok, withLine(err, e.line)
}

func (e *binExpr) eval(r *renderer, f *frame) (Value, error) {
	a, err := e.l.eval(r, f)
	if err != nil {
		return nil, err
	}
	b, err := e.r.eval(r, f)
	if err != nil {
		return nil, err
	}
	v, err := r.binop(e.op, a, b)
	return v, withLine(err, e.line)
}

// parts evaluates the operands into buf; n is their total length when all
// are plain strings, else -1.
func (e *addChain) parts(r *renderer, f *frame, buf []Value) ([]Value, int, error) {
	vals := buf[:0]
	n := 0
	for _, x := range e.items {
		v, err := x.eval(r, f)
		if err != nil {
			return nil, 0, err
		}
		vals = append(vals, v)
		if s, ok := v.(string); ok && n >= 0 {
			n += len(s)
		} else {
			n = -1
		}
	}
	return vals, n, nil
}

func (e *addChain) eval(r *renderer, f *frame) (Value, error) {
	var buf [8]Value
	vals, n, err := e.parts(r, f, buf[:])
	if err != nil {
		return nil, err
	}
	if n >= 0 {
		if err := r.checkLen(n); err != nil {
			return nil, withLine(err, e.line)
		}
		if err := r.charge(n >> 6); err != nil {
			return nil, err
		}
		var b strings.Builder
		b.Grow(n)
		for _, v := range vals {
			b.WriteString(v.(string))
		}
		return b.String(), nil
	}
	return e.fold(r, vals)
}

// fold adds operands left to right with Python's + (mixed types).
func (e *addChain) fold(r *renderer, vals []Value) (Value, error) {
	acc := vals[0]
	for _, v := range vals[1:] {
		var err error
		if acc, err = r.binop("+", acc, v); err != nil {
			return nil, withLine(err, e.line)
		}
	}
	return acc, nil
}

func (e *concatExpr) eval(r *renderer, f *frame) (Value, error) {
	var b strings.Builder
	for _, x := range e.items {
		v, err := x.eval(r, f)
		if err != nil {
			return nil, err
		}
		s, err := r.str(v)
		if err != nil {
			return nil, err
		}
		b.WriteString(s)
		if err := r.checkLen(b.Len()); err != nil {
			return nil, err
		}
	}
	return b.String(), nil
}

func (e *compareExpr) eval(r *renderer, f *frame) (Value, error) {
	a, err := e.first.eval(r, f)
	if err != nil {
		return nil, err
	}
	for i, op := range e.ops {
		b, err := e.rest[i].eval(r, f)
		if err != nil {
			return nil, err
		}
		if err := r.charge(sizeOf(a) + sizeOf(b)); err != nil {
			return nil, err
		}
		ok, err := compareOp(op, a, b)
		if err != nil {
			return nil, withLine(err, e.line)
		}
		if !ok {
			return false, nil
		}
		a = b
	}
	return true, nil
}

// sizeOf is the work an equality or membership test may do on v.
func sizeOf(v Value) int {
	switch x := v.(type) {
	case List:
		return len(x)
	case Tuple:
		return len(x)
	case *Dict:
		return x.Len()
	case string:
		return len(x) >> 6
	case *rangeVal:
		return int(x.length())
	}
	return 0
}

func (e *andExpr) eval(r *renderer, f *frame) (Value, error) {
	a, err := e.l.eval(r, f)
	if err != nil || !truth(a) {
		return a, err
	}
	if r.constMode > 0 && !e.rConst {
		return nil, errImpossible
	}
	return e.r.eval(r, f)
}

func (e *orExpr) eval(r *renderer, f *frame) (Value, error) {
	a, err := e.l.eval(r, f)
	if err != nil || truth(a) {
		return a, err
	}
	if r.constMode > 0 && !e.rConst {
		return nil, errImpossible
	}
	return e.r.eval(r, f)
}

func (e *notExpr) eval(r *renderer, f *frame) (Value, error) {
	a, err := e.x.eval(r, f)
	if err != nil {
		return nil, err
	}
	return !truth(a), nil
}

func (e *negExpr) eval(r *renderer, f *frame) (Value, error) {
	a, err := e.x.eval(r, f)
	if err != nil {
		return nil, err
	}
	v, err := negate(a)
	return v, withLine(err, e.line)
}

func (e *posExpr) eval(r *renderer, f *frame) (Value, error) {
	a, err := e.x.eval(r, f)
	if err != nil {
		return nil, err
	}
	switch x := a.(type) {
	case bool:
		return int64(btoi(x)), nil
	case *Undefined:
		return nil, withLine(x.err(), e.line)
	}
	if isNumber(a) {
		return a, nil
	}
	return nil, withLine(typeErrorf("bad operand type for unary +: '%s'", typeName(a)), e.line)
}

func (e *condExpr) eval(r *renderer, f *frame) (Value, error) {
	t, err := e.test.eval(r, f)
	if err != nil {
		return nil, err
	}
	if truth(t) {
		if r.constMode > 0 && !e.thenConst {
			return nil, errImpossible
		}
		return e.then.eval(r, f)
	}
	if r.constMode > 0 && !e.elsConst {
		return nil, errImpossible // including a missing else
	}
	if e.els == nil {
		return undefinedHint(fmt.Sprintf("the inline if-expression on line %d evaluated to false and no else section was defined.", e.line)), nil
	}
	return e.els.eval(r, f)
}

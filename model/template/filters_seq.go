package template

import (
	"sort"
	"strconv"
	"strings"
)

// Sequence filters. Those that are generators in Jinja2 (map, select,
// reject, unique, batch, slice, items, reverse) return a *generator, so
// they are true even when empty and can be consumed once, as in Python.

// attrGetter is jinja2's make_attrgetter: a dotted path of items (integer
// parts looked up as integers), with an optional default for Undefined and
// the ignore_case postprocess.
func (r *renderer) attrGetter(attribute Value, ignoreCase bool, dflt Value) func(Value) (Value, error) {
	parts := attrParts(attribute)
	return func(item Value) (Value, error) {
		for _, p := range parts {
			if u, ok := item.(*Undefined); ok {
				return nil, u.err()
			}
			var err error
			if item, err = r.getitem(item, p); err != nil {
				return nil, err
			}
			if _, ok := item.(*Undefined); ok && dflt != nil {
				item = dflt
			}
		}
		if ignoreCase {
			item = ignoreCaseKey(item)
		}
		return item, nil
	}
}

func attrParts(attribute Value) []Value {
	switch a := attribute.(type) {
	case nil:
		return nil
	case string:
		var parts []Value
		for _, p := range strings.Split(a, ".") {
			if isAllDigits(p) {
				n, _ := strconv.ParseInt(p, 10, 64)
				parts = append(parts, n)
			} else {
				parts = append(parts, p)
			}
		}
		return parts
	}
	return []Value{attribute}
}

func ignoreCaseKey(v Value) Value {
	if s, ok := v.(string); ok {
		return pyLower(s)
	}
	return v
}

// multiAttrGetter is make_multi_attrgetter: "a,b.c" gives a list key.
func (r *renderer) multiAttrGetter(attribute Value, ignoreCase bool) func(Value) (Value, error) {
	var getters []func(Value) (Value, error)
	if s, ok := attribute.(string); ok {
		for _, p := range strings.Split(s, ",") {
			getters = append(getters, r.attrGetter(p, ignoreCase, nil))
		}
	} else {
		getters = append(getters, r.attrGetter(attribute, ignoreCase, nil))
	}
	return func(item Value) (Value, error) {
		key := make(List, len(getters))
		for i, g := range getters {
			v, err := g(item)
			if err != nil {
				return nil, err
			}
			key[i] = v
		}
		return key, nil
	}
}

// sortBy sorts items stably by key, as Python's sorted(key=..., reverse=...).
func sortBy(items []Value, key func(Value) (Value, error), reverse bool) ([]Value, error) {
	keys := make([]Value, len(items))
	for i, it := range items {
		k, err := key(it)
		if err != nil {
			return nil, err
		}
		keys[i] = k
	}
	idx := make([]int, len(items))
	for i := range idx {
		idx[i] = i
	}
	var serr error
	sort.SliceStable(idx, func(a, b int) bool {
		x, y := keys[idx[a]], keys[idx[b]]
		if reverse {
			x, y = y, x
		}
		lt, err := pyLess(x, y)
		if err != nil && serr == nil {
			serr = err
		}
		return lt
	})
	if serr != nil {
		return nil, serr
	}
	out := make([]Value, len(items))
	for i, j := range idx {
		out[i] = items[j]
	}
	return out, nil
}

func fSort(r *renderer, v Value, a []Value) (Value, error) {
	items, err := r.iterate(v)
	if err != nil {
		return nil, err
	}
	out, err := sortBy(items, r.multiAttrGetter(a[2], !truth(a[1])), truth(a[0]))
	return List(out), err
}

func fDictsort(r *renderer, v Value, a []Value) (Value, error) {
	d, ok := v.(*Dict)
	if u, isU := v.(*Undefined); isU {
		return nil, u.err()
	}
	if !ok {
		return nil, errf("AttributeError", "'%s' object has no attribute 'items'", typeName(v))
	}
	pos := 0
	switch a[1] {
	case "key":
	case "value":
		pos = 1
	default:
		return nil, errf("FilterArgumentError", "You can only sort by either \"key\" or \"value\"")
	}
	ci := !truth(a[0])
	items := (&dictView{d: d, kind: "items"}).items()
	out, err := sortBy(items, func(it Value) (Value, error) {
		k := it.(Tuple)[pos]
		if ci {
			k = ignoreCaseKey(k)
		}
		return k, nil
	}, truth(a[2]))
	return List(out), err
}

func fUnique(r *renderer, v Value, a []Value) (Value, error) {
	items, err := func() ([]Value, error) {
		items, err := r.iterate(v)
		if err != nil {
			return nil, err
		}
		get := r.attrGetter(a[1], !truth(a[0]), nil)
		seen := map[any]bool{}
		var out []Value
		for _, it := range items {
			k, err := get(it)
			if err != nil {
				return out, err
			}
			h, err := hashKey(k)
			if err != nil {
				return out, err
			}
			if !seen[h] {
				seen[h] = true
				out = append(out, it)
			}
		}
		return out, nil
	}()
	return lazy("sync_do_unique", items, err)
}

func minMax(r *renderer, v Value, a []Value, wantMax bool) (Value, error) {
	items, err := r.iterate(v)
	if err != nil {
		return nil, err
	}
	if len(items) == 0 {
		return undefinedHint("No aggregated item, sequence was empty."), nil
	}
	get := r.attrGetter(a[1], !truth(a[0]), nil)
	best := items[0]
	bestKey, err := get(best)
	if err != nil {
		return nil, err
	}
	for _, it := range items[1:] {
		k, err := get(it)
		if err != nil {
			return nil, err
		}
		var better bool
		if wantMax {
			better, err = pyLess(bestKey, k)
		} else {
			better, err = pyLess(k, bestKey)
		}
		if err != nil {
			return nil, err
		}
		if better {
			best, bestKey = it, k
		}
	}
	return best, nil
}

func fMax(r *renderer, v Value, a []Value) (Value, error) { return minMax(r, v, a, true) }
func fMin(r *renderer, v Value, a []Value) (Value, error) { return minMax(r, v, a, false) }

func fGroupby(r *renderer, v Value, a []Value) (Value, error) {
	items, err := r.iterate(v)
	if err != nil {
		return nil, err
	}
	ci := !truth(a[2])
	key := r.attrGetter(a[0], ci, a[1])
	sorted, err := sortBy(items, key, false)
	if err != nil {
		return nil, err
	}
	out := List{}
	var cur *groupTuple
	var curKey Value
	for _, it := range sorted {
		k, err := key(it)
		if err != nil {
			return nil, err
		}
		if cur == nil || !pyEqual(k, curKey) {
			cur = &groupTuple{grouper: k}
			curKey = k
			out = append(out, cur)
		}
		cur.list = append(cur.list, it)
	}
	if ci {
		outKey := r.attrGetter(a[0], false, a[1])
		for _, g := range out {
			gt := g.(*groupTuple)
			if gt.grouper, err = outKey(gt.list[0]); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

func fSum(r *renderer, v Value, a []Value) (Value, error) {
	items, err := r.iterate(v)
	if err != nil {
		return nil, err
	}
	if _, ok := a[1].(string); ok {
		return nil, typeErrorf("sum() can't sum strings [use ''.join(seq) instead]")
	}
	get := r.attrGetter(a[0], false, nil)
	acc := a[1]
	for _, it := range items {
		x, err := get(it)
		if err != nil {
			return nil, err
		}
		if acc, err = r.binop("+", acc, x); err != nil {
			return nil, err
		}
	}
	return acc, nil
}

func fFirst(r *renderer, v Value, _ []Value) (Value, error) {
	if g, ok := v.(*generator); ok {
		if g.pos < len(g.items) {
			g.pos++
			return g.items[g.pos-1], nil
		}
		if g.err != nil {
			return nil, g.err
		}
		return undefinedHint("No first item, sequence was empty."), nil
	}
	items, err := r.iterate(v)
	if err != nil {
		return nil, err
	}
	if len(items) == 0 {
		return undefinedHint("No first item, sequence was empty."), nil
	}
	return items[0], nil
}

func fLast(r *renderer, v Value, _ []Value) (Value, error) {
	switch v.(type) {
	case *generator:
		return nil, typeErrorf("'generator' object is not reversible")
	case List, Tuple, *Dict, string, Markup, *Undefined, *rangeVal, *dictView:
	default:
		return nil, typeErrorf("'%s' object is not reversible", typeName(v))
	}
	items, err := r.iterate(v)
	if err != nil {
		return nil, err
	}
	if len(items) == 0 {
		return undefinedHint("No last item, sequence was empty."), nil
	}
	return items[len(items)-1], nil
}

func fLength(_ *renderer, v Value, _ []Value) (Value, error) {
	n, err := pyLen(v)
	return int64(n), err
}

func fList(r *renderer, v Value, _ []Value) (Value, error) {
	items, err := r.iterate(v)
	if err != nil {
		return nil, err
	}
	return append(List{}, items...), nil
}

func fItems(_ *renderer, v Value, _ []Value) (Value, error) {
	switch x := v.(type) {
	case *Undefined:
		return newGenerator("do_items", nil), nil
	case *Dict:
		return newGenerator("do_items", (&dictView{d: x, kind: "items"}).items()), nil
	}
	return lazy("do_items", nil, typeErrorf("Can only get item pairs from a mapping."))
}

func fJoin(r *renderer, v Value, a []Value) (Value, error) {
	items, err := r.iterate(v)
	if err != nil {
		return nil, err
	}
	if a[1] != nil {
		get := r.attrGetter(a[1], false, nil)
		for i, it := range items {
			if items[i], err = get(it); err != nil {
				return nil, err
			}
		}
	}
	sep := pyStr(a[0])
	var b strings.Builder
	for i, it := range items {
		if i > 0 {
			b.WriteString(sep)
		}
		b.WriteString(pyStr(it))
		if err := r.checkLen(b.Len()); err != nil {
			return nil, err
		}
	}
	return b.String(), nil
}

func fReverse(r *renderer, v Value, _ []Value) (Value, error) {
	switch x := v.(type) {
	case string:
		out, _ := sliceString(x, &sliceVal{step: int64(-1)})
		return out, nil
	case Markup:
		out, _ := sliceString(string(x), &sliceVal{step: int64(-1)})
		return Markup(out.(string)), nil
	case *generator:
		items, err := x.consume()
		if err != nil {
			if e, ok := err.(*Error); ok && e.Kind == "TypeError" {
				return nil, errf("FilterArgumentError", "argument must be iterable")
			}
			return nil, err
		}
		out := make(List, len(items))
		for i, it := range items {
			out[len(items)-1-i] = it
		}
		return out, nil
	}
	items, err := r.iterate(v)
	if err != nil {
		return nil, errf("FilterArgumentError", "argument must be iterable")
	}
	out := make([]Value, len(items))
	for i, it := range items {
		out[len(items)-1-i] = it
	}
	typ := map[string]string{"list": "list_reverseiterator", "dict": "dict_reversekeyiterator", "range": "range_iterator"}[typeName(v)]
	if typ == "" {
		typ = "reversed"
	}
	return &generator{typ: typ, items: out}, nil
}

func fBatch(r *renderer, v Value, a []Value) (Value, error) {
	n, err := intArg(a[0], "linecount")
	if err != nil {
		return lazy("do_batch", nil, err)
	}
	items, err := r.iterate(v)
	if err != nil {
		return lazy("do_batch", nil, err)
	}
	if n <= 0 && len(items) > 0 {
		// Python appends to tmp forever-growing when linecount <= 0 only
		// yields one batch with everything.
		return newGenerator("do_batch", []Value{append(List{}, items...)}), nil
	}
	var out []Value
	for i := 0; i < len(items); i += int(n) {
		end := min(i+int(n), len(items))
		batch := append(List{}, items[i:end]...)
		if end-i < int(n) && a[1] != nil {
			for len(batch) < int(n) {
				batch = append(batch, a[1])
			}
		}
		out = append(out, batch)
	}
	return newGenerator("do_batch", out), nil
}

func fSlice(r *renderer, v Value, a []Value) (Value, error) {
	items, err := r.iterate(v)
	if err != nil {
		return lazy("sync_do_slice", nil, err)
	}
	n, err := intArg(a[0], "slices")
	if err != nil {
		return lazy("sync_do_slice", nil, err)
	}
	if n <= 0 {
		if n == 0 {
			return lazy("sync_do_slice", nil, errf("ZeroDivisionError", "integer division or modulo by zero"))
		}
		return newGenerator("sync_do_slice", nil), nil
	}
	if n > int64(len(items))+maxRange {
		return nil, errf("LimitError", "too many slices")
	}
	per, extra := len(items)/int(n), len(items)%int(n)
	offset := 0
	var out []Value
	for k := 0; k < int(n); k++ {
		start := offset + k*per
		if k < extra {
			offset++
		}
		end := offset + (k+1)*per
		s := append(List{}, items[start:end]...)
		if a[1] != nil && k >= extra {
			s = append(s, a[1])
		}
		out = append(out, s)
	}
	return newGenerator("sync_do_slice", out), nil
}

// fMap is jinja2's map: map('filter', args...) or map(attribute=...,
// default=...).
func fMap(r *renderer, v Value, args []Value, kw kwargs) (Value, error) {
	items, err := r.mapItems(v, args, kw)
	return lazy("sync_do_map", items, err)
}

func (r *renderer) mapItems(v Value, args []Value, kw kwargs) ([]Value, error) {
	if !truth(v) {
		return nil, nil
	}
	items, err := r.iterate(v)
	if err != nil {
		return nil, err
	}
	var fn func(Value) (Value, error)
	if len(args) == 0 && kwIndex(kw, "attribute") >= 0 {
		var dflt Value
		for i, n := range kw.names {
			switch n {
			case "attribute", "default":
				if n == "default" {
					dflt = kw.vals[i]
				}
			default:
				return nil, errf("FilterArgumentError", "Unexpected keyword argument '%s'", n)
			}
		}
		fn = r.attrGetter(kw.vals[kwIndex(kw, "attribute")], false, dflt)
	} else {
		if len(args) == 0 {
			return nil, errf("FilterArgumentError", "map requires a filter argument")
		}
		name, ok := args[0].(string)
		fd := filters[name]
		if !ok || fd == nil {
			return nil, runtimeErrorf("No filter named %s.", pyRepr(args[0]))
		}
		rest := args[1:]
		fn = func(it Value) (Value, error) {
			if err := r.step(); err != nil {
				return nil, err
			}
			return fd.call(r, it, rest, kw)
		}
	}
	out := make([]Value, 0, len(items))
	for _, it := range items {
		x, err := fn(it)
		if err != nil {
			return out, err
		}
		out = append(out, x)
	}
	return out, nil
}

func kwIndex(kw kwargs, name string) int {
	for i, n := range kw.names {
		if n == name {
			return i
		}
	}
	return -1
}

// selectFilter builds select, reject, selectattr and rejectattr.
func selectFilter(keep, lookupAttr bool) func(*renderer, Value, []Value, kwargs) (Value, error) {
	return func(r *renderer, v Value, args []Value, kw kwargs) (Value, error) {
		items, err := r.selectItems(v, args, kw, keep, lookupAttr)
		return lazy("select_or_reject", items, err)
	}
}

func (r *renderer) selectItems(v Value, args []Value, kw kwargs, keep, lookupAttr bool) ([]Value, error) {
	if !truth(v) {
		return nil, nil
	}
	items, err := r.iterate(v)
	if err != nil {
		return nil, err
	}
	trans := func(x Value) (Value, error) { return x, nil }
	off := 0
	if lookupAttr {
		if len(args) == 0 {
			return nil, errf("FilterArgumentError", "Missing parameter for attribute name")
		}
		trans = r.attrGetter(args[0], false, nil)
		off = 1
	}
	test := func(x Value) (bool, error) { return truth(x), nil }
	if len(args) > off {
		name, ok := args[off].(string)
		td := tests[name]
		if !ok || td == nil {
			return nil, runtimeErrorf("No test named %s.", pyRepr(args[off]))
		}
		rest := args[off+1:]
		if kw.len() > 0 {
			return nil, typeErrorf("test %s takes no keyword arguments", name)
		}
		if len(rest) < td.minArgs || len(rest) > td.maxArgs {
			return nil, typeErrorf("test %s: wrong number of arguments", name)
		}
		test = func(x Value) (bool, error) { return td.fn(r, x, rest) }
	}
	var out []Value
	for _, it := range items {
		if err := r.step(); err != nil {
			return nil, err
		}
		x, err := trans(it)
		if err != nil {
			return out, err
		}
		ok, err := test(x)
		if err != nil {
			return out, err
		}
		if ok == keep {
			out = append(out, it)
		}
	}
	return out, nil
}

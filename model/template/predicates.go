package template

import "math/big"

// testDef is one "is" test (jinja2/tests.py).
type testDef struct {
	fn               func(r *renderer, v Value, args []Value) (bool, error)
	minArgs, maxArgs int
}

// tests is the test table, filled once in init (the filter and test tests
// look names up in both tables) and never changed afterwards.
var tests map[string]*testDef

func t0(fn func(v Value) bool) *testDef {
	return &testDef{fn: func(_ *renderer, v Value, _ []Value) (bool, error) { return fn(v), nil }}
}

func cmpTest(op string) *testDef {
	return &testDef{minArgs: 1, maxArgs: 1, fn: func(_ *renderer, v Value, a []Value) (bool, error) {
		return compareOp(op, v, a[0])
	}}
}

func modTest(want int64) func(r *renderer, v Value, a []Value) (bool, error) {
	return func(r *renderer, v Value, a []Value) (bool, error) {
		div := Value(int64(2))
		if len(a) > 0 {
			div = a[0]
		}
		m, err := r.binop("%", v, div)
		if err != nil {
			return false, err
		}
		return pyEqual(m, want), nil
	}
}

func init() {
	tests = map[string]*testDef{
		"odd":         {fn: modTest(1)},
		"even":        {fn: modTest(0)},
		"divisibleby": {fn: modTest(0), minArgs: 1, maxArgs: 1},
		"defined":     t0(func(v Value) bool { _, u := v.(*Undefined); return !u }),
		"undefined":   t0(func(v Value) bool { _, u := v.(*Undefined); return u }),
		"filter": t0(func(v Value) bool {
			s, ok := v.(string)
			return ok && filters[s] != nil
		}),
		"test": t0(func(v Value) bool {
			s, ok := v.(string)
			return ok && tests[s] != nil
		}),
		"none":    t0(func(v Value) bool { return v == nil }),
		"boolean": t0(func(v Value) bool { _, ok := v.(bool); return ok }),
		"false":   t0(func(v Value) bool { b, ok := v.(bool); return ok && !b }),
		"true":    t0(func(v Value) bool { b, ok := v.(bool); return ok && b }),
		"integer": t0(func(v Value) bool {
			switch v.(type) {
			case int64, *big.Int:
				return true
			}
			return false
		}),
		"float": t0(func(v Value) bool { _, ok := v.(float64); return ok }),
		"lower": t0(func(v Value) bool { return strPredicate(pyStr(v), "islower") }),
		"upper": t0(func(v Value) bool { return strPredicate(pyStr(v), "isupper") }),
		"string": t0(func(v Value) bool {
			_, ok := strArg(v)
			return ok
		}),
		"mapping": t0(func(v Value) bool { _, ok := v.(*Dict); return ok }),
		"number":  t0(isNumber),
		"sequence": t0(func(v Value) bool {
			switch v.(type) {
			case List, Tuple, *Dict, string, Markup, *Undefined, *rangeVal, *groupTuple:
				return true
			}
			return false
		}),
		"iterable": t0(func(v Value) bool {
			switch v.(type) {
			case List, Tuple, *Dict, string, Markup, *Undefined, *rangeVal, *dictView, *generator, *groupTuple, *loopCtx:
				return true
			}
			return false
		}),
		"callable": t0(func(v Value) bool {
			switch v.(type) {
			case Func, *builtinFunc, *boundMethod, *macro, *Undefined, *loopCtx, *joiner:
				return true
			}
			return false
		}),
		"sameas":  {fn: func(_ *renderer, v Value, a []Value) (bool, error) { return sameAs(v, a[0]), nil }, minArgs: 1, maxArgs: 1},
		"escaped": t0(func(v Value) bool { _, ok := v.(Markup); return ok }),
		"in": {minArgs: 1, maxArgs: 1, fn: func(_ *renderer, v Value, a []Value) (bool, error) {
			return contains(a[0], v)
		}},
		"==": cmpTest("eq"), "eq": cmpTest("eq"), "equalto": cmpTest("eq"),
		"!=": cmpTest("ne"), "ne": cmpTest("ne"),
		">": cmpTest("gt"), "gt": cmpTest("gt"), "greaterthan": cmpTest("gt"),
		">=": cmpTest("gteq"), "ge": cmpTest("gteq"),
		"<": cmpTest("lt"), "lt": cmpTest("lt"), "lessthan": cmpTest("lt"),
		"<=": cmpTest("lteq"), "le": cmpTest("lteq"),
	}
}

// sameAs approximates Python's "is": singletons, CPython's small-int cache,
// and identity of containers.
func sameAs(a, b Value) bool {
	switch x := a.(type) {
	case nil:
		return b == nil
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case int64:
		y, ok := b.(int64)
		return ok && x == y && x >= -5 && x <= 256
	case string:
		y, ok := b.(string)
		return ok && x == y
	case List:
		y, ok := b.(List)
		return ok && len(x) == len(y) && len(x) > 0 && &x[0] == &y[0]
	case Tuple:
		y, ok := b.(Tuple)
		return ok && len(x) == len(y) && len(x) > 0 && &x[0] == &y[0]
	case float64, Markup, *big.Int, Func:
		return false
	}
	return a == b
}

package template

import (
	"math"
	"math/big"
	"strings"
)

// maxBigBits bounds integers built by arithmetic. CPython would compute
// 10**10**8, slowly; a router must not.
const maxBigBits = 1 << 16

func isNumber(v Value) bool {
	switch v.(type) {
	case bool, int64, *big.Int, float64:
		return true
	}
	return false
}

// numeric classifies a Python number: kind 1 = int (bool included, as in
// Python), 2 = big int, 3 = float, 0 = not a number.
func numeric(v Value) (kind int, i int64, b *big.Int, f float64) {
	switch x := v.(type) {
	case bool:
		return 1, int64(btoi(x)), nil, 0
	case int64:
		return 1, x, nil, 0
	case *big.Int:
		return 2, 0, x, 0
	case float64:
		return 3, 0, nil, x
	}
	return 0, 0, nil, 0
}

func toBig(v Value) *big.Int {
	k, i, b, _ := numeric(v)
	if k == 2 {
		return b
	}
	return big.NewInt(i)
}

func toFloat(v Value) (float64, error) {
	k, i, b, f := numeric(v)
	switch k {
	case 1:
		return float64(i), nil
	case 2:
		fl, _ := new(big.Float).SetInt(b).Float64()
		if math.IsInf(fl, 0) {
			return 0, errf("OverflowError", "int too large to convert to float")
		}
		return fl, nil
	case 3:
		return f, nil
	}
	return 0, typeErrorf("must be real number, not %s", typeName(v))
}

func checkBig(b *big.Int) (Value, error) {
	if b.BitLen() > maxBigBits {
		return nil, errf("LimitError", "integer result too large")
	}
	return normBig(b), nil
}

func undefinedOperand(a, b Value) error {
	if u, ok := a.(*Undefined); ok {
		return u.err()
	}
	if u, ok := b.(*Undefined); ok {
		return u.err()
	}
	return nil
}

func unsupported(op string, a, b Value) error {
	return typeErrorf("unsupported operand type(s) for %s: '%s' and '%s'", op, typeName(a), typeName(b))
}

// binop applies a Python arithmetic operator.
func (r *renderer) binop(op string, a, b Value) (Value, error) {
	if op == "%" {
		// str % x formats even an Undefined (str.__mod__ runs first).
		switch x := a.(type) {
		case string:
			return r.printf(x, b, false)
		case Markup:
			s, err := r.printf(string(x), b, true)
			return Markup(s), err
		}
	}
	if err := undefinedOperand(a, b); err != nil {
		return nil, err
	}
	ka, ia, _, fa := numeric(a)
	kb, ib, _, fb := numeric(b)
	if ka != 0 && kb != 0 {
		if ka == 3 || kb == 3 {
			x, err := toFloat(a)
			if err != nil {
				return nil, err
			}
			y, err := toFloat(b)
			if err != nil {
				return nil, err
			}
			_, _ = fa, fb
			return floatOp(op, x, y)
		}
		if ka == 1 && kb == 1 {
			if v, ok := smallIntOp(op, ia, ib); ok {
				return v, nil
			}
		}
		return bigOp(op, toBig(a), toBig(b))
	}
	switch op {
	case "+":
		return r.add(a, b)
	case "*":
		return r.mul(a, b)
	case "%":
		switch x := a.(type) {
		case string:
			s, err := r.printf(x, b, false)
			return s, err
		case Markup:
			s, err := r.printf(string(x), b, true)
			return Markup(s), err
		}
	}
	sym := map[string]string{"-": "-", "/": "/", "//": "//", "%": "%", "**": "** or pow()"}[op]
	return nil, unsupported(sym, a, b)
}

func smallIntOp(op string, a, b int64) (Value, bool) {
	switch op {
	case "+":
		c := a + b
		if (c > a) == (b > 0) {
			return c, true
		}
	case "-":
		c := a - b
		if (c < a) == (b > 0) {
			return c, true
		}
	case "*":
		if a == 0 || b == 0 {
			return int64(0), true
		}
		c := a * b
		if c/b == a && !(a == -1 && b == math.MinInt64) && !(b == -1 && a == math.MinInt64) {
			return c, true
		}
	}
	return nil, false
}

func bigOp(op string, a, b *big.Int) (Value, error) {
	z := new(big.Int)
	switch op {
	case "+":
		return checkBig(z.Add(a, b))
	case "-":
		return checkBig(z.Sub(a, b))
	case "*":
		if a.BitLen()+b.BitLen() > maxBigBits+1 {
			return nil, errf("LimitError", "integer result too large")
		}
		return checkBig(z.Mul(a, b))
	case "/":
		if b.Sign() == 0 {
			return nil, errf("ZeroDivisionError", "division by zero")
		}
		q, _ := new(big.Rat).SetFrac(a, b).Float64()
		return q, nil
	case "//", "%":
		if b.Sign() == 0 {
			if op == "%" {
				return nil, errf("ZeroDivisionError", "integer modulo by zero")
			}
			return nil, errf("ZeroDivisionError", "integer division or modulo by zero")
		}
		q, m := new(big.Int), new(big.Int)
		q.DivMod(a, b, m) // Euclidean: m >= 0
		if m.Sign() != 0 && b.Sign() < 0 {
			m.Add(m, b)
			q.Add(q, big.NewInt(1))
		}
		if op == "//" {
			return normBig(q), nil
		}
		return normBig(m), nil
	case "**":
		if b.Sign() < 0 {
			x, _ := new(big.Float).SetInt(a).Float64()
			y, _ := new(big.Float).SetInt(b).Float64()
			return floatOp("**", x, y)
		}
		if a.BitLen() > 1 && (!b.IsInt64() || int64(a.BitLen()-1)*b.Int64() > maxBigBits) {
			return nil, errf("LimitError", "integer result too large")
		}
		return checkBig(z.Exp(a, b, nil))
	}
	return nil, typeErrorf("bad operator %s", op)
}

func floatOp(op string, x, y float64) (Value, error) {
	switch op {
	case "+":
		return x + y, nil
	case "-":
		return x - y, nil
	case "*":
		return x * y, nil
	case "/":
		if y == 0 {
			return nil, errf("ZeroDivisionError", "float division by zero")
		}
		return x / y, nil
	case "//", "%":
		if y == 0 {
			if op == "//" {
				return nil, errf("ZeroDivisionError", "float floor division by zero")
			}
			return nil, errf("ZeroDivisionError", "float modulo")
		}
		div, mod := floatDivmod(x, y)
		if op == "//" {
			return div, nil
		}
		return mod, nil
	case "**":
		if x == 0 && y < 0 {
			return nil, errf("ZeroDivisionError", "0.0 cannot be raised to a negative power")
		}
		if x < 0 && y != math.Trunc(y) && !math.IsInf(y, 0) {
			return nil, valueErrorf("negative number cannot be raised to a fractional power (complex result)")
		}
		v := math.Pow(x, y)
		if math.IsInf(v, 0) && !math.IsInf(x, 0) && !math.IsInf(y, 0) {
			return nil, errf("OverflowError", "(34, 'Numerical result out of range')")
		}
		return v, nil
	}
	return nil, typeErrorf("bad operator %s", op)
}

// floatDivmod is CPython's float_divmod.
func floatDivmod(vx, wx float64) (float64, float64) {
	mod := math.Mod(vx, wx)
	div := (vx - mod) / wx
	if mod != 0 {
		if (wx < 0) != (mod < 0) {
			mod += wx
			div -= 1.0
		}
	} else {
		mod = math.Copysign(0, wx)
	}
	var floordiv float64
	if div != 0 {
		floordiv = math.Floor(div)
		if div-floordiv > 0.5 {
			floordiv += 1.0
		}
	} else {
		floordiv = math.Copysign(0, vx/wx)
	}
	return floordiv, mod
}

func (r *renderer) add(a, b Value) (Value, error) {
	switch x := a.(type) {
	case string:
		switch y := b.(type) {
		case string:
			if err := r.checkLen(len(x) + len(y)); err != nil {
				return nil, err
			}
			if err := r.charge((len(x) + len(y)) >> 6); err != nil {
				return nil, err
			}
			return x + y, nil
		case Markup:
			return Markup(htmlEscape(x)) + y, nil
		}
		return nil, typeErrorf("can only concatenate str (not \"%s\") to str", typeName(b))
	case Markup:
		switch y := b.(type) {
		case string:
			return x + Markup(htmlEscape(y)), nil
		case Markup:
			return x + y, nil
		}
		return nil, typeErrorf("can only concatenate str (not \"%s\") to str", typeName(b))
	case List:
		if y, ok := b.(List); ok {
			if err := r.checkLen(len(x) + len(y)); err != nil {
				return nil, err
			}
			if err := r.charge(len(x) + len(y)); err != nil {
				return nil, err
			}
			out := make(List, 0, len(x)+len(y))
			return append(append(out, x...), y...), nil
		}
		return nil, typeErrorf("can only concatenate list (not \"%s\") to list", typeName(b))
	case Tuple:
		if y, ok := b.(Tuple); ok {
			out := make(Tuple, 0, len(x)+len(y))
			return append(append(out, x...), y...), nil
		}
		return nil, typeErrorf("can only concatenate tuple (not \"%s\") to tuple", typeName(b))
	}
	return nil, unsupported("+", a, b)
}

func (r *renderer) mul(a, b Value) (Value, error) {
	seq, n := a, b
	if kb, _, _, _ := numeric(b); kb == 0 || kb == 3 {
		seq, n = b, a
	}
	switch seq.(type) {
	case string, Markup, List, Tuple:
	default:
		return nil, unsupported("*", a, b)
	}
	k, i, bi, _ := numeric(n)
	if k != 1 && k != 2 {
		return nil, unsupported("*", a, b)
	}
	if k == 2 {
		if bi.Sign() > 0 {
			return nil, errf("OverflowError", "cannot fit 'int' into an index-sized integer")
		}
		i = 0
	}
	if i < 0 {
		i = 0
	}
	rep := func(l int) (int, error) {
		if l == 0 || i == 0 {
			return 0, nil
		}
		if i > int64(r.opts.MaxOutputBytes) || int64(l)*i > int64(r.opts.MaxOutputBytes) {
			return 0, errf("LimitError", "repetition result too large")
		}
		return int(i), r.charge(int(int64(l)*i) >> 6)
	}
	switch x := seq.(type) {
	case string:
		c, err := rep(len(x))
		if err != nil {
			return nil, err
		}
		return strings.Repeat(x, c), nil
	case Markup:
		c, err := rep(len(x))
		if err != nil {
			return nil, err
		}
		return Markup(strings.Repeat(string(x), c)), nil
	case List:
		c, err := rep(len(x) * 16)
		if err != nil {
			return nil, err
		}
		out := make(List, 0, len(x)*c)
		for j := 0; j < c; j++ {
			out = append(out, x...)
		}
		return out, nil
	case Tuple:
		c, err := rep(len(x) * 16)
		if err != nil {
			return nil, err
		}
		out := make(Tuple, 0, len(x)*c)
		for j := 0; j < c; j++ {
			out = append(out, x...)
		}
		return out, nil
	}
	return nil, unsupported("*", a, b)
}

func negate(a Value) (Value, error) {
	switch x := a.(type) {
	case bool:
		return -int64(btoi(x)), nil
	case int64:
		if x == math.MinInt64 {
			return new(big.Int).Neg(big.NewInt(x)), nil
		}
		return -x, nil
	case *big.Int:
		return normBig(new(big.Int).Neg(x)), nil
	case float64:
		return -x, nil
	case *Undefined:
		return nil, x.err()
	}
	return nil, typeErrorf("bad operand type for unary -: '%s'", typeName(a))
}

// pyEqual is Python's ==.
func pyEqual(a, b Value) bool {
	switch x := a.(type) {
	case string:
		switch y := b.(type) {
		case string:
			return x == y
		case Markup:
			return x == string(y)
		}
		return false
	case Markup:
		switch y := b.(type) {
		case string:
			return string(x) == y
		case Markup:
			return x == y
		}
		return false
	case nil:
		return b == nil
	case List:
		y, ok := b.(List)
		return ok && seqEqual(x, y)
	case Tuple:
		y, ok := b.(Tuple)
		return ok && seqEqual(x, y)
	case *Dict:
		y, ok := b.(*Dict)
		if !ok || x.Len() != y.Len() {
			return false
		}
		for _, e := range x.ents {
			i := y.find(e.h)
			if i < 0 || !pyEqual(e.val, y.ents[i].val) {
				return false
			}
		}
		return true
	case *Undefined:
		_, ok := b.(*Undefined)
		return ok
	case *rangeVal:
		y, ok := b.(*rangeVal)
		return ok && seqEqual(x.items(), y.items())
	}
	if isNumber(a) && isNumber(b) {
		c, _ := numCompare(a, b)
		return c == 0
	}
	return a == b
}

func seqEqual(a, b []Value) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !pyEqual(a[i], b[i]) {
			return false
		}
	}
	return true
}

// numCompare compares two Python numbers exactly (int against float
// included); NaN compares unequal to everything (ok=false).
func numCompare(a, b Value) (int, bool) {
	ka, ia, ba, fa := numeric(a)
	kb, ib, bb, fb := numeric(b)
	if ka == 1 && kb == 1 {
		switch {
		case ia < ib:
			return -1, true
		case ia > ib:
			return 1, true
		}
		return 0, true
	}
	if ka == 3 && kb == 3 {
		switch {
		case fa < fb:
			return -1, true
		case fa > fb:
			return 1, true
		case fa == fb:
			return 0, true
		}
		return 0, false
	}
	if (ka == 3 && math.IsNaN(fa)) || (kb == 3 && math.IsNaN(fb)) {
		return 0, false
	}
	toBF := func(k int, i int64, b *big.Int, f float64) *big.Float {
		switch k {
		case 1:
			return new(big.Float).SetInt64(i)
		case 2:
			return new(big.Float).SetInt(b)
		}
		return new(big.Float).SetFloat64(f) // ±Inf allowed
	}
	return toBF(ka, ia, ba, fa).Cmp(toBF(kb, ib, bb, fb)), true
}

// pyLess is Python's a < b.
func pyLess(a, b Value) (bool, error) {
	c, ok, err := pyOrder(a, b, "<")
	return ok && c < 0, err
}

// pyOrder compares a and b for <, <=, >, >=; ok=false when the comparison
// is false both ways (NaN).
func pyOrder(a, b Value, op string) (int, bool, error) {
	if err := undefinedOperand(a, b); err != nil {
		return 0, false, err
	}
	if isNumber(a) && isNumber(b) {
		c, ok := numCompare(a, b)
		return c, ok, nil
	}
	switch x := a.(type) {
	case string, Markup:
		var sb string
		switch y := b.(type) {
		case string:
			sb = y
		case Markup:
			sb = string(y)
		default:
			return 0, false, orderErr(op, a, b)
		}
		return strings.Compare(pyStr(x), sb), true, nil
	case List:
		if y, ok := b.(List); ok {
			return seqOrder(x, y, op)
		}
	case Tuple:
		if y, ok := b.(Tuple); ok {
			return seqOrder(x, y, op)
		}
	}
	return 0, false, orderErr(op, a, b)
}

func orderErr(op string, a, b Value) error {
	return typeErrorf("'%s' not supported between instances of '%s' and '%s'", op, typeName(a), typeName(b))
}

func seqOrder(a, b []Value, op string) (int, bool, error) {
	for i := 0; i < len(a) && i < len(b); i++ {
		if !pyEqual(a[i], b[i]) {
			return pyOrder(a[i], b[i], op)
		}
	}
	switch {
	case len(a) < len(b):
		return -1, true, nil
	case len(a) > len(b):
		return 1, true, nil
	}
	return 0, true, nil
}

// compareOp evaluates one link of a comparison chain.
func compareOp(op string, a, b Value) (bool, error) {
	switch op {
	case "eq":
		return pyEqual(a, b), nil
	case "ne":
		return !pyEqual(a, b), nil
	case "in":
		return contains(b, a)
	case "notin":
		ok, err := contains(b, a)
		return !ok, err
	}
	sym := map[string]string{"lt": "<", "lteq": "<=", "gt": ">", "gteq": ">="}[op]
	c, ok, err := pyOrder(a, b, sym)
	if err != nil || !ok {
		return false, err
	}
	switch op {
	case "lt":
		return c < 0, nil
	case "lteq":
		return c <= 0, nil
	case "gt":
		return c > 0, nil
	}
	return c >= 0, nil
}

// contains is Python's item in container.
func contains(container, item Value) (bool, error) {
	switch c := container.(type) {
	case string, Markup:
		switch s := item.(type) {
		case string:
			return strings.Contains(pyStr(c), s), nil
		case Markup:
			return strings.Contains(pyStr(c), string(s)), nil
		}
		return false, typeErrorf("'in <string>' requires string as left operand, not %s", typeName(item))
	case List:
		return seqContains(c, item), nil
	case Tuple:
		return seqContains(c, item), nil
	case *Dict:
		h, err := hashKey(item)
		if err != nil {
			return false, err
		}
		return c.find(h) >= 0, nil
	case *Undefined:
		return false, nil
	case *rangeVal:
		return seqContains(c.items(), item), nil
	case *dictView:
		if c.kind == "keys" {
			return contains(c.d, item)
		}
		return seqContains(c.items(), item), nil
	case *generator:
		for c.pos < len(c.items) {
			c.pos++
			if pyEqual(c.items[c.pos-1], item) {
				return true, nil
			}
		}
		return false, c.err
	case *namespace:
		return false, typeErrorf("argument of type 'Namespace' is not iterable")
	}
	return false, typeErrorf("argument of type '%s' is not iterable", typeName(container))
}

func seqContains(items []Value, item Value) bool {
	for _, e := range items {
		if pyEqual(e, item) {
			return true
		}
	}
	return false
}

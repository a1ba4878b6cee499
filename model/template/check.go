package template

import (
	"errors"
	"math/big"
)

// check runs after parsing, where Jinja2's code generator and Python's
// compile() run: an unknown filter or test is a TemplateAssertionError,
// except in an if statement or an inline if, where Jinja2 defers it to
// render time ("soft" frames, so `{% if x is filter %}` guards work); a
// break or continue outside a loop is a SyntaxError, reported after those.
func check(body []stmt) error {
	c := &checker{}
	c.stmts(body, false, false)
	if c.err != nil {
		return c.err
	}
	return c.loopErr
}

type checker struct {
	err     error
	loopErr error
}

func (c *checker) stmts(body []stmt, soft, inLoop bool) {
	for _, s := range body {
		c.stmt(s, soft, inLoop)
	}
}

func (c *checker) stmt(s stmt, soft, inLoop bool) {
	switch n := s.(type) {
	case *printStmt:
		n.x = c.expr(n.x, soft)
		if fe, ok := n.x.(*foldExpr); ok {
			fe.top = true
		}
	case *ifStmt:
		for i, t := range n.tests {
			n.tests[i] = c.expr(t, true)
			c.stmts(n.bodies[i], true, inLoop)
		}
		c.stmts(n.els, true, inLoop)
	case *forStmt:
		n.iter = c.expr(n.iter, soft)
		n.cond = c.expr(n.cond, false)
		c.stmts(n.body, false, true)
		c.stmts(n.els, false, inLoop)
	case *setStmt:
		n.x = c.expr(n.x, soft)
	case *setBlockStmt:
		c.stmts(n.body, false, inLoop)
		c.filterChain(n.filter, false)
	case *withStmt:
		c.exprs(n.vals, soft)
		c.stmts(n.body, false, inLoop)
	case *macroStmt:
		c.macro(n.def)
	case *callBlockStmt:
		c.expr(n.call, soft) // a call is never constant
		c.macro(n.caller)
	case *filterBlockStmt:
		c.filterChain(n.filter, false)
		c.stmts(n.body, false, inLoop)
	case *blockStmt:
		c.stmts(n.body, false, false)
	case *autoescapeStmt:
		n.on = c.expr(n.on, soft)
		c.stmts(n.body, soft, inLoop)
	case *loopControlStmt:
		if !inLoop && c.loopErr == nil {
			what := "'break' outside loop"
			if !n.brk {
				what = "'continue' not properly in loop"
			}
			c.loopErr = syntaxErr(n.line, "%s", what)
		}
	}
}

// isConst mirrors which nodes Jinja2's optimizer folds (their as_const):
// literals, and operators, filters, tests, attribute and item lookups whose
// operands are all constant. Calls, names and the filters that need the
// render context (map, select, reject and friends) are not constant.
func isConst(x expr) bool {
	switch n := x.(type) {
	case nil, *constExpr, *foldExpr:
		return true
	case *listExpr:
		return allConst(n.items)
	case *tupleExpr:
		return allConst(n.items)
	case *dictExpr:
		return allConst(n.keys) && allConst(n.vals)
	case *binExpr:
		return isConst(n.l) && isConst(n.r)
	case *addChain:
		return allConst(n.items)
	case *concatExpr:
		return allConst(n.items)
	case *compareExpr:
		return isConst(n.first) && allConst(n.rest)
	case *andExpr:
		// as_const short-circuits, so only the left side must be constant;
		// the right one is checked when it is reached (errImpossible).
		return isConst(n.l)
	case *orExpr:
		return isConst(n.l)
	case *notExpr:
		return isConst(n.x)
	case *negExpr:
		return isConst(n.x)
	case *posExpr:
		return isConst(n.x)
	case *condExpr:
		// as_const evaluates only the branch the test picks.
		return isConst(n.test) && (isConst(n.then) || (n.els != nil && isConst(n.els)))
	case *getattrExpr:
		return isConst(n.obj)
	case *getitemExpr:
		return isConst(n.obj) && isConst(n.key)
	case *sliceExpr:
		return isConst(n.start) && isConst(n.stop) && isConst(n.step)
	case *filterExpr:
		switch n.name {
		case "map", "select", "reject", "selectattr", "rejectattr", "random":
			return false
		}
		return n.node != nil && n.fn != nil && isConst(n.node) && constArgs(n.call)
	case *testExpr:
		return n.fn != nil && isConst(n.node) && constArgs(n.call)
	}
	return false
}

func allConst(xs []expr) bool {
	for _, x := range xs {
		if !isConst(x) {
			return false
		}
	}
	return true
}

func constArgs(a callArgs) bool {
	return allConst(a.args) && allConst(a.kwVals) && isConst(a.dynArgs) && isConst(a.dynKwargs)
}

func (c *checker) macro(d *macroDef) {
	c.exprs(d.defaults, false)
	c.stmts(d.body, false, false)
}

func (c *checker) filterChain(f *filterExpr, soft bool) {
	if f != nil {
		c.expr(f, soft) // its innermost node is nil, so never constant
	}
}

func (c *checker) unknown(kind, name string, line int) {
	if c.err == nil {
		c.err = &Error{Kind: "TemplateAssertionError", Msg: "No " + kind + " named '" + name + "'.", Line: line}
	}
}

func (c *checker) args(a *callArgs, soft bool) {
	c.exprs(a.args, soft)
	c.exprs(a.kwVals, soft)
	a.dynArgs = c.expr(a.dynArgs, soft)
	a.dynKwargs = c.expr(a.dynKwargs, soft)
}

func (c *checker) exprs(xs []expr, soft bool) {
	for i, x := range xs {
		xs[i] = c.expr(x, soft)
	}
}

// expr checks x and returns it with its maximal constant subtrees wrapped
// in foldExpr, the way Jinja2's optimizer folds them.
func (c *checker) expr(x expr, soft bool) expr {
	// Children first, then the node itself, as the optimizer's
	// generic_visit does.
	switch n := x.(type) {
	case *filterExpr:
		if n.node != nil {
			n.node = c.expr(n.node, soft)
		}
		c.args(&n.call, soft)
		if n.fn == nil && !soft {
			c.unknown("filter", n.name, n.line)
		}
	case *testExpr:
		n.node = c.expr(n.node, soft)
		c.args(&n.call, soft)
		if n.fn == nil && !soft {
			c.unknown("test", n.name, n.line)
		}
	case *condExpr:
		n.then = c.expr(n.then, true)
		n.test = c.expr(n.test, true)
		n.els = c.expr(n.els, true)
		n.thenConst, n.elsConst = isConst(n.then), n.els != nil && isConst(n.els)
	case *listExpr:
		c.exprs(n.items, soft)
	case *tupleExpr:
		c.exprs(n.items, soft)
	case *dictExpr:
		c.exprs(n.keys, soft)
		c.exprs(n.vals, soft)
	case *getattrExpr:
		n.obj = c.expr(n.obj, soft)
	case *getitemExpr:
		n.obj = c.expr(n.obj, soft)
		n.key = c.expr(n.key, soft)
	case *sliceExpr:
		n.start = c.expr(n.start, soft)
		n.stop = c.expr(n.stop, soft)
		n.step = c.expr(n.step, soft)
	case *callExpr:
		n.fn = c.expr(n.fn, soft)
		c.exprs(n.args, soft)
		c.exprs(n.kwVals, soft)
		n.dynArgs = c.expr(n.dynArgs, soft)
		n.dynKwargs = c.expr(n.dynKwargs, soft)
	case *binExpr:
		n.l = c.expr(n.l, soft)
		n.r = c.expr(n.r, soft)
	case *addChain:
		c.exprs(n.items, soft)
	case *concatExpr:
		c.exprs(n.items, soft)
	case *compareExpr:
		n.first = c.expr(n.first, soft)
		c.exprs(n.rest, soft)
	case *andExpr:
		n.l = c.expr(n.l, soft)
		n.r = c.expr(n.r, soft)
		n.rConst = isConst(n.r)
	case *orExpr:
		n.l = c.expr(n.l, soft)
		n.r = c.expr(n.r, soft)
		n.rConst = isConst(n.r)
	case *notExpr:
		n.x = c.expr(n.x, soft)
	case *negExpr:
		n.x = c.expr(n.x, soft)
	case *posExpr:
		n.x = c.expr(n.x, soft)
	}
	if _, ok := x.(*constExpr); !ok && x != nil && isConst(x) {
		return &foldExpr{x: x}
	}
	return x
}

// foldExpr is a constant subtree. Jinja2's optimizer evaluates it at
// compile time with as_const, where a slice goes through
// environment.getitem (a TypeError gives Undefined instead of failing),
// and keeps the result only if it has a "safe repr" (Undefined and
// generators do not) -- except as the whole of a {{ }}, where any result is
// printed. Otherwise the subtree runs as ordinary code.
type foldExpr struct {
	x   expr
	top bool
}

// errImpossible is jinja2.nodes.Impossible: a fold that cannot be done at
// compile time, so the subtree runs as ordinary code.
var errImpossible = &Error{Kind: "Impossible", Msg: "not a constant"}

func (e *foldExpr) eval(r *renderer, f *frame) (Value, error) {
	if r.constMode > 0 {
		// Inside an enclosing fold: plain as_const semantics.
		return e.x.eval(r, f)
	}
	r.constMode++
	v, err := e.x.eval(r, f)
	r.constMode--
	if err == nil && (e.top || hasSafeRepr(v, 0)) {
		return v, nil
	}
	if errors.Is(err, ErrLimit) {
		return nil, err
	}
	return e.x.eval(r, f)
}

// hasSafeRepr is jinja2.compiler.has_safe_repr.
func hasSafeRepr(v Value, depth int) bool {
	if depth > 100 {
		return false
	}
	switch x := v.(type) {
	case nil, bool, int64, *big.Int, float64, string, Markup, *rangeVal:
		return true
	case List:
		for _, e := range x {
			if !hasSafeRepr(e, depth+1) {
				return false
			}
		}
		return true
	case Tuple:
		for _, e := range x {
			if !hasSafeRepr(e, depth+1) {
				return false
			}
		}
		return true
	case *Dict:
		for _, e := range x.ents {
			if !hasSafeRepr(e.key, depth+1) || !hasSafeRepr(e.val, depth+1) {
				return false
			}
		}
		return true
	}
	return false
}

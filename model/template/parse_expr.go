package template

func (p *parser) isTupleEnd(extra []string) bool {
	switch t := p.cur(); t.kind {
	case tVarEnd, tBlockEnd, tEOF:
		return true
	case tOp:
		return t.val == ")"
	case tName:
		for _, e := range extra {
			if t.val == e {
				return true
			}
		}
	}
	return false
}

// parseTuple is parse_tuple: an expression, or a tuple when commas follow.
func (p *parser) parseTuple(simplified, withCondexpr bool, extra []string, withNS bool) (expr, error) {
	var items []expr
	isTuple := false
	for {
		if len(items) > 0 {
			if err := p.expectOp(","); err != nil {
				return nil, err
			}
		}
		if p.isTupleEnd(extra) {
			break
		}
		var x expr
		var err error
		if simplified {
			x, err = p.parsePrimary(withNS)
		} else {
			x, err = p.parseExpression(withCondexpr)
		}
		if err != nil {
			return nil, err
		}
		items = append(items, x)
		if !p.isOp(",") {
			break
		}
		isTuple = true
	}
	if !isTuple {
		if len(items) > 0 {
			return items[0], nil
		}
		if p.cur().kind == tEOF {
			return nil, p.failEOF(nil)
		}
		return nil, p.fail("Expected an expression, got '%s'", describe(p.cur()))
	}
	return &tupleExpr{items: items}, nil
}

func (p *parser) parseExpression(withCondexpr bool) (expr, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave()
	if withCondexpr {
		return p.parseCondexpr()
	}
	return p.parseOr()
}

func (p *parser) parseCondexpr() (expr, error) {
	line := p.cur().line
	x, err := p.parseOr()
	if err != nil {
		return nil, err
	}
	for p.skipName("if") {
		test, err := p.parseOr()
		if err != nil {
			return nil, err
		}
		var els expr
		if p.skipName("else") {
			if els, err = p.parseCondexpr(); err != nil {
				return nil, err
			}
		}
		x = &condExpr{test: test, then: x, els: els, line: line}
		line = p.cur().line
	}
	return x, nil
}

func (p *parser) parseOr() (expr, error) {
	l, err := p.parseAnd()
	if err != nil {
		return nil, err
	}
	for p.skipName("or") {
		r, err := p.parseAnd()
		if err != nil {
			return nil, err
		}
		l = &orExpr{l: l, r: r}
	}
	return l, nil
}

func (p *parser) parseAnd() (expr, error) {
	l, err := p.parseNot()
	if err != nil {
		return nil, err
	}
	for p.skipName("and") {
		r, err := p.parseNot()
		if err != nil {
			return nil, err
		}
		l = &andExpr{l: l, r: r}
	}
	return l, nil
}

func (p *parser) parseNot() (expr, error) {
	if p.skipName("not") {
		if err := p.enter(); err != nil {
			return nil, err
		}
		defer p.leave()
		x, err := p.parseNot()
		if err != nil {
			return nil, err
		}
		return &notExpr{x: x}, nil
	}
	return p.parseCompare()
}

var compareOps = map[string]string{"==": "eq", "!=": "ne", "<": "lt", "<=": "lteq", ">": "gt", ">=": "gteq"}

func (p *parser) parseCompare() (expr, error) {
	line := p.cur().line
	x, err := p.parseMath1()
	if err != nil {
		return nil, err
	}
	c := &compareExpr{first: x, line: line}
	for {
		t := p.cur()
		var op string
		if name, ok := compareOps[t.val]; ok && t.kind == tOp {
			p.next()
			op = name
		} else if p.skipName("in") {
			op = "in"
		} else if p.isName("not") && p.look().kind == tName && p.look().val == "in" {
			p.next()
			p.next()
			op = "notin"
		} else {
			break
		}
		r, err := p.parseMath1()
		if err != nil {
			return nil, err
		}
		c.ops = append(c.ops, op)
		c.rest = append(c.rest, r)
	}
	if len(c.ops) == 0 {
		return x, nil
	}
	return c, nil
}

func (p *parser) parseMath1() (expr, error) {
	line := p.cur().line
	l, err := p.parseConcat()
	if err != nil {
		return nil, err
	}
	var chain *addChain
	for p.isOp("+") || p.isOp("-") {
		op := p.next().val
		r, err := p.parseConcat()
		if err != nil {
			return nil, err
		}
		if op == "-" {
			l = &binExpr{op: "-", l: l, r: r, line: line}
			chain = nil
			continue
		}
		if chain == nil {
			chain = &addChain{items: []expr{l}, line: line}
			l = chain
		}
		chain.items = append(chain.items, r)
	}
	return l, nil
}

func (p *parser) parseConcat() (expr, error) {
	x, err := p.parseMath2()
	if err != nil {
		return nil, err
	}
	if !p.isOp("~") {
		return x, nil
	}
	c := &concatExpr{items: []expr{x}}
	for p.skipOp("~") {
		y, err := p.parseMath2()
		if err != nil {
			return nil, err
		}
		c.items = append(c.items, y)
	}
	return c, nil
}

func (p *parser) parseMath2() (expr, error) {
	line := p.cur().line
	l, err := p.parsePow()
	if err != nil {
		return nil, err
	}
	for p.isOp("*") || p.isOp("/") || p.isOp("//") || p.isOp("%") {
		op := p.next().val
		r, err := p.parsePow()
		if err != nil {
			return nil, err
		}
		l = &binExpr{op: op, l: l, r: r, line: line}
	}
	return l, nil
}

func (p *parser) parsePow() (expr, error) {
	line := p.cur().line
	l, err := p.parseUnary(true)
	if err != nil {
		return nil, err
	}
	for p.skipOp("**") {
		r, err := p.parseUnary(true)
		if err != nil {
			return nil, err
		}
		l = &binExpr{op: "**", l: l, r: r, line: line}
	}
	return l, nil
}

func (p *parser) parseUnary(withFilter bool) (expr, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave()
	line := p.cur().line
	var x expr
	var err error
	switch {
	case p.skipOp("-"):
		var inner expr
		if inner, err = p.parseUnary(false); err == nil {
			x = &negExpr{x: inner, line: line}
			if c, ok := inner.(*constExpr); ok && isNumber(c.v) {
				if v, nerr := negate(c.v); nerr == nil {
					x = &constExpr{v: v} // as Jinja2's optimizer folds it
				}
			}
		}
	case p.skipOp("+"):
		var inner expr
		if inner, err = p.parseUnary(false); err == nil {
			x = &posExpr{x: inner, line: line}
		}
	default:
		x, err = p.parsePrimary(false)
	}
	if err != nil {
		return nil, err
	}
	if x, err = p.parsePostfix(x); err != nil {
		return nil, err
	}
	if withFilter {
		return p.parseFilterExpr(x)
	}
	return x, nil
}

func (p *parser) parsePrimary(withNS bool) (expr, error) {
	t := p.cur()
	switch t.kind {
	case tName:
		p.next()
		switch t.val {
		case "true", "True":
			return &constExpr{v: true}, nil
		case "false", "False":
			return &constExpr{v: false}, nil
		case "none", "None":
			return &constExpr{v: nil}, nil
		}
		if withNS && p.isOp(".") {
			p.next()
			a, err := p.expectKind(tName, "name")
			if err != nil {
				return nil, err
			}
			return &nsRefExpr{name: t.val, attr: a.val, line: t.line}, nil
		}
		p.markMacroName(t.val)
		return &nameExpr{name: t.val, line: t.line}, nil
	case tString:
		p.next()
		s := t.val
		for p.cur().kind == tString {
			s += p.next().val
		}
		return &constExpr{v: s}, nil
	case tInt, tFloat:
		p.next()
		return &constExpr{v: t.num}, nil
	case tOp:
		switch t.val {
		case "(":
			p.next()
			x, err := p.parseTupleParens()
			if err != nil {
				return nil, err
			}
			return x, p.expectOp(")")
		case "[":
			return p.parseList()
		case "{":
			return p.parseDict()
		}
	case tEOF:
		return nil, p.failEOF(nil)
	}
	return nil, p.fail("unexpected '%s'", describe(t))
}

// parseTupleParens is parse_tuple(explicit_parentheses=True): "()" is the
// empty tuple.
func (p *parser) parseTupleParens() (expr, error) {
	if p.isOp(")") {
		return &tupleExpr{}, nil
	}
	return p.parseTuple(false, true, nil, false)
}

func (p *parser) parseList() (expr, error) {
	p.next()
	l := &listExpr{}
	for !p.isOp("]") {
		if len(l.items) > 0 {
			if err := p.expectOp(","); err != nil {
				return nil, err
			}
		}
		if p.isOp("]") {
			break
		}
		x, err := p.parseExpression(true)
		if err != nil {
			return nil, err
		}
		l.items = append(l.items, x)
	}
	return l, p.expectOp("]")
}

func (p *parser) parseDict() (expr, error) {
	p.next()
	d := &dictExpr{}
	for !p.isOp("}") {
		if len(d.keys) > 0 {
			if err := p.expectOp(","); err != nil {
				return nil, err
			}
		}
		if p.isOp("}") {
			break
		}
		k, err := p.parseExpression(true)
		if err != nil {
			return nil, err
		}
		if err := p.expectOp(":"); err != nil {
			return nil, err
		}
		v, err := p.parseExpression(true)
		if err != nil {
			return nil, err
		}
		d.keys = append(d.keys, k)
		d.vals = append(d.vals, v)
	}
	return d, p.expectOp("}")
}

func (p *parser) parsePostfix(x expr) (expr, error) {
	for {
		var err error
		switch {
		case p.isOp(".") || p.isOp("["):
			x, err = p.parseSubscript(x)
		case p.isOp("("):
			x, err = p.parseCall(x)
		default:
			return x, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

func (p *parser) parseFilterExpr(x expr) (expr, error) {
	for {
		var err error
		switch {
		case p.isOp("|"):
			x, err = p.parseFilter(x, false)
		case p.isName("is"):
			x, err = p.parseTest(x)
		case p.isOp("("):
			x, err = p.parseCall(x)
		default:
			return x, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

func (p *parser) parseSubscript(x expr) (expr, error) {
	t := p.next()
	if t.val == "." {
		a := p.cur()
		p.next()
		switch a.kind {
		case tName:
			return &getattrExpr{obj: x, name: a.val, line: t.line}, nil
		case tInt:
			return &getitemExpr{obj: x, key: &constExpr{v: a.num}, line: t.line}, nil
		}
		return nil, syntaxErr(a.line, "expected name or number")
	}
	var args []expr
	for !p.isOp("]") {
		if len(args) > 0 {
			if err := p.expectOp(","); err != nil {
				return nil, err
			}
		}
		a, err := p.parseSubscribed()
		if err != nil {
			return nil, err
		}
		args = append(args, a)
	}
	p.next()
	var key expr
	switch len(args) {
	case 0:
		return nil, syntaxErr(t.line, "expected subscript expression")
	case 1:
		key = args[0]
	default:
		key = &tupleExpr{items: args}
	}
	return &getitemExpr{obj: x, key: key, line: t.line}, nil
}

func (p *parser) parseSubscribed() (expr, error) {
	var parts [3]expr
	if p.isOp(":") {
		p.next()
	} else {
		x, err := p.parseExpression(true)
		if err != nil {
			return nil, err
		}
		if !p.isOp(":") {
			return x, nil
		}
		p.next()
		parts[0] = x
	}
	if !p.isOp(":") && !p.isOp("]") && !p.isOp(",") {
		x, err := p.parseExpression(true)
		if err != nil {
			return nil, err
		}
		parts[1] = x
	}
	if p.skipOp(":") && !p.isOp("]") && !p.isOp(",") {
		x, err := p.parseExpression(true)
		if err != nil {
			return nil, err
		}
		parts[2] = x
	}
	return &sliceExpr{start: parts[0], stop: parts[1], step: parts[2]}, nil
}

func (p *parser) parseCallArgs() (callArgs, error) {
	var c callArgs
	line := p.cur().line
	if err := p.expectOp("("); err != nil {
		return c, err
	}
	bad := func() error { return syntaxErr(line, "invalid syntax for function call expression") }
	needComma := false
	for !p.isOp(")") {
		if needComma {
			if err := p.expectOp(","); err != nil {
				return c, err
			}
			if p.isOp(")") {
				break
			}
		}
		switch {
		case p.isOp("*"):
			if c.dynArgs != nil || c.dynKwargs != nil {
				return c, bad()
			}
			p.next()
			x, err := p.parseExpression(true)
			if err != nil {
				return c, err
			}
			c.dynArgs = x
		case p.isOp("**"):
			if c.dynKwargs != nil {
				return c, bad()
			}
			p.next()
			x, err := p.parseExpression(true)
			if err != nil {
				return c, err
			}
			c.dynKwargs = x
		case p.cur().kind == tName && p.look().kind == tOp && p.look().val == "=":
			if c.dynKwargs != nil {
				return c, bad()
			}
			name := p.next().val
			p.next()
			x, err := p.parseExpression(true)
			if err != nil {
				return c, err
			}
			c.kwNames = append(c.kwNames, name)
			c.kwVals = append(c.kwVals, x)
		default:
			if c.dynArgs != nil || c.dynKwargs != nil || len(c.kwNames) > 0 {
				return c, bad()
			}
			x, err := p.parseExpression(true)
			if err != nil {
				return c, err
			}
			c.args = append(c.args, x)
		}
		needComma = true
	}
	return c, p.expectOp(")")
}

func (p *parser) parseCall(x expr) (expr, error) {
	line := p.cur().line
	c, err := p.parseCallArgs()
	if err != nil {
		return nil, err
	}
	return &callExpr{fn: x, args: c.args, kwNames: c.kwNames, kwVals: c.kwVals, dynArgs: c.dynArgs, dynKwargs: c.dynKwargs, line: line}, nil
}

func (p *parser) dottedName() (string, int, error) {
	t, err := p.expectKind(tName, "name")
	if err != nil {
		return "", 0, err
	}
	name := t.val
	for p.skipOp(".") {
		a, err := p.expectKind(tName, "name")
		if err != nil {
			return "", 0, err
		}
		name += "." + a.val
	}
	return name, t.line, nil
}

// parseFilter parses "|name(args)" chains; with inline set, the first name
// follows without a pipe ({% filter upper %}).
func (p *parser) parseFilter(x expr, inline bool) (expr, error) {
	for p.isOp("|") || inline {
		if !inline {
			p.next()
		}
		inline = false
		name, line, err := p.dottedName()
		if err != nil {
			return nil, err
		}
		def := filters[name] // nil: checked after parsing (check.go)
		var c callArgs
		if p.isOp("(") {
			if c, err = p.parseCallArgs(); err != nil {
				return nil, err
			}
		}
		x = &filterExpr{node: x, name: name, fn: def, call: c, line: line}
	}
	return x, nil
}

func (p *parser) parseTest(x expr) (expr, error) {
	p.next() // is
	negated := p.skipName("not")
	name, line, err := p.dottedName()
	if err != nil {
		return nil, err
	}
	def := tests[name] // nil: checked after parsing (check.go)
	var c callArgs
	t := p.cur()
	switch {
	case p.isOp("("):
		if c, err = p.parseCallArgs(); err != nil {
			return nil, err
		}
	case (t.kind == tName && t.val != "else" && t.val != "or" && t.val != "and") ||
		t.kind == tString || t.kind == tInt || t.kind == tFloat || p.isOp("[") || p.isOp("{"):
		if p.isName("is") {
			return nil, p.fail("You cannot chain multiple tests with is")
		}
		a, err := p.parsePrimary(false)
		if err != nil {
			return nil, err
		}
		if a, err = p.parsePostfix(a); err != nil {
			return nil, err
		}
		c.args = []expr{a}
	}
	var out expr = &testExpr{node: x, name: name, fn: def, call: c, line: line}
	if negated {
		out = &notExpr{x: out}
	}
	return out, nil
}

// markMacroName records reads of varargs, kwargs and caller inside macro
// bodies (jinja's find_undeclared decides the same way).
func (p *parser) markMacroName(name string) {
	if name != "varargs" && name != "kwargs" && name != "caller" {
		return
	}
	for _, d := range p.macros {
		switch name {
		case "varargs":
			d.catchVarargs = true
		case "kwargs":
			d.catchKwargs = true
		case "caller":
			d.callerUsed = true
		}
	}
}

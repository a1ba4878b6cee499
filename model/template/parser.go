package template

import (
	"strings"
)

// The parser follows jinja2/parser.py (3.1): the same precedence (condexpr <
// or < and < not < compare < +,- < ~ < *,/,//,% < ** (left-associative) <
// unary < postfix < filters/tests), the same statements, and the
// loopcontrols extension's break and continue.

const maxParseDepth = 200

type parser struct {
	toks      []token
	i         int
	depth     int
	loops     int         // enclosing for loops (break/continue allowed)
	closures  int         // macros and call blocks parsed so far
	macros    []*macroDef // macros and call blocks being parsed
	tagStack  []string
	endTokens [][]string
}

func parse(src string) ([]stmt, error) {
	toks, err := tokenize(src)
	if err != nil {
		return nil, err
	}
	p := &parser{toks: toks}
	body, err := p.subparse(nil)
	if err != nil {
		return nil, err
	}
	if err := check(body); err != nil {
		return nil, err
	}
	return body, nil
}

func (p *parser) cur() token { return p.toks[p.i] }

func (p *parser) look() token {
	if p.i+1 < len(p.toks) {
		return p.toks[p.i+1]
	}
	return p.toks[len(p.toks)-1]
}

func (p *parser) next() token {
	t := p.toks[p.i]
	if p.i < len(p.toks)-1 {
		p.i++
	}
	return t
}

func (p *parser) isOp(op string) bool { t := p.cur(); return t.kind == tOp && t.val == op }

func (p *parser) isName(name string) bool {
	t := p.cur()
	return t.kind == tName && t.val == name
}

func (p *parser) skipOp(op string) bool {
	if p.isOp(op) {
		p.next()
		return true
	}
	return false
}

func (p *parser) skipName(name string) bool {
	if p.isName(name) {
		p.next()
		return true
	}
	return false
}

func describe(t token) string {
	switch t.kind {
	case tEOF:
		return "end of template"
	case tData:
		return "template data / text"
	case tVarBegin:
		return "begin of print statement"
	case tVarEnd:
		return "end of print statement"
	case tBlockBegin:
		return "begin of statement block"
	case tBlockEnd:
		return "end of statement block"
	case tName, tOp:
		return t.val
	case tString:
		return "string"
	case tInt:
		return "integer"
	case tFloat:
		return "float"
	}
	return "token"
}

func (p *parser) fail(format string, args ...any) error {
	return syntaxErr(p.cur().line, format, args...)
}

func (p *parser) expectOp(op string) error {
	if p.skipOp(op) {
		return nil
	}
	if p.cur().kind == tEOF {
		return p.failEOF(nil)
	}
	return p.fail("expected token '%s', got '%s'", op, describe(p.cur()))
}

func (p *parser) expectKind(k tokKind, what string) (token, error) {
	t := p.cur()
	if t.kind != k {
		if t.kind == tEOF {
			return t, p.failEOF(nil)
		}
		return t, p.fail("expected token '%s', got '%s'", what, describe(t))
	}
	p.next()
	return t, nil
}

func (p *parser) expectName(name string) error {
	if p.skipName(name) {
		return nil
	}
	if p.cur().kind == tEOF {
		return p.failEOF(nil)
	}
	return p.fail("expected token '%s', got '%s'", name, describe(p.cur()))
}

func (p *parser) failEOF(end []string) error {
	stack := p.endTokens
	if end != nil {
		stack = append(append([][]string(nil), stack...), end)
	}
	return p.failUnknown("", stack)
}

func (p *parser) failUnknown(name string, stack [][]string) error {
	var msg []string
	if name == "" {
		msg = append(msg, "Unexpected end of template.")
	} else {
		msg = append(msg, "Encountered unknown tag '"+name+"'.")
	}
	if len(stack) > 0 {
		var looking []string
		for _, t := range stack[len(stack)-1] {
			looking = append(looking, "'"+t+"'")
		}
		msg = append(msg, "Jinja was looking for the following tags: "+strings.Join(looking, " or ")+".")
	}
	if len(p.tagStack) > 0 {
		msg = append(msg, "The innermost block that needs to be closed is '"+p.tagStack[len(p.tagStack)-1]+"'.")
	}
	return p.fail("%s", strings.Join(msg, " "))
}

func (p *parser) enter() error {
	p.depth++
	if p.depth > maxParseDepth {
		return p.fail("template nesting too deep")
	}
	return nil
}

func (p *parser) leave() { p.depth-- }

// subparse parses template data, prints and statements until one of end
// (a block tag name) is reached; the end tag's name token is current then.
func (p *parser) subparse(end []string) ([]stmt, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave()
	if end != nil {
		p.endTokens = append(p.endTokens, end)
		defer func() { p.endTokens = p.endTokens[:len(p.endTokens)-1] }()
	}
	var body []stmt
	for {
		t := p.cur()
		switch t.kind {
		case tEOF:
			return body, nil
		case tData:
			body = append(body, &dataStmt{s: t.val})
			p.next()
		case tVarBegin:
			p.next()
			x, err := p.parseTuple(false, true, nil, false)
			if err != nil {
				return nil, err
			}
			body = append(body, &printStmt{x: x, line: t.line})
			if _, err := p.expectKind(tVarEnd, "end of print statement"); err != nil {
				return nil, err
			}
		case tBlockBegin:
			p.next()
			if end != nil && p.cur().kind == tName {
				for _, e := range end {
					if p.cur().val == e {
						return body, nil
					}
				}
			}
			s, err := p.parseStatement()
			if err != nil {
				return nil, err
			}
			if s != nil {
				body = append(body, s...)
			}
			if _, err := p.expectKind(tBlockEnd, "end of statement block"); err != nil {
				return nil, err
			}
		default:
			return nil, p.fail("unexpected '%s'", describe(t))
		}
	}
}

// parseStatements parses a statement body after its header (an optional
// colon, then the block end) up to one of end.
func (p *parser) parseStatements(end []string, dropNeedle bool) ([]stmt, error) {
	p.skipOp(":")
	if _, err := p.expectKind(tBlockEnd, "end of statement block"); err != nil {
		return nil, err
	}
	body, err := p.subparse(end)
	if err != nil {
		return nil, err
	}
	if p.cur().kind == tEOF {
		return nil, p.failEOF(end)
	}
	if dropNeedle {
		p.next()
	}
	return body, nil
}

func (p *parser) parseStatement() ([]stmt, error) {
	t := p.cur()
	if t.kind != tName {
		return nil, p.fail("tag name expected")
	}
	p.tagStack = append(p.tagStack, t.val)
	defer func() { p.tagStack = p.tagStack[:len(p.tagStack)-1] }()
	one := func(s stmt, err error) ([]stmt, error) {
		if err != nil {
			return nil, err
		}
		return []stmt{s}, nil
	}
	switch t.val {
	case "for":
		return one(p.parseFor())
	case "if":
		return one(p.parseIf())
	case "set":
		return one(p.parseSet())
	case "with":
		return one(p.parseWith())
	case "macro":
		return one(p.parseMacro())
	case "call":
		return one(p.parseCallBlock())
	case "filter":
		return one(p.parseFilterBlock())
	case "block":
		return one(p.parseBlock())
	case "print":
		p.next()
		var out []stmt
		for p.cur().kind != tBlockEnd {
			if len(out) > 0 {
				if err := p.expectOp(","); err != nil {
					return nil, err
				}
			}
			x, err := p.parseExpression(true)
			if err != nil {
				return nil, err
			}
			out = append(out, &printStmt{x: x, line: t.line})
		}
		return out, nil
	case "autoescape":
		p.next()
		on, err := p.parseExpression(true)
		if err != nil {
			return nil, err
		}
		body, err := p.parseStatements([]string{"endautoescape"}, true)
		if err != nil {
			return nil, err
		}
		return one(&autoescapeStmt{on: on, body: body}, nil)
	case "break", "continue":
		p.next()
		return one(&loopControlStmt{brk: t.val == "break", line: t.line}, nil)
	case "include", "import", "from", "extends":
		p.next()
		for p.cur().kind != tBlockEnd && p.cur().kind != tEOF {
			p.next()
		}
		return one(&unsupportedStmt{what: t.val, line: t.line}, nil)
	}
	p.tagStack = p.tagStack[:len(p.tagStack)-1]
	err := p.failUnknown(t.val, p.endTokens)
	p.tagStack = append(p.tagStack, t.val)
	return nil, err
}

func (p *parser) parseFor() (stmt, error) {
	line := p.next().line
	tx, err := p.parseTuple(true, true, []string{"in"}, false)
	if err != nil {
		return nil, err
	}
	tg, err := p.toTarget(tx, false)
	if err != nil {
		return nil, err
	}
	if err := p.expectName("in"); err != nil {
		return nil, err
	}
	iter, err := p.parseTuple(false, false, []string{"recursive"}, false)
	if err != nil {
		return nil, err
	}
	var cond expr
	if p.skipName("if") {
		if cond, err = p.parseExpression(true); err != nil {
			return nil, err
		}
	}
	recursive := p.skipName("recursive")
	p.loops++
	closures := p.closures
	body, err := p.parseStatements([]string{"endfor", "else"}, false)
	p.loops--
	// An iteration frame can be reused when nothing in the body can keep
	// a reference to it (a macro or a call block's caller closes over it).
	reuse := p.closures == closures
	if err != nil {
		return nil, err
	}
	var els []stmt
	if p.next().val == "else" {
		if els, err = p.parseStatements([]string{"endfor"}, true); err != nil {
			return nil, err
		}
	}
	return &forStmt{target: tg, iter: iter, cond: cond, body: body, els: els, recursive: recursive, reuseFrame: reuse, line: line}, nil
}

func (p *parser) parseIf() (stmt, error) {
	p.next()
	s := &ifStmt{}
	for {
		test, err := p.parseTuple(false, false, nil, false)
		if err != nil {
			return nil, err
		}
		body, err := p.parseStatements([]string{"elif", "else", "endif"}, false)
		if err != nil {
			return nil, err
		}
		s.tests = append(s.tests, test)
		s.bodies = append(s.bodies, body)
		switch p.next().val {
		case "elif":
			continue
		case "else":
			if s.els, err = p.parseStatements([]string{"endif"}, true); err != nil {
				return nil, err
			}
		}
		return s, nil
	}
}

func (p *parser) parseSet() (stmt, error) {
	line := p.next().line
	tx, err := p.parseTuple(true, true, nil, true)
	if err != nil {
		return nil, err
	}
	tg, err := p.toTarget(tx, true)
	if err != nil {
		return nil, err
	}
	if p.skipOp("=") {
		x, err := p.parseTuple(false, true, nil, false)
		if err != nil {
			return nil, err
		}
		return &setStmt{target: tg, x: x, line: line}, nil
	}
	fl, err := p.parseFilter(nil, false)
	if err != nil {
		return nil, err
	}
	body, err := p.parseStatements([]string{"endset"}, true)
	if err != nil {
		return nil, err
	}
	var fe *filterExpr
	if fl != nil {
		fe = fl.(*filterExpr)
	}
	return &setBlockStmt{target: tg, filter: fe, body: body, line: line}, nil
}

func (p *parser) parseWith() (stmt, error) {
	p.next()
	s := &withStmt{}
	for p.cur().kind != tBlockEnd {
		if len(s.targets) > 0 {
			if err := p.expectOp(","); err != nil {
				return nil, err
			}
		}
		tx, err := p.parseTuple(true, true, nil, false)
		if err != nil {
			return nil, err
		}
		tg, err := p.toTarget(tx, false)
		if err != nil {
			return nil, err
		}
		if err := p.expectOp("="); err != nil {
			return nil, err
		}
		v, err := p.parseExpression(true)
		if err != nil {
			return nil, err
		}
		s.targets = append(s.targets, tg)
		s.vals = append(s.vals, v)
	}
	body, err := p.parseStatements([]string{"endwith"}, true)
	if err != nil {
		return nil, err
	}
	s.body = body
	return s, nil
}

func (p *parser) parseSignature(d *macroDef) error {
	if err := p.expectOp("("); err != nil {
		return err
	}
	for !p.isOp(")") {
		if len(d.params) > 0 {
			if err := p.expectOp(","); err != nil {
				return err
			}
		}
		t, err := p.expectKind(tName, "name")
		if err != nil {
			return err
		}
		if p.skipOp("=") {
			x, err := p.parseExpression(true)
			if err != nil {
				return err
			}
			d.defaults = append(d.defaults, x)
		} else if len(d.defaults) > 0 {
			return p.fail("non-default argument follows default argument")
		}
		d.params = append(d.params, t.val)
		if t.val == "caller" {
			d.explicitCallr = true
		}
	}
	p.next()
	return nil
}

// macroBody parses the body of a macro or call block while recording
// whether it reads varargs, kwargs or caller (jinja's find_undeclared).
func (p *parser) macroBody(d *macroDef, end string) error {
	p.closures++
	saved := p.loops
	p.loops = 0
	p.macros = append(p.macros, d)
	body, err := p.parseStatements([]string{end}, true)
	p.macros = p.macros[:len(p.macros)-1]
	p.loops = saved
	d.body = body
	return err
}

func (p *parser) parseMacro() (stmt, error) {
	p.next()
	t, err := p.expectKind(tName, "name")
	if err != nil {
		return nil, err
	}
	d := &macroDef{name: t.val}
	if err := p.parseSignature(d); err != nil {
		return nil, err
	}
	if err := p.macroBody(d, "endmacro"); err != nil {
		return nil, err
	}
	return &macroStmt{def: d}, nil
}

func (p *parser) parseCallBlock() (stmt, error) {
	line := p.next().line
	d := &macroDef{name: "caller"}
	if p.isOp("(") {
		if err := p.parseSignature(d); err != nil {
			return nil, err
		}
	}
	x, err := p.parseExpression(true)
	if err != nil {
		return nil, err
	}
	call, ok := x.(*callExpr)
	if !ok {
		return nil, syntaxErr(line, "expected call")
	}
	if err := p.macroBody(d, "endcall"); err != nil {
		return nil, err
	}
	return &callBlockStmt{call: call, caller: d, line: line}, nil
}

func (p *parser) parseFilterBlock() (stmt, error) {
	line := p.next().line
	fl, err := p.parseFilter(nil, true)
	if err != nil {
		return nil, err
	}
	body, err := p.parseStatements([]string{"endfilter"}, true)
	if err != nil {
		return nil, err
	}
	return &filterBlockStmt{filter: fl.(*filterExpr), body: body, line: line}, nil
}

func (p *parser) parseBlock() (stmt, error) {
	p.next()
	t, err := p.expectKind(tName, "name")
	if err != nil {
		return nil, err
	}
	scoped := p.skipName("scoped")
	p.skipName("required")
	if p.isOp("-") {
		return nil, p.fail("Block names in Jinja have to be valid Python identifiers and may not contain hyphens, use an underscore instead.")
	}
	saved := p.macros
	p.macros = nil
	body, err := p.parseStatements([]string{"endblock"}, true)
	p.macros = saved
	if err != nil {
		return nil, err
	}
	p.skipName(t.val)
	return &blockStmt{body: body, scoped: scoped}, nil
}

// nsRefExpr is "ns.attr" on the left of a set; it never evaluates.
type nsRefExpr struct {
	name, attr string
	line       int
}

func (n *nsRefExpr) eval(*renderer, *frame) (Value, error) {
	return nil, errf("TemplateRuntimeError", "namespace reference used as a value")
}

// toTarget checks that x can be assigned to (can_assign) and converts it.
func (p *parser) toTarget(x expr, withNS bool) (target, error) {
	switch n := x.(type) {
	case *nameExpr:
		return target{name: n.name, line: n.line}, nil
	case *nsRefExpr:
		if withNS {
			return target{name: n.name, attr: n.attr, nsRef: true, line: n.line}, nil
		}
	case *tupleExpr:
		tg := target{tuple: []target{}}
		for _, it := range n.items {
			sub, err := p.toTarget(it, withNS)
			if err != nil {
				return target{}, err
			}
			tg.tuple = append(tg.tuple, sub)
		}
		return tg, nil
	}
	return target{}, p.fail("can't assign to '%s'", exprKindName(x))
}

func exprKindName(x expr) string {
	switch x.(type) {
	case *constExpr:
		return "const"
	case *listExpr:
		return "list"
	case *dictExpr:
		return "dict"
	case *callExpr:
		return "call"
	case *getattrExpr:
		return "getattr"
	case *getitemExpr:
		return "getitem"
	}
	return "expression"
}

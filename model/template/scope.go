package template

// Scoping follows jinja2/idtracking.py. Names are resolved at render time
// through the chain of frames, which gives Jinja2's results except for one
// case that only the compile-time analysis sees: a name assigned in a frame
// (by set, a macro definition, ...) whose first mention in that frame is
// the assignment, and which no enclosing frame mentions, starts the frame
// *undefined* (VAR_LOAD_UNDEFINED): until the assignment runs it hides any
// context variable of the same name, also from nested loops and macros.
//
//	{% for i in x %}{% for j in y %}{{ v }}{% endfor %}{% set v = 1 %}{% endfor %}
//
// prints "" for v even when the context has v. analyzeScopes computes
// those names for every frame (decl) and the renderer pre-binds them to
// unbound.

type symKind uint8

const (
	symParam symKind = iota + 1
	symResolve
	symAlias
	symUndefined
)

type symtab struct {
	parent *symtab
	refs   map[string]symKind
	stores map[string]bool
}

func newSymtab(parent *symtab) *symtab {
	return &symtab{parent: parent, refs: map[string]symKind{}, stores: map[string]bool{}}
}

func (s *symtab) findRef(name string) bool {
	for t := s; t != nil; t = t.parent {
		if _, ok := t.refs[name]; ok {
			return true
		}
	}
	return false
}

func (s *symtab) load(name string) {
	if !s.findRef(name) {
		s.refs[name] = symResolve
	}
}

func (s *symtab) store(name string) {
	s.stores[name] = true
	if _, ok := s.refs[name]; ok {
		return
	}
	if s.parent != nil && s.parent.findRef(name) {
		s.refs[name] = symAlias
		return
	}
	s.refs[name] = symUndefined
}

func (s *symtab) param(name string) {
	s.stores[name] = true
	s.refs[name] = symParam
}

func (s *symtab) copy() *symtab {
	c := newSymtab(s.parent)
	for k, v := range s.refs {
		c.refs[k] = v
	}
	for k := range s.stores {
		c.stores[k] = true
	}
	return c
}

// branchUpdate merges the symbols of an if statement's branches: a name
// first stored inside a branch is resolved (or aliased) at frame start,
// never undefined.
func (s *symtab) branchUpdate(branches []*symtab) {
	stores := map[string]bool{}
	for _, b := range branches {
		for k := range b.stores {
			if !s.stores[k] {
				stores[k] = true
			}
		}
	}
	for _, b := range branches {
		for k, v := range b.refs {
			s.refs[k] = v
		}
		for k := range b.stores {
			s.stores[k] = true
		}
	}
	for name := range stores {
		if s.parent != nil && s.parent.findRef(name) {
			s.refs[name] = symAlias
		} else {
			s.refs[name] = symResolve
		}
	}
}

// undefinedNames lists the frame's names that start undefined.
func (s *symtab) undefinedNames() []string {
	var out []string
	for k, v := range s.refs {
		if v == symUndefined {
			out = append(out, k)
		}
	}
	return out
}

// frameScan is FrameSymbolVisitor over one frame's own statements; nested
// frames are collected to be analyzed afterwards with this frame as parent.
type frameScan struct {
	sym    *symtab
	nested []func(parent *symtab)
}

// analyzeFrame analyzes a frame body and returns its undefined-at-start
// names; params are the frame's parameters (loop targets, macro arguments).
func analyzeFrame(body []stmt, parent *symtab, params []string) ([]string, *symtab) {
	fs := &frameScan{sym: newSymtab(parent)}
	for _, p := range params {
		fs.sym.param(p)
	}
	fs.stmts(body)
	for _, n := range fs.nested {
		n(fs.sym)
	}
	return fs.sym.undefinedNames(), fs.sym
}

func targetNames(t target, out []string) []string {
	if t.tuple != nil {
		for _, s := range t.tuple {
			out = targetNames(s, out)
		}
		return out
	}
	if !t.nsRef {
		out = append(out, t.name)
	}
	return out
}

func (fs *frameScan) storeTarget(t target) {
	if t.nsRef {
		fs.sym.load(t.name)
		return
	}
	for _, n := range targetNames(t, nil) {
		fs.sym.store(n)
	}
}

// branch runs visit on a copy of the symbols and returns the copy.
func (fs *frameScan) branch(visit func()) *symtab {
	orig := fs.sym
	fs.sym = orig.copy()
	visit()
	b := fs.sym
	fs.sym = orig
	return b
}

func (fs *frameScan) stmts(body []stmt) {
	for _, s := range body {
		fs.stmt(s)
	}
}

func (fs *frameScan) stmt(s stmt) {
	switch n := s.(type) {
	case *printStmt:
		fs.expr(n.x)
	case *ifStmt:
		// Jinja2 keeps elifs as a list of If nodes; visit_If makes three
		// branches: the body, all elifs in turn, and the else.
		fs.expr(n.tests[0])
		bodySym := fs.branch(func() { fs.stmts(n.bodies[0]) })
		elifSym := fs.branch(func() {
			for k := 1; k < len(n.tests); k++ {
				fs.expr(n.tests[k])
				b := fs.branch(func() { fs.stmts(n.bodies[k]) })
				fs.sym.branchUpdate([]*symtab{b, fs.sym.copy(), fs.sym.copy()})
			}
		})
		elseSym := fs.branch(func() { fs.stmts(n.els) })
		fs.sym.branchUpdate([]*symtab{bodySym, elifSym, elseSym})
	case *forStmt:
		fs.expr(n.iter)
		fs.nested = append(fs.nested, func(p *symtab) {
			params := append(targetNames(n.target, nil), "loop")
			n.decl, _ = analyzeFrame(n.body, p, params)
			n.elseDecl, _ = analyzeFrame(n.els, p, nil)
		})
	case *setStmt:
		fs.expr(n.x)
		fs.storeTarget(n.target)
	case *setBlockStmt:
		fs.storeTarget(n.target)
		fs.nested = append(fs.nested, func(p *symtab) { n.decl, _ = analyzeFrame(n.body, p, nil) })
	case *withStmt:
		for _, v := range n.vals {
			fs.expr(v)
		}
		fs.nested = append(fs.nested, func(p *symtab) {
			var params []string
			for _, t := range n.targets {
				params = targetNames(t, params)
			}
			n.decl, _ = analyzeFrame(n.body, p, params)
		})
	case *macroStmt:
		fs.sym.store(n.def.name)
		fs.nested = append(fs.nested, func(p *symtab) { analyzeMacro(n.def, p) })
	case *callBlockStmt:
		fs.expr(n.call)
		fs.nested = append(fs.nested, func(p *symtab) { analyzeMacro(n.caller, p) })
	case *filterBlockStmt:
		fs.nested = append(fs.nested, func(p *symtab) { n.decl, _ = analyzeFrame(n.body, p, nil) })
	case *blockStmt:
		fs.nested = append(fs.nested, func(p *symtab) { n.decl, _ = analyzeFrame(n.body, p, nil) })
	case *autoescapeStmt:
		fs.expr(n.on)
		fs.nested = append(fs.nested, func(p *symtab) { n.decl, _ = analyzeFrame(n.body, p, nil) })
	}
}

func analyzeMacro(d *macroDef, parent *symtab) {
	params := append([]string(nil), d.params...)
	if d.callerUsed {
		params = append(params, "caller")
	}
	if d.catchKwargs {
		params = append(params, "kwargs")
	}
	if d.catchVarargs {
		params = append(params, "varargs")
	}
	fs := &frameScan{sym: newSymtab(parent)}
	for _, p := range params {
		fs.sym.param(p)
	}
	for _, x := range d.defaults {
		fs.expr(x)
	}
	fs.stmts(d.body)
	for _, n := range fs.nested {
		n(fs.sym)
	}
	d.decl = fs.sym.undefinedNames()
}

// expr records the names x reads.
func (fs *frameScan) expr(x expr) {
	switch n := x.(type) {
	case nil:
	case *nameExpr:
		fs.sym.load(n.name)
	case *foldExpr:
		fs.expr(n.x)
	case *filterExpr:
		fs.expr(n.node)
		fs.callArgs(n.call)
	case *testExpr:
		fs.expr(n.node)
		fs.callArgs(n.call)
	case *condExpr:
		fs.expr(n.test)
		fs.expr(n.then)
		fs.expr(n.els)
	case *listExpr:
		fs.exprs(n.items)
	case *tupleExpr:
		fs.exprs(n.items)
	case *dictExpr:
		fs.exprs(n.keys)
		fs.exprs(n.vals)
	case *getattrExpr:
		fs.expr(n.obj)
	case *getitemExpr:
		fs.expr(n.obj)
		fs.expr(n.key)
	case *sliceExpr:
		fs.expr(n.start)
		fs.expr(n.stop)
		fs.expr(n.step)
	case *callExpr:
		fs.expr(n.fn)
		fs.exprs(n.args)
		fs.exprs(n.kwVals)
		fs.expr(n.dynArgs)
		fs.expr(n.dynKwargs)
	case *binExpr:
		fs.expr(n.l)
		fs.expr(n.r)
	case *addChain:
		fs.exprs(n.items)
	case *concatExpr:
		fs.exprs(n.items)
	case *compareExpr:
		fs.expr(n.first)
		fs.exprs(n.rest)
	case *andExpr:
		fs.expr(n.l)
		fs.expr(n.r)
	case *orExpr:
		fs.expr(n.l)
		fs.expr(n.r)
	case *notExpr:
		fs.expr(n.x)
	case *negExpr:
		fs.expr(n.x)
	case *posExpr:
		fs.expr(n.x)
	}
}

func (fs *frameScan) exprs(xs []expr) {
	for _, x := range xs {
		fs.expr(x)
	}
}

func (fs *frameScan) callArgs(a callArgs) {
	fs.exprs(a.args)
	fs.exprs(a.kwVals)
	fs.expr(a.dynArgs)
	fs.expr(a.dynKwargs)
}

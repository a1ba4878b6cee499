package template

import "strings"

func (s *dataStmt) exec(r *renderer, _ *frame) error { return r.write(s.s) }

func (st *printStmt) exec(r *renderer, f *frame) error {
	if err := r.step(); err != nil {
		return err
	}
	if ac, ok := st.x.(*addChain); ok && !r.autoescape {
		// {{ 'a' + b + 'c' }} of plain strings: write the parts, skipping the
		// concatenated copy.
		var buf [8]Value
		vals, n, err := ac.parts(r, f, buf[:])
		if err != nil {
			return withLine(err, st.line)
		}
		if n >= 0 {
			if err := r.charge(n >> 6); err != nil {
				return err
			}
			for _, v := range vals {
				if err := r.write(v.(string)); err != nil {
					return err
				}
			}
			return nil
		}
		v, err := ac.fold(r, vals)
		if err != nil {
			return withLine(err, st.line)
		}
		return st.emit(r, v)
	}
	v, err := st.x.eval(r, f)
	if err != nil {
		return withLine(err, st.line)
	}
	return st.emit(r, v)
}

func (st *printStmt) emit(r *renderer, v Value) error {
	if str, ok := v.(string); ok {
		if r.autoescape {
			str = htmlEscape(str)
		}
		return r.write(str)
	}
	s, err := r.str(v)
	if err != nil {
		return withLine(err, st.line)
	}
	if _, ok := v.(Markup); !ok && r.autoescape {
		s = htmlEscape(s)
	}
	return r.write(s)
}

func (s *ifStmt) exec(r *renderer, f *frame) error {
	if err := r.step(); err != nil {
		return err
	}
	for i, t := range s.tests {
		v, err := t.eval(r, f)
		if err != nil {
			return err
		}
		if truth(v) {
			return r.execBody(s.bodies[i], f)
		}
	}
	return r.execBody(s.els, f)
}

func (s *forStmt) exec(r *renderer, f *frame) error {
	v, err := s.iter.eval(r, f)
	if err != nil {
		return withLine(err, s.line)
	}
	return r.runLoop(s, f, v, 0)
}

// runLoop runs a for loop over v; depth0 > 0 for recursive loop(...) calls.
func (r *renderer) runLoop(s *forStmt, f *frame, v Value, depth0 int) error {
	items, err := r.iterate(v)
	if err != nil {
		return withLine(err, s.line)
	}
	if s.cond != nil {
		var kept []Value
		for _, it := range items {
			if err := r.step(); err != nil {
				return err
			}
			tf := newFrame(f, nil)
			if err := r.assign(tf, s.target, it); err != nil {
				return withLine(err, s.line)
			}
			c, err := s.cond.eval(r, tf)
			if err != nil {
				return withLine(err, s.line)
			}
			if truth(c) {
				kept = append(kept, it)
			}
		}
		items = kept
	}
	if len(items) == 0 {
		return r.execBody(s.els, newFrame(f, s.elseDecl))
	}
	lc := &loopCtx{items: items, depth0: depth0, stmt: s, frame: f}
	var fr *frame
	for i, it := range items {
		if err := r.step(); err != nil {
			return err
		}
		lc.i = i
		if fr == nil || !s.reuseFrame {
			fr = newFrame(f, s.decl)
		} else {
			clear(fr.vals)
			fr.names, fr.vals = fr.names[:0], fr.vals[:0]
			fr.declare(s.decl)
		}
		fr.names = append(fr.names, "loop")
		fr.vals = append(fr.vals, lc)
		if err := r.assign(fr, s.target, it); err != nil {
			return withLine(err, s.line)
		}
		err := r.execBody(s.body, fr)
		if err == errBreak {
			break
		}
		if err != nil && err != errContinue {
			return err
		}
	}
	return nil
}

// assign binds a target (name, tuple unpacking or namespace attribute).
func (r *renderer) assign(f *frame, t target, v Value) error {
	switch {
	case t.nsRef:
		nv, _ := r.lookup(f, t.name)
		ns, ok := nv.(*namespace)
		if !ok {
			return runtimeErrorf("cannot assign attribute on non-namespace object")
		}
		ns.attrs.SetString(t.attr, v)
		return nil
	case t.tuple != nil:
		items, err := r.iterate(v)
		if err != nil {
			return typeErrorf("cannot unpack non-iterable %s object", typeName(v))
		}
		if len(items) != len(t.tuple) {
			if len(items) > len(t.tuple) {
				return valueErrorf("too many values to unpack (expected %d)", len(t.tuple))
			}
			return valueErrorf("not enough values to unpack (expected %d, got %d)", len(t.tuple), len(items))
		}
		for i, sub := range t.tuple {
			if err := r.assign(f, sub, items[i]); err != nil {
				return err
			}
		}
		return nil
	}
	f.set(t.name, v)
	return nil
}

func (s *setStmt) exec(r *renderer, f *frame) error {
	if err := r.step(); err != nil {
		return err
	}
	v, err := s.x.eval(r, f)
	if err != nil {
		return withLine(err, s.line)
	}
	return withLine(r.assign(f, s.target, v), s.line)
}

func (s *setBlockStmt) exec(r *renderer, f *frame) error {
	if err := r.step(); err != nil {
		return err
	}
	out, err := r.capture(s.body, newFrame(f, s.decl))
	if err != nil {
		return err
	}
	var v Value = out
	if r.autoescape {
		v = Markup(out)
	}
	if s.filter != nil {
		if v, err = r.applyFilterChain(s.filter, v, f); err != nil {
			return withLine(err, s.line)
		}
	}
	return withLine(r.assign(f, s.target, v), s.line)
}

// applyFilterChain applies a filter chain whose innermost node is nil to v.
func (r *renderer) applyFilterChain(fe *filterExpr, v Value, f *frame) (Value, error) {
	if fe.node != nil {
		inner, ok := fe.node.(*filterExpr)
		if !ok {
			return nil, errf("TemplateRuntimeError", "BUG: filter chain")
		}
		var err error
		if v, err = r.applyFilterChain(inner, v, f); err != nil {
			return nil, err
		}
	}
	return r.callFilter(fe, v, f)
}

func (s *withStmt) exec(r *renderer, f *frame) error {
	vals := make([]Value, len(s.vals))
	for i, x := range s.vals {
		v, err := x.eval(r, f)
		if err != nil {
			return err
		}
		vals[i] = v
	}
	fr := newFrame(f, s.decl)
	for i, t := range s.targets {
		if err := r.assign(fr, t, vals[i]); err != nil {
			return err
		}
	}
	return r.execBody(s.body, fr)
}

func (s *macroStmt) exec(_ *renderer, f *frame) error {
	f.set(s.def.name, &macro{def: s.def, closure: f})
	return nil
}

func (s *callBlockStmt) exec(r *renderer, f *frame) error {
	if err := r.step(); err != nil {
		return err
	}
	caller := &macro{def: s.caller, closure: f}
	v, err := r.evalCall(s.call, f, caller)
	if err != nil {
		return withLine(err, s.line)
	}
	return r.write(pyStr(v))
}

func (s *filterBlockStmt) exec(r *renderer, f *frame) error {
	if err := r.step(); err != nil {
		return err
	}
	out, err := r.capture(s.body, newFrame(f, s.decl))
	if err != nil {
		return err
	}
	v, err := r.applyFilterChain(s.filter, out, f)
	if err != nil {
		return withLine(err, s.line)
	}
	return r.write(pyStr(v))
}

func (s *blockStmt) exec(r *renderer, f *frame) error {
	parent := r.root
	if s.scoped {
		parent = f
	}
	return r.execBody(s.body, newFrame(parent, s.decl))
}

func (s *autoescapeStmt) exec(r *renderer, f *frame) error {
	v, err := s.on.eval(r, f)
	if err != nil {
		return err
	}
	saved := r.autoescape
	r.autoescape = truth(v)
	err = r.execBody(s.body, newFrame(f, s.decl))
	r.autoescape = saved
	return err
}

func (s *loopControlStmt) exec(*renderer, *frame) error {
	if s.brk {
		return errBreak
	}
	return errContinue
}

func (s *unsupportedStmt) exec(*renderer, *frame) error {
	return &Error{Kind: "TypeError", Msg: "no loader for this environment specified", Line: s.line}
}

// htmlEscape is markupsafe.escape.
func htmlEscape(s string) string {
	if !strings.ContainsAny(s, "&<>'\"") {
		return s
	}
	return htmlReplacer.Replace(s)
}

var htmlReplacer = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", "'", "&#39;", "\"", "&#34;")

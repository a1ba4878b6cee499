package template

// ContentFormat is the content format vLLM's --chat-template-content-format
// auto detects for the template Chat.Apply uses (Template(hasTools)):
// "openai" when the template loops over a message's content, as in
// {% for part in message['content'] %}, so content must reach it as a list
// of parts; "string" otherwise, and when the template cannot be picked.
func (c *Chat) ContentFormat(hasTools bool) string {
	t, err := c.Template(hasTools)
	if err != nil {
		return "string"
	}
	return t.ContentFormat()
}

// ContentFormat is vLLM's _detect_content_format on t (chat_utils.py): it
// follows the names assigned from messages ({% set msgs = messages[1:] %},
// filters and tests on them included), the loop variables over those, and
// reports "openai" when some loop iterates over such a variable's
// "content" (m.content or m['content']). Like vLLM it ignores scoping, and
// falls back to "string" where vLLM's walk would fail (a tuple target).
func (t *Template) ContentFormat() string { return t.format }

func detectContentFormat(body []stmt) string {
	var sets []*setStmt
	var loops []*forStmt
	walkStmts(body, func(s stmt) {
		switch x := s.(type) {
		case *setStmt:
			sets = append(sets, x)
		case *forStmt:
			loops = append(loops, x)
		}
	})
	// _iter_nodes_assign_var_or_elems(root, "messages"), breadth first.
	msgNames := []string{"messages"}
	seen := map[string]bool{"messages": true}
	for q := 0; q < len(msgNames); q++ {
		name := msgNames[q]
		for _, s := range sets {
			if !varOrElems(s.x, name, "") {
				continue
			}
			if s.target.name == "" || s.target.nsRef || len(s.target.tuple) > 0 {
				return "string" // vLLM's assert fails; it falls back
			}
			// vLLM skips only self-assignment, and loops forever on a
			// cycle (a = b, b = a); each name is followed once here.
			if !seen[s.target.name] {
				seen[s.target.name] = true
				msgNames = append(msgNames, s.target.name)
			}
		}
	}
	// Loop variables over the messages.
	var itemNames []string
	for _, l := range loops {
		for _, name := range msgNames {
			if varOrElems(l.iter, name, "") {
				if l.target.name == "" || len(l.target.tuple) > 0 {
					return "string"
				}
				itemNames = append(itemNames, l.target.name)
				break
			}
		}
	}
	for _, l := range loops {
		for _, name := range itemNames {
			if varOrElems(l.iter, name, "content") {
				if l.target.name == "" || len(l.target.tuple) > 0 {
					return "string"
				}
				return "openai"
			}
		}
	}
	return "string"
}

// varOrElems is vLLM's _is_var_or_elems_access: x reads name (or
// name.key / name['key'] when key is set), possibly through filters, tests
// and slices.
func varOrElems(x expr, name, key string) bool {
	x = unfold(x)
	switch n := x.(type) {
	case *filterExpr:
		return n.node != nil && varOrElems(n.node, name, key)
	case *testExpr:
		return varOrElems(n.node, name, key)
	case *getitemExpr:
		if _, ok := unfold(n.key).(*sliceExpr); ok {
			return varOrElems(n.obj, name, key)
		}
	}
	if key == "" {
		v, ok := x.(*nameExpr)
		return ok && v.name == name
	}
	switch n := x.(type) {
	case *getitemExpr:
		v, ok := n.obj.(*nameExpr)
		c, isConst := unfold(n.key).(*constExpr)
		return ok && v.name == name && isConst && c.v == key
	case *getattrExpr:
		v, ok := n.obj.(*nameExpr)
		return ok && v.name == name && n.name == key
	}
	return false
}

// unfold undoes check's constant folding: vLLM reads the tree as Jinja2
// parses it, before the optimizer.
func unfold(x expr) expr {
	if f, ok := x.(*foldExpr); ok {
		return f.x
	}
	return x
}

// walkStmts calls f for every statement in body and in the bodies nested in
// it, macros and call blocks included, as Jinja2's find_all visits them.
func walkStmts(body []stmt, f func(stmt)) {
	for _, s := range body {
		f(s)
		switch x := s.(type) {
		case *ifStmt:
			for _, b := range x.bodies {
				walkStmts(b, f)
			}
			walkStmts(x.els, f)
		case *forStmt:
			walkStmts(x.body, f)
			walkStmts(x.els, f)
		case *setBlockStmt:
			walkStmts(x.body, f)
		case *withStmt:
			walkStmts(x.body, f)
		case *macroStmt:
			walkStmts(x.def.body, f)
		case *callBlockStmt:
			walkStmts(x.caller.body, f)
		case *filterBlockStmt:
			walkStmts(x.body, f)
		case *blockStmt:
			walkStmts(x.body, f)
		case *autoescapeStmt:
			walkStmts(x.body, f)
		}
	}
}

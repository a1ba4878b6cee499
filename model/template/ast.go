package template

// Expression nodes. Each evaluates against a frame (eval.go).
type expr interface {
	eval(r *renderer, f *frame) (Value, error)
}

type (
	constExpr struct{ v Value }
	nameExpr  struct {
		name string
		line int
	}
	listExpr  struct{ items []expr }
	tupleExpr struct{ items []expr }
	dictExpr  struct{ keys, vals []expr }
	// getattrExpr is obj.name.
	getattrExpr struct {
		obj  expr
		name string
		line int
	}
	// getitemExpr is obj[key]; key may be a sliceExpr.
	getitemExpr struct {
		obj, key expr
		line     int
	}
	sliceExpr struct{ start, stop, step expr } // nil parts are omitted
	callExpr  struct {
		fn        expr
		args      []expr
		kwNames   []string
		kwVals    []expr
		dynArgs   expr
		dynKwargs expr
		line      int
	}
	filterExpr struct {
		node expr // nil in {% filter %} blocks and {% set x | f %}
		name string
		fn   *filterDef
		call callArgs
		line int
	}
	testExpr struct {
		node expr
		name string
		fn   *testDef
		call callArgs
		line int
	}
	binExpr struct {
		op   string // + - * / // % **
		l, r expr
		line int
	}
	// addChain is a left-associative run of "+" (a + b + c ...), joined in
	// one allocation when every operand is a plain string.
	addChain struct {
		items []expr
		line  int
	}
	concatExpr  struct{ items []expr } // a ~ b ~ c
	compareExpr struct {
		first expr
		ops   []string // eq ne lt lteq gt gteq in notin
		rest  []expr
		line  int
	}
	andExpr struct {
		l, r   expr
		rConst bool // set by check: r can be folded
	}
	orExpr struct {
		l, r   expr
		rConst bool
	}
	notExpr struct{ x expr }
	negExpr struct {
		x    expr
		line int
	}
	posExpr struct {
		x    expr
		line int
	}
	condExpr struct {
		test, then, els     expr // els may be nil
		line                int
		thenConst, elsConst bool // set by check: the branch can be folded
	}
)

// callArgs are the arguments of a filter or test call.
type callArgs struct {
	args      []expr
	kwNames   []string
	kwVals    []expr
	dynArgs   expr
	dynKwargs expr
}

// Statement nodes. Each renders into the renderer's output (render.go).
type stmt interface {
	exec(r *renderer, f *frame) error
}

type (
	dataStmt  struct{ s string }
	printStmt struct {
		x    expr
		line int
	}
	ifStmt struct {
		tests  []expr
		bodies [][]stmt
		els    []stmt
	}
	forStmt struct {
		target     target
		iter       expr
		cond       expr
		body       []stmt
		els        []stmt
		recursive  bool
		reuseFrame bool
		line       int
		decl       []string // names the iteration frame starts undefined (scope.go)
		elseDecl   []string
	}
	setStmt struct {
		target target
		x      expr
		line   int
	}
	setBlockStmt struct {
		target target
		filter *filterExpr // chain, innermost node nil
		body   []stmt
		line   int
		decl   []string
	}
	withStmt struct {
		targets []target
		vals    []expr
		body    []stmt
		decl    []string
	}
	macroStmt     struct{ def *macroDef }
	callBlockStmt struct {
		call   *callExpr
		caller *macroDef
		line   int
	}
	filterBlockStmt struct {
		filter *filterExpr
		body   []stmt
		line   int
		decl   []string
	}
	blockStmt struct {
		body   []stmt
		scoped bool
		decl   []string
	}
	autoescapeStmt struct {
		on   expr
		body []stmt
		decl []string
	}
	loopControlStmt struct {
		brk  bool
		line int
	}
	// unsupportedStmt parses (include, import, extends) but fails when run,
	// as Jinja2 does without a loader.
	unsupportedStmt struct {
		what string
		line int
	}
)

// target is the left side of set/for/with: a name, a namespace attribute
// (set only) or a tuple of targets.
type target struct {
	name  string
	attr  string // ns.attr when nsRef
	nsRef bool
	tuple []target
	line  int
}

type macroDef struct {
	name          string
	params        []string
	defaults      []expr // aligned to the last len(defaults) params
	body          []stmt
	catchVarargs  bool
	catchKwargs   bool
	callerUsed    bool
	explicitCallr bool     // "caller" is one of the params
	decl          []string // names the call frame starts undefined (scope.go)
}

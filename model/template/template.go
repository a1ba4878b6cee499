package template

import (
	"strings"
	"time"
)

// Template is a compiled template. It is immutable and safe for concurrent
// use: every Render works on its own state.
type Template struct {
	body []stmt
	decl []string // names the top-level frame starts undefined (scope.go)
	// format is the content format vLLM detects for it (ContentFormat).
	format string
}

// Limits bound one render so that no template, however hostile, can run
// forever or exhaust memory. Zero fields take the defaults.
type Limits struct {
	// MaxOutputBytes caps the rendered text and any single string or list
	// a template builds (default 64 MiB, at most 128 MiB).
	MaxOutputBytes int
	// MaxSteps caps the work of a render in steps: one per statement, loop
	// iteration, call and filter, one per item a filter or loop walks, and
	// one per 64 bytes of text built (default 50,000,000; a Qwen3 chat of
	// 8,000 tokens takes a few thousand).
	MaxSteps int
	// MaxDepth caps nested macro calls and recursive loops (default 200;
	// CPython's recursion limit stops Jinja2 at a similar depth).
	MaxDepth int
}

// Options configure one render.
type Options struct {
	// Now is the clock that strftime_now reads; Python passes
	// datetime.now(), a naive local time, so %z and %Z print "". When Now is
	// the zero time, strftime_now fails.
	Now time.Time
	Limits
}

const (
	defaultMaxOutput = 64 << 20
	defaultMaxSteps  = 50_000_000
	defaultMaxDepth  = 200
	// maxRange is jinja2.sandbox.MAX_RANGE.
	maxRange = 100000
)

// Compile parses src with the settings transformers uses for chat
// templates (trim_blocks, lstrip_blocks, loopcontrols). Unknown filters and
// tests are compile errors, as in Jinja2.
func Compile(src string) (*Template, error) {
	body, err := parse(src)
	if err != nil {
		return nil, err
	}
	decl, _ := analyzeFrame(body, nil, nil)
	return &Template{body: body, decl: decl, format: detectContentFormat(body)}, nil
}

// Render renders t with ctx as the template's variables (nil means none),
// default limits and no clock.
func (t *Template) Render(ctx *Dict) (string, error) {
	return t.Execute(ctx, Options{})
}

// RenderMap is Render for a Go map; values go through FromGo.
func (t *Template) RenderMap(ctx map[string]any) (string, error) {
	d := NewDict(len(ctx))
	for k, v := range ctx {
		c, err := FromGo(v)
		if err != nil {
			return "", err
		}
		d.SetString(k, c)
	}
	return t.Execute(d, Options{})
}

// Execute renders t with ctx and opts. Errors are *Error values; a
// template's raise_exception(msg) gives Kind "TemplateError".
func (t *Template) Execute(ctx *Dict, opts Options) (string, error) {
	if opts.MaxOutputBytes <= 0 {
		opts.MaxOutputBytes = defaultMaxOutput
	}
	opts.MaxOutputBytes = min(opts.MaxOutputBytes, maxReprBytes)
	if opts.MaxSteps <= 0 {
		opts.MaxSteps = defaultMaxSteps
	}
	if opts.MaxDepth <= 0 {
		opts.MaxDepth = defaultMaxDepth
	}
	if ctx == nil {
		ctx = NewDict(0)
	}
	r := &renderer{ctx: ctx, opts: opts}
	r.root = newFrame(nil, t.decl)
	r.out = &strings.Builder{}
	// Chat templates mostly copy the context's text; sizing the output by it
	// saves the builder's regrowth.
	r.out.Grow(min(textSize(ctx, 0)+512, opts.MaxOutputBytes))
	if err := r.execBody(t.body, r.root); err != nil {
		return "", err
	}
	return r.out.String(), nil
}

// textSize sums the lengths of the strings in v, a few levels deep.
func textSize(v Value, depth int) int {
	if depth > 6 {
		return 0
	}
	n := 0
	switch x := v.(type) {
	case string:
		return len(x)
	case List:
		for _, e := range x {
			n += textSize(e, depth+1)
		}
	case *Dict:
		for _, e := range x.ents {
			n += textSize(e.val, depth+1)
		}
	}
	return n
}

// renderer is the state of one render. It is never shared.
type renderer struct {
	ctx        *Dict
	opts       Options
	root       *frame
	out        *strings.Builder
	steps      int
	depth      int
	autoescape bool
	constMode  int // > 0 while a foldExpr evaluates as Jinja2's optimizer
}

// frame is one variable scope. Loop iterations, macros, with blocks, call
// and filter blocks open a frame; if blocks do not, as in Jinja2.
type frame struct {
	parent *frame
	names  []string
	vals   []Value
	nbuf   [4]string
	vbuf   [4]Value
}

// unbound marks a name that a frame assigns later and that is undefined
// until then (scope.go); lookups stop there.
type unboundT struct{}

var unbound Value = unboundT{}

func newFrame(parent *frame, decl []string) *frame {
	f := &frame{parent: parent}
	f.names, f.vals = f.nbuf[:0], f.vbuf[:0]
	f.declare(decl)
	return f
}

func (f *frame) declare(decl []string) {
	for _, n := range decl {
		f.names = append(f.names, n)
		f.vals = append(f.vals, unbound)
	}
}

func (f *frame) set(name string, v Value) {
	for i, n := range f.names {
		if n == name {
			f.vals[i] = v
			return
		}
	}
	f.names = append(f.names, name)
	f.vals = append(f.vals, v)
}

// lookup resolves name: local frames, then the context, then the globals.
func (r *renderer) lookup(f *frame, name string) (Value, bool) {
	for ; f != nil; f = f.parent {
		for i := len(f.names) - 1; i >= 0; i-- {
			if f.names[i] == name {
				if f.vals[i] == unbound {
					return nil, false
				}
				return f.vals[i], true
			}
		}
	}
	if v, ok := r.ctx.GetString(name); ok {
		return v, true
	}
	if g, ok := globals[name]; ok {
		return g, true
	}
	return nil, false
}

func (r *renderer) step() error {
	r.steps++
	if r.steps > r.opts.MaxSteps {
		return errf("LimitError", "render exceeded %d steps", r.opts.MaxSteps)
	}
	return nil
}

// charge adds work units: one per item materialized and one per 64 bytes
// built, so that MaxSteps bounds the time of a render, not only its count
// of statements.
func (r *renderer) charge(units int) error {
	r.steps += units
	if r.steps > r.opts.MaxSteps {
		return errf("LimitError", "render exceeded %d steps", r.opts.MaxSteps)
	}
	return nil
}

// str is pyStr for output: it charges the bytes built and enforces the
// output limit.
func (r *renderer) str(v Value) (string, error) {
	s, ok := pyStrLimit(v, r.opts.MaxOutputBytes)
	if err := r.charge(len(s) >> 6); err != nil {
		return "", err
	}
	if !ok {
		return "", errf("LimitError", "result exceeds the %d-byte limit", r.opts.MaxOutputBytes)
	}
	return s, nil
}

func (r *renderer) checkLen(n int) error {
	if n > r.opts.MaxOutputBytes {
		return errf("LimitError", "result of %d bytes exceeds the %d-byte limit", n, r.opts.MaxOutputBytes)
	}
	return nil
}

func (r *renderer) write(s string) error {
	if r.out.Len()+len(s) > r.opts.MaxOutputBytes {
		return errf("LimitError", "output exceeds %d bytes", r.opts.MaxOutputBytes)
	}
	r.out.WriteString(s)
	return nil
}

// capture renders body into a string instead of the current output.
func (r *renderer) capture(body []stmt, f *frame) (string, error) {
	saved := r.out
	r.out = &strings.Builder{}
	err := r.execBody(body, f)
	s := r.out.String()
	r.out = saved
	return s, err
}

func (r *renderer) enter() error {
	r.depth++
	if r.depth > r.opts.MaxDepth {
		return errf("LimitError", "maximum recursion depth %d exceeded", r.opts.MaxDepth)
	}
	return nil
}

func (r *renderer) leave() { r.depth-- }

func (r *renderer) execBody(body []stmt, f *frame) error {
	for _, s := range body {
		if err := s.exec(r, f); err != nil {
			return err
		}
	}
	return nil
}

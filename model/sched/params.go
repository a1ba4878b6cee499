package sched

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// Param is one documented parameter of a plugin type: its name as in
// llm-d's configs, its default, and what it does. The registry's Params
// are the parameters a plugin accepts and the only source of their
// defaults: Fields returns them for absent keys, and docs/plugins.md lists
// them. The registry's Params are fixed when the package loads.
type Param struct {
	Name string
	// Default is the value an absent key takes: a float64, int, string,
	// bool, time.Duration, []any (a list, of map[string]any for a list of
	// objects) or nil when the key has no default (absent means unset).
	Default any
	// Doc says what the parameter does, in a sentence.
	Doc string
	// Fields are the keys of an object parameter.
	Fields []Param
	// Elem are the keys of each object of a list parameter.
	Elem []Param
}

// Warning is something a document asks for that Inferrail accepts but
// routes without, or that llm-d has deprecated: the caller tells the
// operator once (a log line at load). It is a value.
type Warning struct {
	// Path names the key, as plugins[2].parameters.blockSize.
	Path    string
	Message string
}

func (w Warning) String() string { return w.Path + ": " + w.Message }

// decoding collects the problems and warnings of one document.
type decoding struct {
	errs   []error
	warns  []Warning
	fields []*Fields
}

func (d *decoding) fail(path, format string, args ...any) {
	d.errs = append(d.errs, &PathError{Path: path, Message: fmt.Sprintf(format, args...)})
}

// PathError is one problem of a document, at its key path (as
// plugins[2].parameters.blockSize), so that a caller embedding the
// document in its own config can prefix the path with the document's key.
type PathError struct {
	Path, Message string
}

func (e *PathError) Error() string { return e.Path + ": " + e.Message }

func (d *decoding) warn(path, format string, args ...any) {
	d.warns = append(d.warns, Warning{Path: path, Message: fmt.Sprintf(format, args...)})
}

// Fields reads one plugin's parameters (or one object among them)
// strictly: a key the type does not declare is an error, and so is a value
// of the wrong type or out of range, each reported with its path, as
// plugins[2].parameters.threshold. A read of a declared key returns its
// value, or the key's registered default when the document leaves it out.
// Fields belongs to the decoding of one document.
type Fields struct {
	path   string
	m      map[string]any
	params []Param
	read   []bool
	d      *decoding
}

func (d *decoding) newFields(path string, m map[string]any, params []Param) *Fields {
	f := &Fields{path: path, m: m, params: params, read: make([]bool, len(params)), d: d}
	d.fields = append(d.fields, f)
	return f
}

// parameters returns the Fields of a plugin entry's parameters value, or
// nil after recording the error when it is not an object.
func (d *decoding) parameters(path string, v any, params []Param) *Fields {
	switch m := v.(type) {
	case nil:
		return d.newFields(path, nil, params)
	case map[string]any:
		return d.newFields(path, m, params)
	default:
		d.fail(path, "want a mapping, got %s", Describe(v))
		return nil
	}
}

// finish reports the keys no Fields declares.
func (d *decoding) finish() {
	for _, f := range d.fields {
		keys := make([]string, 0, len(f.m))
		for k := range f.m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if !slices.ContainsFunc(f.params, func(p Param) bool { return p.Name == k }) {
				d.fail(f.key(k), "unknown key")
			}
		}
	}
}

// unread returns the declared parameters no read has asked for, anywhere
// in the document; a plugin reads every parameter it declares on every
// decoding, so a documented key is always checked.
func (d *decoding) unread() []string {
	var out []string
	for _, f := range d.fields {
		for i, r := range f.read {
			if !r {
				out = append(out, f.key(f.params[i].Name))
			}
		}
	}
	return out
}

func (f *Fields) key(name string) string {
	if f.path == "" {
		return name
	}
	return f.path + "." + name
}

// raw returns name's value as the document gives it, unchecked.
func (f *Fields) raw(name string) any {
	v, _, _ := f.lookup(name)
	return v
}

// lookup returns name's value in the document, or its default, and
// whether the document set it.
func (f *Fields) lookup(name string) (any, bool, *Param) {
	i := slices.IndexFunc(f.params, func(p Param) bool { return p.Name == name })
	if i < 0 {
		panic("BUG: sched: parameter " + name + " is not declared at " + f.path)
	}
	f.read[i] = true
	p := &f.params[i]
	if v, ok := f.m[name]; ok && v != nil {
		return v, true, p
	}
	return p.Default, false, p
}

// Set reports whether the document gives name a value.
func (f *Fields) Set(name string) bool {
	_, set, _ := f.lookup(name)
	return set
}

// Fail records a problem with name's value.
func (f *Fields) Fail(name, format string, args ...any) { f.d.fail(f.key(name), format, args...) }

// Warn records that name's value is accepted but has an effect other than
// llm-d's, or none.
func (f *Fields) Warn(name, format string, args ...any) { f.d.warn(f.key(name), format, args...) }

// Float returns name's value as a finite number.
func (f *Fields) Float(name string) float64 {
	v, _, p := f.lookup(name)
	if v == nil {
		f.Fail(name, "required")
		return 0
	}
	x, ok := Number(v)
	if !ok || math.IsNaN(x) || math.IsInf(x, 0) {
		f.Fail(name, "want a finite number, got %s", Describe(v))
		x, _ = Number(p.Default)
	}
	return x
}

// Int returns name's value as a whole number.
func (f *Fields) Int(name string) int {
	v, _, p := f.lookup(name)
	if v == nil {
		f.Fail(name, "required")
		return 0
	}
	x, ok := Number(v)
	if !ok || x != math.Trunc(x) || math.Abs(x) > 1<<53 {
		f.Fail(name, "want a whole number, got %s", Describe(v))
		x, _ = Number(p.Default)
	}
	return int(x)
}

// String returns name's value as a string.
func (f *Fields) String(name string) string {
	v, _, p := f.lookup(name)
	s, ok := v.(string)
	if !ok && v != nil {
		f.Fail(name, "want a string, got %s", Describe(v))
		s, _ = p.Default.(string)
	}
	return s
}

// Bool returns name's value as a boolean.
func (f *Fields) Bool(name string) bool {
	v, _, p := f.lookup(name)
	b, ok := v.(bool)
	if !ok && v != nil {
		f.Fail(name, "want true or false, got %s", Describe(v))
		b, _ = p.Default.(bool)
	}
	return b
}

// Duration returns name's value, a duration with its unit ("250ms").
func (f *Fields) Duration(name string) time.Duration {
	v, _, p := f.lookup(name)
	switch x := v.(type) {
	case nil:
		f.Fail(name, "required")
		return 0
	case time.Duration:
		return x
	case string:
		d, err := time.ParseDuration(x)
		if err == nil {
			return d
		}
	}
	f.Fail(name, "want a duration with its unit, as \"250ms\", got %s", Describe(v))
	d, _ := p.Default.(time.Duration)
	return d
}

// Strings returns name's value as a list of strings.
func (f *Fields) Strings(name string) []string {
	v, _, _ := f.lookup(name)
	if v == nil {
		return nil
	}
	l, ok := v.([]any)
	if !ok {
		f.Fail(name, "want a list of strings, got %s", Describe(v))
		return nil
	}
	out := make([]string, 0, len(l))
	for i, e := range l {
		s, ok := e.(string)
		if !ok {
			f.d.fail(fmt.Sprintf("%s[%d]", f.key(name), i), "want a string, got %s", Describe(e))
			continue
		}
		out = append(out, s)
	}
	return out
}

// StringMap returns name's value as an object of strings.
func (f *Fields) StringMap(name string) map[string]string {
	v, _, _ := f.lookup(name)
	if v == nil {
		return nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		f.Fail(name, "want a mapping of strings, got %s", Describe(v))
		return nil
	}
	out := make(map[string]string, len(m))
	for k, e := range m {
		s, ok := e.(string)
		if !ok {
			f.d.fail(f.key(name)+"."+k, "want a string, got %s", Describe(e))
			continue
		}
		out[k] = s
	}
	return out
}

// Object returns the Fields of name's value, an object whose keys are the
// parameter's Fields; an absent object reads as all its defaults.
func (f *Fields) Object(name string) *Fields {
	v, _, p := f.lookup(name)
	m, ok := v.(map[string]any)
	if !ok && v != nil {
		f.Fail(name, "want a mapping, got %s", Describe(v))
	}
	return f.d.newFields(f.key(name), m, p.Fields)
}

// List returns the Fields of each object in name's value, a list whose
// objects' keys are the parameter's Elem; an absent list reads as its
// default.
func (f *Fields) List(name string) []*Fields {
	v, _, p := f.lookup(name)
	if v == nil {
		return nil
	}
	l, ok := v.([]any)
	if !ok {
		f.Fail(name, "want a list of mappings, got %s", Describe(v))
		return nil
	}
	out := make([]*Fields, 0, len(l))
	for i, e := range l {
		path := fmt.Sprintf("%s[%d]", f.key(name), i)
		m, ok := e.(map[string]any)
		if !ok {
			f.d.fail(path, "want a mapping, got %s", Describe(e))
			continue
		}
		out = append(out, f.d.newFields(path, m, p.Elem))
	}
	return out
}

// Number converts the numbers a YAML or JSON decoder yields. config's
// checker reads its numbers with it too.
func Number(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case float32:
		return float64(x), true
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	case int32:
		return float64(x), true
	case uint64:
		return float64(x), true
	case uint32:
		return float64(x), true
	}
	return 0, false
}

// Describe names a decoded value for an error message ("the string
// \"x\"", "a list", "the number 3"); config's errors use it too.
func Describe(v any) string {
	switch x := v.(type) {
	case nil:
		return "nothing"
	case string:
		if len(x) > 40 {
			x = x[:40] + "…"
		}
		return fmt.Sprintf("the string %q", x)
	case bool:
		return fmt.Sprint(x)
	case map[string]any, map[any]any:
		return "a mapping"
	case []any:
		return "a list"
	}
	if _, ok := Number(v); ok {
		return fmt.Sprintf("the number %v", v)
	}
	return fmt.Sprintf("a value of type %T", v)
}

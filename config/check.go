package config

import (
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/inferrail/inferrail/model/sched"
)

// checker checks parsed values against the schema (the Config types and
// their koanf tags) before they reach koanf: unknown keys, wrong types,
// durations without units and excessive nesting. It returns values of the
// exact shape mapstructure decodes without surprises, with list entries'
// defaults filled in, and drops what it rejects so decoding still succeeds
// and Validate can report the rest.
type checker struct {
	// errs holds the first maxProblems problems; more counts the rest.
	errs []error
	more int
	// bad holds the paths of rejected values, so Validate's complaints
	// about the same keys (a required key that was rejected) are not
	// reported twice.
	bad map[string]bool
	// source names the variable being checked, for errors; "" for the file.
	source string
}

func (c *checker) fail(path string, err error) {
	c.reject(path)
	if len(c.errs) >= maxProblems {
		c.more++
		return
	}
	c.errs = append(c.errs, &KeyError{Key: path, Env: c.source, Err: err})
}

func (c *checker) reject(path string) {
	if c.bad == nil {
		c.bad = map[string]bool{}
	}
	c.bad[path] = true
}

func (c *checker) failf(path, format string, args ...any) {
	if len(c.errs) >= maxProblems {
		// Past the bound only the count is kept: skip formatting.
		c.fail(path, nil)
		return
	}
	c.fail(path, fmt.Errorf(format, args...))
}

// covers reports whether key is at or under a rejected path.
func (c *checker) covers(key string) bool {
	if len(c.bad) == 0 {
		return false
	}
	for {
		if c.bad[key] {
			return true
		}
		i := strings.LastIndexAny(key, ".[")
		if i < 0 {
			return false
		}
		key = key[:i]
	}
}

// maxMapEntries bounds the schema's maps of numbers (split).
const maxMapEntries = 64

// value checks v against type t at path. It returns the value to keep and
// whether v was acceptable; when it was not, the error is recorded and the
// returned value is the zero of its kind (an empty mapping for a list entry,
// so later entries keep their indexes).
func (c *checker) value(path string, v any, t reflect.Type, depth int) (any, bool) {
	if depth > maxDepth {
		c.failf(path, "nested more than %d levels deep", maxDepth)
		return nil, false
	}
	if t == durationType {
		return c.duration(path, v)
	}
	switch t.Kind() {
	case reflect.Pointer:
		return c.value(path, v, t.Elem(), depth)
	case reflect.Struct:
		return c.section(path, v, t, depth)
	case reflect.String:
		if s, ok := v.(string); ok {
			return s, true
		}
		c.failf(path, "expected a string, got %s", sched.Describe(v))
		return "", false
	case reflect.Bool:
		if b, ok := v.(bool); ok {
			return b, true
		}
		c.failf(path, "expected true or false, got %s", sched.Describe(v))
		return false, false
	case reflect.Int, reflect.Int64, reflect.Uint64:
		return c.integer(path, v, t)
	case reflect.Float64:
		f, ok := sched.Number(v)
		if !ok {
			c.failf(path, "expected a number, got %s", sched.Describe(v))
			return 0.0, false
		}
		if math.IsNaN(f) || math.IsInf(f, 0) {
			c.failf(path, "must be a finite number, got %v", f)
			return 0.0, false
		}
		return f, true
	case reflect.Slice:
		return c.list(path, v, t, depth)
	case reflect.Map:
		return c.mapping(path, v, t, depth)
	case reflect.Interface:
		// A scheduling profile, free-form here: Validate decodes it.
		return c.free(path, v, depth)
	}
	panic("BUG: config: no check for " + t.String())
}

// section checks a mapping against a struct type.
func (c *checker) section(path string, v any, t reflect.Type, depth int) (any, bool) {
	m, ok := toStringMap(v)
	if !ok {
		c.failf(path, "expected a mapping, got %s", sched.Describe(v))
		return map[string]any{}, false
	}
	fields := fieldsOf(t)
	out := make(map[string]any, len(m))
	good := true
	for _, key := range sortedKeys(m) {
		p := keyPath(path, key)
		f, known := fields[key]
		if !known {
			c.fail(p, unknownKey(p))
			good = false
			continue
		}
		if m[key] == nil {
			// An empty value is the same as an absent key.
			continue
		}
		nv, ok := c.value(p, m[key], f.Type, depth+1)
		if !ok {
			good = false
			// Keep the good part of a section, list or map, so the rest of
			// it is still validated; a rejected scalar keeps its default.
			switch deref(f.Type).Kind() {
			case reflect.Struct, reflect.Slice, reflect.Map:
				if f.Type != durationType {
					out[key] = nv
				}
			}
			continue
		}
		out[key] = nv
	}
	return out, good
}

func (c *checker) duration(path string, v any) (any, bool) {
	switch x := v.(type) {
	case string:
		if f, err := strconv.ParseFloat(strings.TrimSpace(x), 64); err == nil {
			// "5" from an environment variable or a quoted YAML value.
			return c.duration(path, f)
		}
		d, err := time.ParseDuration(strings.TrimSpace(x))
		if err != nil {
			c.failf(path, "invalid duration %q: want a number with a unit, such as \"250ms\" or \"2s\"", x)
			return "0s", false
		}
		return d.String(), true
	case int, int64, uint64, float64:
		if f, _ := sched.Number(x); f == 0 {
			return "0s", true
		}
		c.failf(path, "%v is a bare number: a duration needs a unit, such as \"%vs\" or \"%vms\"", x, x, x)
		return "0s", false
	}
	c.failf(path, "expected a duration such as \"250ms\", got %s", sched.Describe(v))
	return "0s", false
}

func (c *checker) integer(path string, v any, t reflect.Type) (any, bool) {
	var (
		i   int64
		u   uint64
		neg bool
	)
	switch x := v.(type) {
	case int:
		i, neg = int64(x), x < 0
		u = uint64(x)
	case int64:
		i, neg = x, x < 0
		u = uint64(x)
	case uint64:
		i, u = int64(x), x
		if x > math.MaxInt64 && t.Kind() != reflect.Uint64 {
			c.failf(path, "%d is too large", x)
			return 0, false
		}
	case float64:
		if x != math.Trunc(x) || math.IsInf(x, 0) || x < math.MinInt64 || x >= math.MaxInt64 {
			c.failf(path, "expected a whole number, got %v", x)
			return 0, false
		}
		i, neg = int64(x), x < 0
		u = uint64(i)
	default:
		c.failf(path, "expected a whole number, got %s", sched.Describe(v))
		return 0, false
	}
	if t.Kind() == reflect.Uint64 {
		if neg {
			c.failf(path, "must not be negative, got %d", i)
			return uint64(0), false
		}
		return u, true
	}
	return i, true
}

func (c *checker) list(path string, v any, t reflect.Type, depth int) (any, bool) {
	l, ok := v.([]any)
	if !ok {
		c.failf(path, "expected a list, got %s", sched.Describe(v))
		return []any{}, false
	}
	elem := t.Elem()
	defaults := elementDefaults(elem)
	out := make([]any, len(l))
	good := true
	for i, e := range l {
		p := index(path, i)
		var (
			nv any
			ok bool
		)
		if e == nil {
			c.failf(p, "expected %s, got nothing", kindName(elem))
			nv, ok = zeroOf(elem), false
		} else {
			nv, ok = c.value(p, e, elem, depth+1)
		}
		good = good && ok
		if defaults != nil {
			// Entries are laid over their defaults here, since koanf
			// replaces lists whole. The defaults are scalars, so a
			// shallow copy is enough.
			m, _ := nv.(map[string]any)
			full := make(map[string]any, len(defaults)+len(m))
			for k, x := range defaults {
				full[k] = x
			}
			for k, x := range m {
				full[k] = x
			}
			nv = full
		}
		out[i] = nv
	}
	return out, good
}

// mapping checks a map of the schema: split (map[string]int) or
// chat_template_kwargs (map[string]any, free form).
func (c *checker) mapping(path string, v any, t reflect.Type, depth int) (any, bool) {
	m, ok := toStringMap(v)
	if !ok {
		c.failf(path, "expected a mapping, got %s", sched.Describe(v))
		return map[string]any{}, false
	}
	if t.Elem().Kind() != reflect.Interface && len(m) > maxMapEntries {
		// A split names at most the seven policies.
		c.failf(path, "has %d entries, more than the %d allowed", len(m), maxMapEntries)
		return map[string]any{}, false
	}
	out := make(map[string]any, len(m))
	good := true
	for _, key := range sortedKeys(m) {
		p := keyPath(path, key)
		var (
			nv any
			ok bool
		)
		if t.Elem().Kind() == reflect.Interface {
			nv, ok = c.free(p, m[key], depth+1)
		} else if m[key] == nil {
			c.failf(p, "expected %s, got nothing", kindName(t.Elem()))
		} else {
			nv, ok = c.value(p, m[key], t.Elem(), depth+1)
		}
		if !ok {
			good = false
			continue
		}
		out[key] = nv
	}
	if !good {
		// A split missing a rejected entry would also fail its sum: say
		// nothing more about this map.
		c.reject(path)
	}
	return out, good
}

// free checks a free-form value, such as a chat template keyword: the JSON
// kinds of value, any depth up to the bound, mapping keys made strings.
func (c *checker) free(path string, v any, depth int) (any, bool) {
	if depth > maxDepth {
		c.failf(path, "nested more than %d levels deep", maxDepth)
		return nil, false
	}
	switch x := v.(type) {
	case nil, bool, string, int, int64, uint64:
		return x, true
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			c.failf(path, "must be a finite number, got %v", x)
			return nil, false
		}
		return x, true
	case []any:
		out := make([]any, len(x))
		good := true
		for i, e := range x {
			nv, ok := c.free(index(path, i), e, depth+1)
			good = good && ok
			out[i] = nv
		}
		return out, good
	}
	if m, ok := toStringMap(v); ok {
		out := make(map[string]any, len(m))
		good := true
		for _, key := range sortedKeys(m) {
			nv, ok := c.free(keyPath(path, key), m[key], depth+1)
			good = good && ok
			out[key] = nv
		}
		return out, good
	}
	c.failf(path, "unsupported value %s: want null, a boolean, number, string, list or mapping", sched.Describe(v))
	return nil, false
}

// env turns INFERRAIL_ entries into a map laid over the file's. Entries are
// applied shallow first, so INFERRAIL_SERVER__LISTEN wins over a listen key
// inside INFERRAIL_SERVER, and a later duplicate wins over an earlier one.
func (c *checker) environ(entries []string) map[string]any {
	type override struct {
		name  string
		parts []string
		value any
	}
	var list []override
	for _, entry := range entries {
		name, val, found := strings.Cut(entry, "=")
		if !found || !strings.HasPrefix(name, EnvPrefix) {
			continue
		}
		c.source = name
		parts := strings.Split(strings.ToLower(strings.TrimPrefix(name, EnvPrefix)), "__")
		t, path, ok := c.envKey(parts)
		if !ok {
			continue
		}
		if len(val) > MaxBytes {
			c.failf(path, "value is larger than %d bytes", MaxBytes)
			continue
		}
		var raw any = val
		if deref(t).Kind() != reflect.String && t != durationType {
			var err error
			if raw, err = parseYAML([]byte(val)); err != nil {
				c.failf(path, "value %q is not valid YAML: %v", val, err)
				continue
			}
			if raw == nil {
				c.failf(path, "empty value: want %s", kindName(t))
				continue
			}
		}
		nv, ok := c.value(path, raw, t, len(parts))
		if !ok {
			continue
		}
		list = append(list, override{name, parts, nv})
	}
	c.source = ""
	sort.SliceStable(list, func(i, j int) bool { return len(list[i].parts) < len(list[j].parts) })

	out := map[string]any{}
	for _, o := range list {
		m := out
		for _, p := range o.parts[:len(o.parts)-1] {
			next, ok := m[p].(map[string]any)
			if !ok {
				next = map[string]any{}
				m[p] = next
			}
			m = next
		}
		m[o.parts[len(o.parts)-1]] = o.value
	}
	return out
}

// envKey walks an override's key parts through the schema, returning the
// type and path of the key it names.
func (c *checker) envKey(parts []string) (reflect.Type, string, bool) {
	t, path := configType, ""
	for i, p := range parts {
		if !isStruct(t) {
			c.failf(path, "a list or map is set whole, e.g. %s%s='[...]' or '{...}'",
				EnvPrefix, strings.ToUpper(strings.Join(parts[:i], "__")))
			return nil, "", false
		}
		f, ok := fieldsOf(t)[p]
		if !ok || p == "" {
			c.fail(keyPath(path, p), unknownKey(keyPath(path, p)))
			return nil, "", false
		}
		t, path = f.Type, keyPath(path, p)
	}
	return t, path, true
}

// toStringMap returns v as a map with string keys, if it is a mapping.
// Non-string keys (YAML allows 1: x) are written out as strings.
func toStringMap(v any) (map[string]any, bool) {
	switch m := v.(type) {
	case map[string]any:
		return m, true
	case map[any]any:
		out := make(map[string]any, len(m))
		for k, x := range m {
			out[fmt.Sprint(k)] = x
		}
		return out, true
	}
	return nil, false
}

// kindName names what a schema type wants, for errors.
func kindName(t reflect.Type) string {
	if t == durationType {
		return "a duration such as \"250ms\""
	}
	switch deref(t).Kind() {
	case reflect.Struct, reflect.Map:
		return "a mapping"
	case reflect.Slice:
		return "a list"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Float64:
		return "a number"
	}
	return "a whole number"
}

// zeroOf is the placeholder kept for a rejected list entry.
func zeroOf(t reflect.Type) any {
	switch deref(t).Kind() {
	case reflect.Struct, reflect.Map:
		return map[string]any{}
	case reflect.String:
		return ""
	}
	return nil
}

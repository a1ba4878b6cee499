package sched

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/inferrail/inferrail/model/policy"
)

// documented returns the document value of a parameter's documented
// default, as an operator would write it (a duration with its unit), and
// whether it has one.
func documented(p Param) (any, bool) {
	switch d := p.Default.(type) {
	case nil:
		if p.Fields == nil {
			return nil, false
		}
		return defaults(p.Fields), true
	case time.Duration:
		return d.String(), true
	default:
		return d, true
	}
}

// defaults returns a parameters object of every documented default.
func defaults(params []Param) map[string]any {
	m := map[string]any{}
	for _, p := range params {
		if v, ok := documented(p); ok {
			m[p.Name] = v
		}
	}
	return m
}

// decode decodes params for t as plugins[0]'s, returning the instance,
// the errors and warnings, and the declared parameters never read.
func decode(t *Type, params any) (any, *decoding) {
	d := &decoding{}
	f := d.parameters("plugins[0].parameters", params, t.Params)
	if f == nil {
		return nil, d
	}
	inst := t.New(f)
	d.finish()
	return inst, d
}

// mustDecode is what a test of a plugin's behaviour builds it with.
func mustDecode(t *testing.T, typ *Type, params map[string]any) any {
	t.Helper()
	inst, d := decode(typ, params)
	if len(d.errs) > 0 {
		t.Fatalf("%s %v: %v", typ.Name, params, d.errs)
	}
	return inst
}

// required are the parameters without a default that a type needs, so
// that its documented defaults decode.
var required = map[string]map[string]any{
	utilizationFilter.Name: {"conditions": []any{map[string]any{"metric": "waiting-queue", "maxValue": 4}}},
}

// TestEveryTypeDecodesItsDefaults checks each registered type: its
// documented defaults, written out, decode without a problem or a warning
// to the same plugin as no parameters at all, and each decoding reads
// every parameter the type declares.
func TestEveryTypeDecodesItsDefaults(t *testing.T) {
	for _, typ := range Types() {
		t.Run(typ.Name, func(t *testing.T) {
			written, empty := defaults(typ.Params), map[string]any{}
			for k, v := range required[typ.Name] {
				written[k], empty[k] = v, v
			}
			a, da := decode(typ, written)
			b, db := decode(typ, empty)
			for _, d := range []*decoding{da, db} {
				if len(d.errs) > 0 || len(d.warns) > 0 {
					t.Fatalf("errors %v, warnings %v", d.errs, d.warns)
				}
				if u := d.unread(); len(u) > 0 {
					t.Fatalf("declared and never read: %v", u)
				}
			}
			if !reflect.DeepEqual(a, b) {
				t.Fatalf("the documented defaults make %+v, no parameters %+v", a, b)
			}
			checkKind(typ, a)
			if typ.Doc == "" || strings.Contains(typ.Name, "_") {
				t.Fatalf("type %q: no doc, or not llm-d's kebab-case", typ.Name)
			}
			for _, p := range typ.Params {
				if p.Doc == "" {
					t.Fatalf("parameter %s has no doc", p.Name)
				}
			}
		})
	}
}

// TestEveryTypeRejectsAnUnknownParameter checks each registered type
// names an unknown parameter by its path, and a wrong type too.
func TestEveryTypeRejectsAnUnknownParameter(t *testing.T) {
	for _, typ := range Types() {
		t.Run(typ.Name, func(t *testing.T) {
			params := map[string]any{"blockSizz": 5}
			for k, v := range required[typ.Name] {
				params[k] = v
			}
			_, d := decode(typ, params)
			if len(d.errs) != 1 || d.errs[0].Error() != "plugins[0].parameters.blockSizz: unknown key" {
				t.Fatalf("got %v", d.errs)
			}
			_, d = decode(typ, []any{1})
			if len(d.errs) != 1 || !strings.Contains(d.errs[0].Error(), "plugins[0].parameters: want a mapping, got a list") {
				t.Fatalf("parameters as a list: %v", d.errs)
			}
			for _, p := range typ.Params {
				if p.Default == nil {
					continue
				}
				wrong := map[string]any{p.Name: map[string]any{"x": 1}}
				for k, v := range required[typ.Name] {
					wrong[k] = v
				}
				if _, d := decode(typ, wrong); len(d.errs) == 0 || !strings.HasPrefix(d.errs[0].Error(), "plugins[0].parameters."+p.Name+": want ") {
					t.Fatalf("%s given a mapping: %v", p.Name, d.errs)
				}
			}
		})
	}
}

func TestTypesAreUnique(t *testing.T) {
	var names []string
	for _, typ := range Types() {
		if slices.Contains(names, typ.Name) {
			t.Fatalf("%s registered twice", typ.Name)
		}
		names = append(names, typ.Name)
		if got, ok := LookupType(typ.Name); !ok || got != typ {
			t.Fatalf("LookupType(%s)", typ.Name)
		}
	}
	if _, ok := LookupType("by-label"); ok {
		t.Fatal("a deprecated llm-d type is registered")
	}
}

// TestPolicies checks the registry's policy names and that each asks for
// the estimate broadcast exactly when model/policy says it is cache aware.
func TestPolicies(t *testing.T) {
	want := []string{"round_robin", "random", "least_request", "p2c", "prefix_hash", "kv_aware", "cost_model"}
	if got := Policies(); !slices.Equal(got, want) {
		t.Fatalf("Policies() = %v", got)
	}
	for _, name := range want {
		b, ok := Lookup(name)
		if !ok || b.Name != name || b.Doc == "" {
			t.Fatalf("Lookup(%s) = %+v, %v", name, b, ok)
		}
		if got := b.Signals()&SignalEstimates != 0; got != policy.CacheAware(name) {
			t.Errorf("%s: estimates %v, policy.CacheAware %v (signals %s)", name, got, policy.CacheAware(name), b.Signals())
		}
	}
	if _, err := New(policy.Spec{Name: "fastest"}); err == nil || !strings.Contains(err.Error(), "round_robin") {
		t.Fatalf("an unknown policy: %v", err)
	}
	if _, ok := Lookup("fastest"); ok {
		t.Fatal("Lookup of an unknown policy")
	}
}

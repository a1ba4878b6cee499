package mergepatch

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

func decode(t testing.TB, s string) any {
	t.Helper()
	var v any
	d := json.NewDecoder(bytes.NewReader([]byte(s)))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		t.Fatalf("decode %s: %v", s, err)
	}
	return v
}

func encode(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The examples of RFC 7396 appendix A, and a few of section 3.
func TestApplyRFC7396(t *testing.T) {
	for _, tc := range []struct{ target, patch, want string }{
		{`{"a":"b"}`, `{"a":"c"}`, `{"a":"c"}`},
		{`{"a":"b"}`, `{"b":"c"}`, `{"a":"b","b":"c"}`},
		{`{"a":"b"}`, `{"a":null}`, `{}`},
		{`{"a":"b","b":"c"}`, `{"a":null}`, `{"b":"c"}`},
		{`{"a":["b"]}`, `{"a":"c"}`, `{"a":"c"}`},
		{`{"a":"c"}`, `{"a":["b"]}`, `{"a":["b"]}`},
		{`{"a":{"b":"c"}}`, `{"a":{"b":"d","c":null}}`, `{"a":{"b":"d"}}`},
		{`{"a":[{"b":"c"}]}`, `{"a":[1]}`, `{"a":[1]}`},
		{`["a","b"]`, `["c","d"]`, `["c","d"]`},
		{`{"a":"b"}`, `["c"]`, `["c"]`},
		{`{"a":"foo"}`, `null`, `null`},
		{`{"a":"foo"}`, `"bar"`, `"bar"`},
		{`{"e":null}`, `{"a":1}`, `{"a":1,"e":null}`},
		{`[1,2]`, `{"a":"b","c":null}`, `{"a":"b"}`},
		{`{}`, `{"a":{"bb":{"ccc":null}}}`, `{"a":{"bb":{}}}`},
		// Section 3's example.
		{`{"title":"Goodbye!","author":{"givenName":"John","familyName":"Doe"},"tags":["example","sample"],"content":"This will be unchanged"}`,
			`{"title":"Hello!","phoneNumber":"+01-123-456-7890","author":{"familyName":null},"tags":["example"]}`,
			`{"author":{"givenName":"John"},"content":"This will be unchanged","phoneNumber":"+01-123-456-7890","tags":["example"],"title":"Hello!"}`},
		// Arrays keep their nulls; numbers keep their text.
		{`{}`, `{"a":[null,{"b":null}],"n":12345678901234567890}`, `{"a":[null,{"b":null}],"n":12345678901234567890}`},
		{`null`, `{"a":{"b":1}}`, `{"a":{"b":1}}`},
	} {
		target, patch := decode(t, tc.target), decode(t, tc.patch)
		got := encode(t, Apply(target, patch))
		if want := encode(t, decode(t, tc.want)); got != want {
			t.Errorf("Apply(%s, %s) = %s, want %s", tc.target, tc.patch, got, want)
		}
		if encode(t, target) != encode(t, decode(t, tc.target)) || encode(t, patch) != encode(t, decode(t, tc.patch)) {
			t.Errorf("Apply(%s, %s) modified an argument", tc.target, tc.patch)
		}
	}
}

// Apply modifies neither argument, is idempotent, and gives what the RFC
// says key by key.
func FuzzApply(f *testing.F) {
	for _, s := range [][2]string{
		{`{"a":"b"}`, `{"a":null}`},
		{`{"a":{"b":"c"}}`, `{"a":{"b":"d","c":null}}`},
		{`[1,2]`, `{"a":"b","c":null}`},
		{`{"routing":{"default_policy":"cost_model","split":{"a":50,"b":50}}}`, `{"routing":{"split":null,"shadow":["x"]}}`},
		{`{}`, `{"a":{"bb":{"ccc":null}}}`},
		{`"x"`, `null`},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, ts, ps string) {
		var target, patch any
		if json.Unmarshal([]byte(ts), &target) != nil || json.Unmarshal([]byte(ps), &patch) != nil {
			t.Skip()
		}
		t0, p0 := encode(t, target), encode(t, patch)
		got := Apply(target, patch)
		if encode(t, target) != t0 || encode(t, patch) != p0 {
			t.Fatalf("Apply(%s, %s) modified an argument", t0, p0)
		}
		if again := Apply(got, patch); !reflect.DeepEqual(again, got) {
			t.Fatalf("not idempotent: Apply(%s, %s) = %s, applied again %s", t0, p0, encode(t, got), encode(t, again))
		}
		check(t, target, patch, got)
	})
}

// check verifies got = Apply(target, patch) against RFC 7396's definition.
func check(t *testing.T, target, patch, got any) {
	t.Helper()
	p, ok := patch.(map[string]any)
	if !ok {
		if !reflect.DeepEqual(got, patch) {
			t.Fatalf("non-object patch %s gave %s", encode(t, patch), encode(t, got))
		}
		return
	}
	g, ok := got.(map[string]any)
	if !ok {
		t.Fatalf("object patch %s gave non-object %s", encode(t, patch), encode(t, got))
	}
	tm, _ := target.(map[string]any)
	for k, v := range tm {
		if _, in := p[k]; !in && !reflect.DeepEqual(g[k], v) {
			t.Fatalf("key %q not in the patch changed: %s -> %s", k, encode(t, v), encode(t, g[k]))
		}
	}
	for k := range g {
		_, inT := tm[k]
		if _, inP := p[k]; !inT && !inP {
			t.Fatalf("key %q in neither target nor patch", k)
		}
	}
	for k, v := range p {
		gv, in := g[k]
		if v == nil {
			if in {
				t.Fatalf("key %q deleted by the patch is still there", k)
			}
			continue
		}
		if !in {
			t.Fatalf("key %q set by the patch is missing", k)
		}
		check(t, tm[k], v, gv)
	}
}

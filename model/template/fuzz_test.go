package template

import (
	"encoding/json"
	"errors"
	"os"
	"testing"
	"time"
	"unicode/utf8"
)

// fuzzLimits keep every fuzzed render small and quick.
var fuzzLimits = Limits{MaxOutputBytes: 1 << 16, MaxSteps: 20000, MaxDepth: 40}

// FuzzCompile: arbitrary template text never panics, and whatever
// compiles renders within the limits (returning text or an *Error).
func FuzzCompile(f *testing.F) {
	for _, s := range []string{
		"", "plain", "{{ x }}", "{% for a in b %}{{ loop.index }}{% endfor %}",
		"{%- if a -%}{{ a|tojson(indent=2) }}{% elif b %}{% else %}{% endif %}",
		"{% macro m(a, b=1) %}{{ caller(a) }}{% endmacro %}{% call(x) m(2) %}{{ x }}{% endcall %}",
		"{% set ns = namespace(a=1) %}{% set ns.a = ns.a + 1 %}{{ ns.a }}",
		"{% raw %}{{ x }}{% endraw %}{# c #}",
		"{{ 'a' ~ 1 ~ none }}{{ [1,2][::-1] }}{{ {'a':1}.items()|list }}",
		"{{ '%s %d' % ('a', 1) }}{{ '{:>4}'.format(1) }}",
		"{% for i in range(10) recursive %}{{ loop(range(i)) }}{% endfor %}",
		"{{ 'x' * 100000 }}", "{{ 2 ** 100000 }}", "{{ ((((((1)))))) }}",
		"{% macro r(n) %}{{ r(n + 1) }}{% endmacro %}{{ r(0) }}",
		"{{ '\\x41\\u00e9' }}", "{{ x.y.z }}", "{% break %}", "{{",
	} {
		f.Add(s)
	}
	if data, err := os.ReadFile("testdata/qwen3/tokenizer_config.json"); err == nil {
		if c, err := NewChat(data); err == nil && c.single != nil {
			_ = c
		}
	}
	f.Fuzz(func(t *testing.T, src string) {
		tpl, err := Compile(src)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("compile error is not *Error: %v", err)
			}
			return
		}
		ctx := NewDict(4)
		ctx.SetString("x", "text")
		ctx.SetString("items", List{int64(1), "two", 3.0, nil, List{}, NewDict(0)})
		out, err := tpl.Execute(ctx, Options{Now: time.Unix(0, 0), Limits: fuzzLimits})
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("render error is not *Error: %v", err)
			}
			return
		}
		if len(out) > fuzzLimits.MaxOutputBytes {
			t.Fatalf("output of %d bytes passed the limit", len(out))
		}
	})
}

// FuzzRender: random JSON contexts through the Qwen3 chat template never
// panic; they render or fail with an *Error.
func FuzzRender(f *testing.F) {
	cfg, err := os.ReadFile("testdata/qwen3/tokenizer_config.json")
	if err != nil {
		f.Fatal(err)
	}
	chat, err := NewChat(cfg)
	if err != nil {
		f.Fatal(err)
	}
	chat = chat.WithLimits(fuzzLimits)
	for _, s := range []string{
		`{"messages":[{"role":"user","content":"hi"}]}`,
		`{"messages":[{"role":"system","content":"s"},{"role":"user","content":"<tool_response>x</tool_response>"}],"tools":[{"type":"function","function":{"name":"f","parameters":{}}}]}`,
		`{"messages":[{"role":"assistant","content":"<think>r</think>a","tool_calls":[{"function":{"name":"f","arguments":{"a":1.0}}}]},{"role":"tool","content":"r"}],"add_generation_prompt":true,"enable_thinking":false}`,
		`{"messages":[{"role":"assistant","content":null,"reasoning_content":"x"}]}`,
		`{"messages":[]}`, `{"messages":"str"}`, `{"messages":[1,2,[3]]}`, `{}`, `[]`, `null`,
		`{"messages":[{"role":"user","content":[{"type":"text","text":"x"}]}]}`,
		`{"messages":[{"role":"tool","content":"a"},{"role":"tool","content":"b"}],"tools":[]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := ParseJSON(data)
		if err != nil {
			return
		}
		d, _ := v.(*Dict)
		get := func(k string) Value {
			x, _ := d.GetString(k)
			return x
		}
		kw := NewDict(1)
		if et, ok := d.GetString("enable_thinking"); ok {
			kw.SetString("enable_thinking", et)
		}
		_, err = chat.Apply(get("messages"), get("tools"), truth(get("add_generation_prompt")), kw, time.Unix(0, 0))
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("render error is not *Error: %v", err)
			}
		}
	})
}

// FuzzParseJSON: the decoder never panics, and what it accepts it can
// serialize again.
func FuzzParseJSON(f *testing.F) {
	for _, s := range []string{`{"a":[1,2.0,-0,1e400,"\ud83d\ude00"],"b":null}`, `[NaN, Infinity]`, `"\ud800"`, `{"a":1,"a":2}`, `123456789012345678901234567890`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := ParseJSON(data)
		if err != nil {
			return
		}
		if _, err := JSON(v); err != nil {
			t.Fatalf("JSON(ParseJSON(%q)): %v", data, err)
		}
	})
}

// FuzzJSONString: a JSON string decodes as encoding/json decodes it (both
// follow RFC 8259 there, lone surrogates becoming U+FFFD), or both refuse
// it; the run-at-a-time copy in str must not change a byte.
func FuzzJSONString(f *testing.F) {
	for _, s := range []string{`plain`, `a\nb\"c\\d\/e`, `\u00e9\ud83d\ude00\ud800x`, "tab\there", `quote at end\"`, `日本語 \u65e5`, `01234567\n01234567"x`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) {
			return // json.loads refuses it; encoding/json replaces the bytes
		}
		doc := []byte(`"` + s + `"`)
		got, err := ParseJSON(doc)
		var want string
		werr := json.Unmarshal(doc, &want)
		if (err == nil) != (werr == nil) {
			t.Fatalf("%q: ParseJSON error %v, encoding/json error %v", doc, err, werr)
		}
		if err == nil && got != want {
			t.Fatalf("%q: ParseJSON %q, encoding/json %q", doc, got, want)
		}
	})
}

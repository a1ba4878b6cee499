package template

import (
	"errors"
	"math"
	"math/big"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestParseJSON(t *testing.T) {
	f := func(in, wantRepr string) {
		t.Helper()
		v, err := ParseJSON([]byte(in))
		if err != nil {
			t.Fatalf("ParseJSON(%s): %v", in, err)
		}
		if got := pyRepr(v); got != wantRepr {
			t.Errorf("ParseJSON(%s) = %s, want %s", in, got, wantRepr)
		}
	}
	f(`{"b": 1, "a": 2}`, `{'b': 1, 'a': 2}`)
	f(`{"a": 1, "b": 2, "a": 3}`, `{'a': 3, 'b': 2}`) // first position, last value
	f(`[1, 1.0, 1e5, -0, -0.0, 1E-7, 2.50]`, `[1, 1.0, 100000.0, 0, -0.0, 1e-07, 2.5]`)
	f(`123456789012345678901234567890`, `123456789012345678901234567890`)
	f(`[NaN, Infinity, -Infinity, 1e400]`, `[nan, inf, -inf, inf]`)
	f(`"\ud83d\ude00 \u00e9 \ud800"`, `'😀 é �'`)
	f(` [true, false, null] `, `[True, False, None]`)
	bad := func(in string) {
		t.Helper()
		if _, err := ParseJSON([]byte(in)); err == nil {
			t.Errorf("ParseJSON(%q) accepted", in)
		}
	}
	bad(`{"a":1,}`)
	bad(`[1,]`)
	bad(`01`)
	bad(`"a` + "\x01" + `"`)
	bad("\"\xff\"")
	bad(`{"a" 1}`)
	bad(`1 2`)
	bad(strings.Repeat("[", maxJSONDepth+1) + strings.Repeat("]", maxJSONDepth+1))
}

func TestJSON(t *testing.T) {
	f := func(in, want string) {
		t.Helper()
		v, err := ParseJSON([]byte(in))
		if err != nil {
			t.Fatal(err)
		}
		got, err := JSON(v)
		if err != nil || got != want {
			t.Errorf("JSON(%s) = %q, %v; want %q", in, got, err, want)
		}
	}
	f(`{"z":1,"a":[1.0,2.5e-7,null,true],"é":"\u2028<\"\\"}`, `{"z": 1, "a": [1.0, 2.5e-07, null, true], "é": "`+"\u2028"+`<\"\\"}`)
	f(`[1e16, 1e15, 0.1, 123456789012345678901234567890]`, `[1e+16, 1000000000000000.0, 0.1, 123456789012345678901234567890]`)
	f(`"\u0001\u001f\u007f"`, `"\u0001\u001f`+"\x7f"+`"`)
	if _, err := JSON(&Undefined{}); err == nil {
		t.Error("JSON(Undefined) succeeded")
	}
}

func TestFloatRepr(t *testing.T) {
	f := func(x float64, want string) {
		t.Helper()
		if got := floatRepr(x); got != want {
			t.Errorf("floatRepr(%v) = %s, want %s", x, got, want)
		}
	}
	f(1, "1.0")
	f(0, "0.0")
	f(math.Copysign(0, -1), "-0.0")
	f(1e16, "1e+16")
	f(9999999999999998, "9999999999999998.0")
	f(1e-4, "0.0001")
	f(1e-5, "1e-05")
	a, b := 0.1, 0.2
	f(a+b, "0.30000000000000004")
	f(1.5e300, "1.5e+300")
	f(5e-324, "5e-324")
	f(math.Inf(-1), "-inf")
	f(math.NaN(), "nan")
	f(123456789.123456789, "123456789.12345679")
}

func TestFromGo(t *testing.T) {
	v, err := FromGo(map[string]any{"b": []any{1, uint64(1 << 63), float32(0.5), "s"}, "a": nil})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := pyRepr(v), "{'a': None, 'b': [1, 9223372036854775808, 0.5, 's']}"; got != want {
		t.Errorf("FromGo = %s, want %s", got, want)
	}
	if _, err := FromGo(struct{}{}); err == nil {
		t.Error("FromGo(struct{}) succeeded")
	}
	b, _ := new(big.Int).SetString("1"+strings.Repeat("0", 30), 10)
	if v, _ := FromGo(b); pyStr(v) != "1"+strings.Repeat("0", 30) {
		t.Errorf("FromGo(big) = %v", v)
	}
}

func TestDictKeys(t *testing.T) {
	d := NewDict(0)
	for i := 0; i < 20; i++ { // past smallDict, so the index is used too
		d.SetString(string(rune('a'+i)), int64(i))
	}
	if err := d.Set(int64(1), "int"); err != nil {
		t.Fatal(err)
	}
	if err := d.Set(1.0, "float"); err != nil {
		t.Fatal(err)
	}
	if err := d.Set(true, "bool"); err != nil {
		t.Fatal(err)
	}
	if v, _ := d.Get(int64(1)); v != "bool" || d.Len() != 21 {
		t.Errorf("1, 1.0 and True must be one key: got %v, len %d", v, d.Len())
	}
	if err := d.Set(List{}, 1); err == nil {
		t.Error("a list key was accepted")
	}
	if v, ok := d.GetString("t"); !ok || v != int64(19) {
		t.Errorf("GetString(t) = %v, %v", v, ok)
	}
}

func TestLimits(t *testing.T) {
	f := func(src string, l Limits) {
		t.Helper()
		tpl, err := Compile(src)
		if err != nil {
			t.Fatal(err)
		}
		_, err = tpl.Execute(nil, Options{Limits: l})
		if !errors.Is(err, ErrLimit) {
			t.Errorf("%q: got %v, want a limit error", src, err)
		}
	}
	f("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", Limits{MaxSteps: 1e6})
	f("{{ 'x' * 2000 }}", Limits{MaxOutputBytes: 1000})
	f("{% for i in range(10) %}{{ 'x' * 200 }}{% endfor %}", Limits{MaxOutputBytes: 1000})
	f("{% macro m(n) %}{{ m(n + 1) }}{% endmacro %}{{ m(0) }}", Limits{})
	f("{{ 2 ** 1000000 }}", Limits{})
	f("{{ (range(100000)|list) * 100 }}", Limits{MaxOutputBytes: 1 << 20})
	f("{% set l = range(99999)|list %}{% for i in range(1000) %}{{ l|sum }}{% endfor %}", Limits{MaxSteps: 1e6})
}

func TestStrftimeNeedsClock(t *testing.T) {
	tpl, _ := Compile("{{ strftime_now('%Y') }}")
	if _, err := tpl.Render(nil); err == nil {
		t.Error("strftime_now without a clock succeeded")
	}
	out, err := tpl.Execute(nil, Options{Now: time.Date(2031, 1, 2, 0, 0, 0, 0, time.UTC)})
	if err != nil || out != "2031" {
		t.Errorf("got %q, %v", out, err)
	}
}

func TestRaiseException(t *testing.T) {
	tpl, _ := Compile("{% if x %}{{ raise_exception('bad ' ~ x) }}{% endif %}")
	_, err := tpl.RenderMap(map[string]any{"x": 1})
	var e *Error
	if !errors.As(err, &e) || e.Kind != "TemplateError" || e.Msg != "bad 1" || e.Line != 1 {
		t.Errorf("got %#v", err)
	}
}

func TestNewChat(t *testing.T) {
	cfg := `{"bos_token": {"__type": "AddedToken", "content": "<s>", "lstrip": false},
		"eos_token": "</s>", "unk_token": null, "pad_token": "",
		"additional_special_tokens": ["<a>", {"content": "<b>"}],
		"chat_template": [
			{"name": "default", "template": "D{{ bos_token }}{{ eos_token }}{{ unk_token is defined }}{{ pad_token is defined }}{{ additional_special_tokens }}{{ tools }}"},
			{"name": "tool_use", "template": "T{{ tools|length }}{{ x }}"},
			{"name": "rag", "template": "{% if %}"}]}`
	c, err := NewChat([]byte(cfg))
	if err != nil {
		t.Fatal(err)
	}
	f := func(tools Value, kw *Dict, want string) {
		t.Helper()
		got, err := c.Apply(List{}, tools, false, kw, time.Time{})
		if err != nil || got != want {
			t.Errorf("Apply(tools=%v) = %q, %v; want %q", tools, got, err, want)
		}
	}
	f(nil, nil, "D<s></s>FalseFalse['<a>', '<b>']None")
	f(List{}, nil, "T0") // an empty tools list still picks tool_use, as transformers does
	kw := NewDict(1)
	kw.SetString("x", "!")
	f(List{int64(1)}, kw, "T1!")
	kw.SetString("messages", "no")
	if _, err := c.Apply(List{}, nil, false, kw, time.Time{}); err == nil {
		t.Error("kwargs may not replace messages")
	}
	if _, err := NewChat([]byte(`{"eos_token": "x"}`)); !errors.Is(err, ErrNoChatTemplate) {
		t.Errorf("no chat_template: got %v", err)
	}
	c2, err := NewChat([]byte(`{"chat_template": [{"name": "rag", "template": "x"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c2.Apply(List{}, nil, false, nil, time.Time{}); err == nil {
		t.Error("no default template: want an error")
	}
}

// TestConcurrentRender renders one Template from many goroutines (run
// with -race).
func TestConcurrentRender(t *testing.T) {
	chat := loadQwen3(t)
	gs := loadGoldens(t, "testdata/qwen3/goldens.jsonl")
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < len(gs); i += 8 {
				g := gs[i]
				got, err := chat.Apply(g.messages, g.tools, g.addGen, g.kwargs, time.Unix(0, 0))
				if err != nil || got != g.want {
					t.Errorf("%s: concurrent render differs (%v)", g.id, err)
				}
			}
		}(w)
	}
	wg.Wait()
}

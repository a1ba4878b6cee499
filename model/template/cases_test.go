package template

import (
	"bufio"
	"errors"
	"os"
	"strings"
	"testing"
	"time"
)

// caseNow is the clock testdata/gen_cases.py gives strftime_now.
var caseNow = time.Date(2025, 7, 1, 9, 5, 3, 123456000, time.UTC)

// sameKind reports whether our error kind stands for Python's exception
// type. Python reports a break outside a loop as the SyntaxError of the
// compiled module; we raise it while parsing.
func sameKind(ours, python string) bool {
	if ours == python {
		return true
	}
	return ours == "TemplateSyntaxError" && python == "SyntaxError"
}

// TestPythonCases checks every case in testdata/cases.jsonl, which
// testdata/gen_cases.py rendered with Python Jinja2 3.1.6 configured as
// transformers configures it: the text must match byte for byte, and where
// Python raised, we must fail with the same exception type.
func TestPythonCases(t *testing.T) {
	f, err := os.Open("testdata/cases.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	n, fails := 0, 0
	for sc.Scan() {
		v, err := ParseJSON(sc.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		c := v.(*Dict)
		get := func(k string) Value { x, _ := c.GetString(k); return x }
		name, src := get("name").(string), get("template").(string)
		ctx, _ := get("context").(*Dict)
		n++
		got, err := renderCase(src, ctx)
		if get("ok") == true {
			want := get("text").(string)
			if err != nil {
				fails++
				t.Errorf("%s: %q\nPython renders %q\nwe fail: %v", name, src, want, err)
			} else if got != want {
				fails++
				t.Errorf("%s: %q\n%s", name, src, firstDiff(got, want))
			}
			continue
		}
		pyErr := get("error").(string)
		pyKind, _, _ := strings.Cut(pyErr, ":")
		var e *Error
		switch {
		case err == nil:
			fails++
			t.Errorf("%s: %q\nPython fails (%s)\nwe render %q", name, src, pyErr, got)
		case !errors.As(err, &e):
			fails++
			t.Errorf("%s: %q: error %v is not an *Error", name, src, err)
		case !sameKind(e.Kind, pyKind):
			fails++
			t.Errorf("%s: %q\nPython: %s\nwe:     %v", name, src, pyErr, err)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d/%d Python cases agree", n-fails, n)
}

func renderCase(src string, ctx *Dict) (string, error) {
	tpl, err := Compile(src)
	if err != nil {
		return "", err
	}
	return tpl.Execute(ctx, Options{Now: caseNow})
}

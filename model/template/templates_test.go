package template

import (
	"bufio"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTemplateFiles renders the chat templates in testdata/templates over
// the chats of testdata/gen_templates.py and compares with what Python
// Jinja2 rendered (testdata/templates.jsonl).
func TestTemplateFiles(t *testing.T) {
	f, err := os.Open("testdata/templates.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	compiled := map[string]*Template{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<22)
	n, fails := 0, 0
	for sc.Scan() {
		v, err := ParseJSON(sc.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		c := v.(*Dict)
		get := func(k string) Value { x, _ := c.GetString(k); return x }
		file, chat := get("template").(string), get("chat").(string)
		tpl, ok := compiled[file]
		if !ok {
			tpl, err = Compile(string(mustRead(t, filepath.Join("testdata/templates", file))))
			if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			compiled[file] = tpl
		}
		n++
		got, err := tpl.Execute(get("context").(*Dict), Options{Now: caseNow})
		name := file + "/" + chat
		if get("ok") == true {
			want := get("text").(string)
			switch {
			case err != nil:
				fails++
				t.Errorf("%s: Python renders, we fail: %v", name, err)
			case got != want:
				fails++
				t.Errorf("%s: %s", name, firstDiff(got, want))
			}
			continue
		}
		pyErr := get("error").(string)
		pyKind, _, _ := strings.Cut(pyErr, ":")
		var e *Error
		switch {
		case err == nil:
			fails++
			t.Errorf("%s: Python fails (%s), we render %q", name, pyErr, got)
		case !errors.As(err, &e):
			fails++
			t.Errorf("%s: %v is not an *Error", name, err)
		case pyKind == "RecursionError" && errors.Is(err, ErrLimit):
			// CPython's recursion limit and our MaxDepth stop the same
			// runaway recursion.
		case !sameKind(e.Kind, pyKind):
			fails++
			t.Errorf("%s: Python: %s\nwe: %v", name, pyErr, err)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d/%d template renders agree with Python", n-fails, n)
}

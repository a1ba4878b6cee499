package openai

import (
	"encoding/json"
	"reflect"
	"testing"
)

// TestAppendPythonJSON: the want is what Python 3.11 prints for
// json.dumps(json.loads(in), ensure_ascii=False, separators=(",", ":")).
func TestAppendPythonJSON(t *testing.T) {
	in := `{"b": 1.50, "a": [1e5, 1e-5, 0.0001, -0, 1e16, 12345678901234567890, "caf\u00e9 <&>", true, null, {}], "z": {"y": -0.0}}`
	want := `{"b":1.5,"a":[100000.0,1e-05,0.0001,0,1e+16,12345678901234567890,"café <&>",true,null,{}],"z":{"y":-0.0}}`
	got, err := AppendPythonJSON(nil, []byte(in))
	if err != nil || string(got) != want {
		t.Errorf("got %s, %v\nwant %s", got, err, want)
	}
	for _, bad := range []string{``, `{"a":`, `[1,]`, `1 2`, `{"a" 1}`} {
		if _, err := AppendPythonJSON(nil, []byte(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// FuzzAppendPythonJSON: valid JSON comes out valid, with the same value.
func FuzzAppendPythonJSON(f *testing.F) {
	for _, s := range []string{`{"a":[1,2.5,"x"]}`, `[]`, `"\u2028<"`, `-0.0`, `1e400`, `{"a":{"b":[{}]}}`, `[1,`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var want any
		if json.Unmarshal(raw, &want) != nil {
			AppendPythonJSON(nil, raw) // must not panic
			return
		}
		out, err := AppendPythonJSON(nil, raw)
		if err != nil {
			t.Fatalf("%q: %v", raw, err)
		}
		var got any
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("%q gave invalid %q: %v", raw, out, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q gave %q", raw, out)
		}
	})
}

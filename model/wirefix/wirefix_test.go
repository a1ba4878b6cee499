package wirefix

import (
	"testing"
	"testing/fstest"
)

func TestBody(t *testing.T) {
	for in, want := range map[string]string{
		"# made by x\n# from y\n{\"a\":1}\n": `{"a":1}`,
		"data: x\n\ndata: y\n\n\n":           "data: x\n\ndata: y\n\n",
		"{}\n":                               "{}",
	} {
		if got, err := Body([]byte(in)); err != nil || string(got) != want {
			t.Errorf("Body(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"# only\n# notes", "{}", ""} {
		if _, err := Body([]byte(in)); err == nil {
			t.Errorf("Body(%q): no error", in)
		}
	}
}

func TestRead(t *testing.T) {
	fsys := fstest.MapFS{"a.txt": {Data: []byte("# note\n{}\n")}}
	if got := Read(t, fsys, "a.txt"); string(got) != "{}" {
		t.Fatalf("Read = %q", got)
	}
}

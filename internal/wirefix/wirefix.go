// Package wirefix reads the wire-parity fixtures of the packages that
// write vLLM's answers (testdata/*.txt, made by each testdata's
// gen_fixtures.py from vLLM's pydantic models).
package wirefix

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// Read returns testdata/name: leading "#" lines are provenance notes,
// the rest up to the file's final newline is the expected bytes.
func Read(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	for bytes.HasPrefix(b, []byte("#")) {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			t.Fatalf("%s: only comments", name)
		}
		b = b[i+1:]
	}
	if !bytes.HasSuffix(b, []byte("\n")) {
		t.Fatalf("%s: no final newline", name)
	}
	return b[:len(b)-1]
}

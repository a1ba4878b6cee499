// Package wirefix reads the wire-parity fixtures of the packages that
// write vLLM's answers (testdata/*.txt, made by each testdata's
// gen_fixtures.py from vLLM's pydantic models). It is pure: the tests read
// the file and pass its bytes.
package wirefix

import (
	"bytes"
	"errors"
	"io/fs"
	"testing"
)

// Body returns the expected bytes of a fixture file's contents: leading
// "#" lines are provenance notes, the rest up to the final newline is the
// body.
func Body(file []byte) ([]byte, error) {
	for bytes.HasPrefix(file, []byte("#")) {
		i := bytes.IndexByte(file, '\n')
		if i < 0 {
			return nil, errors.New("only comments")
		}
		file = file[i+1:]
	}
	if !bytes.HasSuffix(file, []byte("\n")) {
		return nil, errors.New("no final newline")
	}
	return file[:len(file)-1], nil
}

// Read returns the expected bytes of the fixture name in fsys (a test
// passes os.DirFS("testdata")), failing t when it cannot.
func Read(t testing.TB, fsys fs.FS, name string) []byte {
	t.Helper()
	b, err := fs.ReadFile(fsys, name)
	if err == nil {
		b, err = Body(b)
	}
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return b
}

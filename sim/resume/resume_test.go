package resume

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWriteRead(t *testing.T) {
	type rec struct {
		Hash string `json:"hash"`
		N    int    `json:"n"`
	}
	path := filepath.Join(t.TempDir(), "a", "b.json")
	if err := Write(path, rec{"h", 3}); err != nil {
		t.Fatal(err)
	}
	got, err := Read[rec](path)
	if err != nil || *got != (rec{"h", 3}) {
		t.Fatalf("read back %+v, %v", got, err)
	}
	if _, err := os.Stat(path + ".tmp"); !os.IsNotExist(err) {
		t.Fatalf("temporary file left: %v", err)
	}
	if err := os.WriteFile(path, []byte("{half"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Read[rec](path); err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("a broken file: %v", err)
	}
}

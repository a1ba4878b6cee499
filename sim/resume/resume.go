// Package resume keeps the result files of long batch runs (bench sweeps,
// whatif): each result is written whole, through a temporary file and a
// rename, so that a run stopped at any moment leaves either the old file or
// the new one, and a rerun can trust what it reads back.
//
// resume starts no goroutines and keeps no globals; it does I/O only on the
// paths it is given.
package resume

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// Write writes v as indented JSON to path, creating its directory.
func Write(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// Read reads the JSON file at path into a new T.
func Read[T any](path string) (*T, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	v := new(T)
	if err := json.Unmarshal(b, v); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return v, nil
}

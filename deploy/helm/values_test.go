package helm

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	sigsyaml "sigs.k8s.io/yaml"
)

// values is a variant's effective values: the chart's values.yaml, with the variant's file laid
// over it and its --set assignments (plain dotted keys with string values) applied, as helm
// merges them. The tests read what to expect from here rather than repeating the defaults.
type values map[string]any

func chartValues(t *testing.T, v variant) values {
	t.Helper()
	out := readValues(t, filepath.Join(chartDir, "values.yaml"))
	if v.values != "" {
		mergeValues(out, readValues(t, filepath.Join("testdata", v.values)))
	}
	for _, s := range v.set {
		key, val, ok := strings.Cut(s, "=")
		if !ok {
			t.Fatalf("--set %q is not key=value", s)
		}
		path := strings.Split(key, ".")
		m := out
		for _, k := range path[:len(path)-1] {
			next, ok := m[k].(map[string]any)
			if !ok {
				next = map[string]any{}
				m[k] = next
			}
			m = next
		}
		m[path[len(path)-1]] = val
	}
	return out
}

func readValues(t *testing.T, path string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := sigsyaml.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return m
}

// mergeValues lays src over dst as helm does: maps merge key by key, anything else replaces.
func mergeValues(dst, src map[string]any) {
	for k, v := range src {
		if sm, ok := v.(map[string]any); ok {
			if dm, ok := dst[k].(map[string]any); ok {
				mergeValues(dm, sm)
				continue
			}
		}
		dst[k] = v
	}
}

// get returns the value at a path of keys, or nil.
func (v values) get(path ...string) any {
	var cur any = map[string]any(v)
	for _, k := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[k]
	}
	return cur
}

func (v values) int(path ...string) int {
	f, _ := v.get(path...).(float64)
	return int(f)
}

func (v values) ints(path ...string) []int {
	list, _ := v.get(path...).([]any)
	out := make([]int, len(list))
	for i, x := range list {
		f, _ := x.(float64)
		out[i] = int(f)
	}
	return out
}

func (v values) strings(path ...string) map[string]string {
	m, _ := v.get(path...).(map[string]any)
	out := make(map[string]string, len(m))
	for k, x := range m {
		out[k], _ = x.(string)
	}
	return out
}

// execCommand runs a project script with the helm this test uses.
func execCommand(t *testing.T, name string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), "HELM="+helmBinary(t))
	return cmd
}

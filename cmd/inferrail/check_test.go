package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// check says which tokenizers load, and a tokenizer that does not load
// does not fail the config: its model routes without predictions.
func TestCheckReportsTokenizers(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "gw.yaml")
	cfg := `models:
  - name: inferrail/sim-8b
    tokenizer: builtin:sim
  - name: broken
    tokenizer: ` + filepath.Join(dir, "no-such-model") + `
  - name: plain
replicas:
  - {id: a, url: "http://127.0.0.1:8001", models: [inferrail/sim-8b, broken, plain]}
`
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if err := runCheck(t.Context(), []string{"--config", path}, &out, &errb); err != nil {
		t.Fatalf("check: %v\n%s", err, errb.String())
	}
	got := out.String()
	for _, want := range []string{
		"gw.yaml: ok",
		"model inferrail/sim-8b: tokenizer loaded (builtin:sim",
		"model broken: ",
		"model plain: no tokenizer configured",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("check output lacks %q:\n%s", want, got)
		}
	}
	if line := lineWith(got, "model broken: "); !strings.Contains(line, "no-such-model") {
		t.Errorf("the broken tokenizer's line does not say what failed: %q", line)
	}
	t.Logf("\n%s", got)
}

func lineWith(s, sub string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return ""
}

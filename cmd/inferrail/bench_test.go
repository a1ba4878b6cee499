package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/inferrail/inferrail/transport/requestlog"
)

// bench compare on real in-process fleets, end to end: every policy's
// cold fleet answers, the gateway predicts cache hits for cost_model, and
// bench report rebuilds the same report from the result files; with
// --request-log each run's gateway logs every request it served beside the
// run's name.
func TestBenchCompareInProcess(t *testing.T) {
	dir := t.TempDir()
	var out, errOut bytes.Buffer
	code := run([]string{"bench", "compare", "--workload", "W1",
		"--set", "prompts = 2\nsystem_tokens = [300, 600]\nquestion_tokens = [20, 40]\noutput_tokens = [4, 8]",
		"--rate", "10", "--duration", "4s", "--warmup", "1s", "--policies", "round_robin,cost_model",
		"--out", filepath.Join(dir, "results"), "--report", filepath.Join(dir, "report"),
		"--request-log", filepath.Join(dir, "requests")}, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out.String(), errOut.String())
	}
	md := out.String()
	for _, want := range []string{`real sweep "compare-W1": 2 runs made`, "| round_robin | ", "| cost_model | "} {
		if !strings.Contains(md, want) {
			t.Fatalf("output lacks %q:\n%s", want, md)
		}
	}
	for _, line := range strings.Split(md, "\n") {
		if !strings.HasPrefix(line, "| cost_model | ") || !strings.Contains(line, "%") {
			continue
		}
		cols := strings.Split(line, "|")
		// requests, ..., exact (13th column), ..., errors (16th).
		t.Logf("%s", line)
		if exact, errs := strings.TrimSpace(cols[13]), strings.TrimSpace(cols[16]); exact == "–" || errs != "0" {
			t.Fatalf("cost_model: prediction exact %q, errors %q: %s", exact, errs, line)
		}
	}
	logs, _ := filepath.Glob(filepath.Join(dir, "requests", "*", "*", "*.requests.jsonl"))
	if len(logs) != 2 {
		t.Fatalf("request logs %v, want one per run", logs)
	}
	for _, path := range logs {
		lines, err := requestlog.ReadFile(path)
		pol := strings.TrimSuffix(filepath.Base(path), "-r0.requests.jsonl")
		// 10 req/s for 4 s, the warm-up's requests included.
		if err != nil || len(lines) < 20 {
			t.Fatalf("%s: %v, %d lines", path, err, len(lines))
		}
		if l := lines[0]; l.Policy != pol || len(l.HashIDs) == 0 {
			t.Fatalf("%s: first line %+v", path, l)
		}
	}
	code = run([]string{"bench", "report", "--results", filepath.Join(dir, "results"), "--out", filepath.Join(dir, "again")}, &out, &errOut)
	a, err1 := os.ReadFile(filepath.Join(dir, "report", "report.md"))
	b, err2 := os.ReadFile(filepath.Join(dir, "again", "report.md"))
	if code != 0 || err1 != nil || err2 != nil || !bytes.Equal(a, b) {
		t.Fatalf("report rebuilt differently (exit %d, %v, %v)", code, err1, err2)
	}
}

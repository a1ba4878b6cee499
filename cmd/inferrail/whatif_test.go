package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/inferrail/inferrail/model/cost"
	"github.com/inferrail/inferrail/sim/whatif"
)

// inferrail whatif on a small generated workload writes the report, says
// the answer on stdout, draws progress on stderr, and a rerun resumes
// every point.
func TestWhatifWorkload(t *testing.T) {
	dir := t.TempDir()
	args := []string{"whatif", "--workload", "W1", "--rate", "4", "--requests", "120", "--policies", "round_robin,cost_model",
		"--replicas", "1..3", "--scale", "1", "--knee", "0", "--out", dir}
	var stdout, stderr bytes.Buffer
	if code := run(args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr.String())
	}
	for _, want := range []string{"W1 on sim", "round_robin", "cost_model", "report: " + dir + "/report.md"} {
		if !strings.Contains(stdout.String(), want) {
			t.Fatalf("stdout lacks %q:\n%s", want, stdout.String())
		}
	}
	if !strings.Contains(stderr.String(), "points (0 resumed)") || !strings.Contains(stderr.String(), "ETA") {
		t.Fatalf("no progress bar on stderr:\n%s", stderr.String())
	}
	for _, f := range []string{"report.md", "report.json", "replicas.svg", "knee-1.svg"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	stdout.Reset()
	if code := run(args, &stdout, &stderr); code != 0 {
		t.Fatalf("rerun: exit %d\n%s", code, stderr.String())
	}
	var rep whatif.Report
	b, _ := os.ReadFile(filepath.Join(dir, "report.json"))
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Ran != 0 || rep.Resumed == 0 || !strings.Contains(stdout.String(), "0 points simulated") {
		t.Fatalf("rerun ran %d, resumed %d:\n%s", rep.Ran, rep.Resumed, stdout.String())
	}
}

// A calibrated engine takes its prefill from the fragment and the rest from
// --engine-base.
func TestWhatifCalibratedEngine(t *testing.T) {
	dir := t.TempDir()
	frag := filepath.Join(dir, "cost.yaml")
	if err := os.WriteFile(frag, cost.Fragment(cost.Model{PrefillTokenSecs: 4e-5, PrefillPairSecs: 1e-9, PrefillFixedSecs: 0.006}), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := parseWhatifFlags([]string{"--workload", "W2", "--rate", "3", "--engine", frag, "--engine-base", "h100-8b",
		"--engine-block-size", "64", "--out", dir}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	p, _, err := f.plan(&bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	base, _ := whatif.Preset("h100-8b")
	l := p.Engine.Config.Latency
	if p.Engine.Name != "calibrated" || l.PrefillToken.Microseconds() != 40 || l.DecodeToken != base.Config.Latency.DecodeToken ||
		p.Engine.Config.BlockSize != 64 || p.Engine.Config.NumBlocks != base.Config.NumBlocks/4 {
		t.Fatalf("%+v", p.Engine)
	}
	if len(p.Routes) != len(whatif.DefaultRoutes()) || p.Requests != defaultWorkloadRequests || p.Fanout != 16 {
		t.Fatalf("routes %d, requests %d, fanout %d", len(p.Routes), p.Requests, p.Fanout)
	}
}

func TestWhatifFlagErrors(t *testing.T) {
	f := func(args []string, want ...string) {
		t.Helper()
		var stdout, stderr bytes.Buffer
		if code := run(append([]string{"whatif"}, args...), &stdout, &stderr); code == 0 {
			t.Fatalf("%v: exit 0", args)
		}
		for _, w := range want {
			if !strings.Contains(stderr.String(), w) {
				t.Fatalf("%v: stderr lacks %q:\n%s", args, w, stderr.String())
			}
		}
	}
	f(nil, "--trace or --workload: set one", "--out: required")
	f([]string{"--workload", "W1", "--out", "x"}, "needs --rate above 0")
	f([]string{"--trace", "t", "--workload", "W1", "--rate", "1", "--out", "x"}, "set one")
	f([]string{"--workload", "W1", "--rate", "1", "--out", "x", "--limit", "5"}, "--limit: only with --trace")
	f([]string{"--workload", "W1", "--rate", "1", "--out", "x", "--find-rate", "round_robin"}, "want POLICY:N")
	f([]string{"--workload", "W1", "--rate", "1", "--out", "x", "--find-rate", "kv_aware:3", "--policies", "round_robin"}, "not among --policies")
	f([]string{"--workload", "W1", "--rate", "1", "--out", "x", "--find-rate", "round_robin:3", "--scale", "2"}, "drop --scale")
	f([]string{"--workload", "W1", "--rate", "1", "--out", "x", "--engine", "fit"}, "--engine fit: needs --trace")
	f([]string{"--replicas", "5..2"}, "invalid value", "-replicas")
	f([]string{"--scale", "0"}, "invalid value", "-scale")
	f([]string{"--workload", "W9", "--rate", "1", "--out", t.TempDir()}, `unknown workload "W9"`)
	f([]string{"--workload", "W1", "--rate", "1", "--out", t.TempDir(), "--policies", "best"}, `policy "best"`)
	f([]string{"--workload", "W1", "--rate", "1", "--out", t.TempDir(), "--engine", "/nonexistent"}, "not a preset")
	f([]string{"--trace", "/nonexistent.jsonl", "--out", t.TempDir()}, "trace")
}

// --help names each default once.
func TestWhatifHelp(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"whatif", "--help"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d", code)
	}
	help := stderr.String()
	for _, d := range []string{`(default "sim")`, "(default 2..16)", "(default 1,1.5,2)", "(default 2s)", "(default 100ms)",
		"(default " + strings.Join(whatif.DefaultRoutes(), ",") + ")"} {
		if !strings.Contains(help, d) {
			t.Errorf("help lacks %q", d)
		}
	}
	for _, line := range strings.Split(help, "\n") {
		if strings.Count(line, "(default") > 1 {
			t.Errorf("a default twice: %q", line)
		}
	}
}

func TestCountList(t *testing.T) {
	f := func(in string, want []int, text string) {
		t.Helper()
		var l countList
		if err := l.Set(in); err != nil {
			t.Fatalf("%q: %v", in, err)
		}
		if !slices.Equal(l, want) || l.String() != text {
			t.Fatalf("%q: %v %q, want %v %q", in, []int(l), l.String(), want, text)
		}
	}
	f("2..5", []int{2, 3, 4, 5}, "2..5")
	f("2,4,8", []int{2, 4, 8}, "2,4,8")
	f("8, 2..4 ,3", []int{2, 3, 4, 8}, "2..4,8")
	f("1..2", []int{1, 2}, "1,2")
	for _, bad := range []string{"", "0", "3..1", "a", "1..", "1..100000", "2,,3", "-1..2"} {
		var l countList
		if err := l.Set(bad); err == nil {
			t.Errorf("%q accepted: %v", bad, []int(l))
		}
	}
}

func FuzzCountList(f *testing.F) {
	for _, s := range []string{"2..16", "2,4,8", "1..1,3", "5..2", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var l countList
		if err := l.Set(s); err != nil {
			return
		}
		if len(l) == 0 || len(l) > maxCounts || !slices.IsSorted(l) || l[0] < 1 {
			t.Fatalf("%q: %v", s, []int(l))
		}
		var again countList
		if err := again.Set(l.String()); err != nil || !slices.Equal(again, l) {
			t.Fatalf("%q: %q reads back as %v, %v", s, l.String(), []int(again), err)
		}
	})
}

func FuzzFloatList(f *testing.F) {
	for _, s := range []string{"1,1.5,2", "0", "NaN", "1e400", "2,"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var l floatList
		if err := l.Set(s); err != nil {
			return
		}
		for _, v := range l {
			if !(v > 0 && v <= 1e6) {
				t.Fatalf("%q: accepted %v", s, v)
			}
		}
	})
}

// On a request log, --engine fit fits the prefill to the log's TTFTs and
// the report compares a replay of the log's own fleet with what it measured.
func TestWhatifRequestLog(t *testing.T) {
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	args := []string{"whatif", "--trace", "../../sim/whatif/testdata/requestlog.jsonl", "--engine", "fit", "--engine-base", "h100-8b",
		"--policies", "cost_model,round_robin", "--replicas", "1..2", "--scale", "1", "--out", dir}
	if code := run(args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), "engine: prefill fitted to the fastest 10%") {
		t.Fatalf("no fit on stderr:\n%s", stderr.String())
	}
	if !strings.Contains(stdout.String(), "fidelity (cost_model on 2 replicas)") {
		t.Fatalf("no fidelity on stdout:\n%s", stdout.String())
	}
	md, _ := os.ReadFile(filepath.Join(dir, "report.md"))
	if !strings.Contains(string(md), "## Fidelity") || !strings.Contains(string(md), "| logged |") {
		t.Fatalf("no fidelity in the report:\n%s", md)
	}
}

// A trace with a request longer than the engine's context is refused before
// any point runs, saying how long and the way out.
func TestWhatifTraceTooLong(t *testing.T) {
	dir := t.TempDir()
	trace := filepath.Join(dir, "t.jsonl")
	line := `{"timestamp":%d,"input_length":%d,"output_length":10,"hash_ids":[%s]}` + "\n"
	ids := func(from, n int) string {
		s := make([]string, n)
		for i := range s {
			s[i] = strconv.Itoa(from + i)
		}
		return strings.Join(s, ",")
	}
	var b strings.Builder
	fmt.Fprintf(&b, line, 0, 100, ids(0, 1))
	fmt.Fprintf(&b, line, 1000, 40000, ids(1, 79))
	if err := os.WriteFile(trace, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"whatif", "--trace", trace, "--out", dir}, &stdout, &stderr); code == 0 {
		t.Fatal("exit 0")
	}
	if want := "its longest request needs 40010 tokens (prompt and output), more than engine sim's max_model_len 32768"; !strings.Contains(stderr.String(), want) {
		t.Fatalf("stderr lacks %q:\n%s", want, stderr.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "points")); !os.IsNotExist(err) {
		t.Fatalf("a point ran: %v", err)
	}
	// With --fit-context the engines get the context the bench sweeps give
	// a trace's point, and say so.
	stdout.Reset()
	stderr.Reset()
	args := []string{"whatif", "--trace", trace, "--out", dir, "--fit-context", "--policies", "round_robin", "--replicas", "1", "--scale", "1"}
	if code := run(args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d with --fit-context:\n%s", code, stderr.String())
	}
	if want := "engine sim gets max_model_len 65536"; !strings.Contains(stderr.String(), want) {
		t.Fatalf("stderr lacks %q:\n%s", want, stderr.String())
	}
}

package main

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// benchLine is one result line of `go test -bench` output:
//
//	BenchmarkPickActor/replicas=8-2   372715   3286 ns/op   2514 p50-ns   520 B/op   7 allocs/op
type benchLine struct {
	Name       string             `json:"name"` // as printed, with the -GOMAXPROCS suffix
	Iterations int64              `json:"iterations"`
	Metrics    map[string]float64 `json:"metrics"` // unit → value
	Units      []string           `json:"-"`       // the units in printed order
}

// parseBenchLine reads one result line; ok is false for any other line
// (headers, PASS, logs) and for a line that does not parse whole.
func parseBenchLine(line string) (b benchLine, ok bool) {
	f := strings.Fields(line)
	if len(f) < 4 || len(f)%2 != 0 || !strings.HasPrefix(f[0], "Benchmark") {
		return b, false
	}
	n, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil || n <= 0 {
		return b, false
	}
	b = benchLine{Name: f[0], Iterations: n, Metrics: map[string]float64{}}
	for i := 2; i < len(f); i += 2 {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			return benchLine{}, false
		}
		unit := f[i+1]
		if _, dup := b.Metrics[unit]; dup {
			return benchLine{}, false
		}
		b.Metrics[unit] = v
		b.Units = append(b.Units, unit)
	}
	return b, true
}

// parseBench reads every result line of go test -bench output.
func parseBench(out string) []benchLine {
	var bs []benchLine
	for line := range strings.Lines(out) {
		if b, ok := parseBenchLine(line); ok {
			bs = append(bs, b)
		}
	}
	return bs
}

// String prints b as go test does, tab-separated; parseBenchLine reads it back.
func (b benchLine) String() string {
	var s strings.Builder
	fmt.Fprintf(&s, "%s\t%d", b.Name, b.Iterations)
	for _, u := range b.Units {
		fmt.Fprintf(&s, "\t%s %s", strconv.FormatFloat(b.Metrics[u], 'g', -1, 64), u)
	}
	return s.String()
}

// benchName splits "BenchmarkPickActor/replicas=64-2" into the benchmark,
// its sub-benchmark and the GOMAXPROCS suffix.
func benchName(name string) (bench, sub string, procs int) {
	procs = 1
	if i := strings.LastIndexByte(name, '-'); i > 0 {
		if n, err := strconv.Atoi(name[i+1:]); err == nil && n > 0 {
			name, procs = name[:i], n
		}
	}
	bench, sub, _ = strings.Cut(name, "/")
	return bench, sub, procs
}

// neverLate is what TestPickNeverLate logged about its decisions.
type neverLate struct {
	Decisions int           `json:"decisions"`
	Misses    int           `json:"deadline_misses"`
	Late      int           `json:"observed_after_deadline"`
	Worst     time.Duration `json:"worst_late_ns"`
	Passed    bool          `json:"passed"`
	Line      string        `json:"line"`
}

var neverLateRe = regexp.MustCompile(`(\d+) decisions, (\d+) deadline misses, (\d+) decisions observed after their deadline \(worst ([^)]*)\)`)

// parseNeverLate reads `go test -v -run TestPickNeverLate` output; ok is
// false when the test's summary line is not there.
func parseNeverLate(out string) (n neverLate, ok bool) {
	m := neverLateRe.FindStringSubmatch(out)
	if m == nil {
		return n, false
	}
	var err error
	if n.Decisions, err = strconv.Atoi(m[1]); err != nil {
		return neverLate{}, false
	}
	if n.Misses, err = strconv.Atoi(m[2]); err != nil {
		return neverLate{}, false
	}
	if n.Late, err = strconv.Atoi(m[3]); err != nil {
		return neverLate{}, false
	}
	if n.Worst, err = time.ParseDuration(m[4]); err != nil {
		return neverLate{}, false
	}
	n.Line = m[0]
	n.Passed = strings.Contains(out, "--- PASS: TestPickNeverLate") && !strings.Contains(out, "--- FAIL: TestPickNeverLate")
	return n, true
}

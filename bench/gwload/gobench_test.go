package main

import (
	"strings"
	"testing"
	"time"
)

// pickOutput is `go test -run '^$' -bench Pick -benchmem ./actors/fleet/`
// as captured on the benchmark machine (trimmed).
const pickOutput = `goos: linux
goarch: amd64
pkg: github.com/inferrail/inferrail/actors/fleet
cpu: AMD EPYC
BenchmarkPickActor/replicas=8-2         	  372715	      3286 ns/op	   2949302 max-ns	      2514 p50-ns	     18658 p99-ns	     520 B/op	       7 allocs/op
BenchmarkPickActor/replicas=64-2        	  207376	      5013 ns/op	   6185331 max-ns	      3445 p50-ns	     32268 p99-ns	     520 B/op	       8 allocs/op
BenchmarkPickActorParallel/replicas=8-2 	  344538	      3287 ns/op	     527 B/op	       8 allocs/op
BenchmarkPickDirect/replicas=8-2                 	 4419711	       271.9 ns/op	   2940829 max-ns	       200.0 p50-ns	       331.0 p99-ns	      16 B/op	       1 allocs/op
PASS
ok  	github.com/inferrail/inferrail/actors/fleet	13.130s
`

func TestParseBench(t *testing.T) {
	bs := parseBench(pickOutput)
	if len(bs) != 4 {
		t.Fatalf("%d lines, want 4: %+v", len(bs), bs)
	}
	b := bs[0]
	if b.Name != "BenchmarkPickActor/replicas=8-2" || b.Iterations != 372715 || b.Metrics["ns/op"] != 3286 ||
		b.Metrics["p99-ns"] != 18658 || b.Metrics["allocs/op"] != 7 || len(b.Units) != 6 {
		t.Fatalf("first line: %+v", b)
	}
	if d := bs[3]; d.Metrics["ns/op"] != 271.9 || d.Metrics["p50-ns"] != 200 {
		t.Fatalf("direct line: %+v", d)
	}
	rows := pickRows(bs)
	if len(rows) != 2 || rows[0].Sub != "replicas=8" || rows[0].Actor != &bs[0] || rows[0].ActorParallel != &bs[2] ||
		rows[0].Direct != &bs[3] || rows[1].Actor != &bs[1] || rows[1].Direct != nil {
		t.Fatalf("rows: %+v", rows)
	}
}

func TestParseBenchLineRejects(t *testing.T) {
	for _, line := range []string{
		"",
		"PASS",
		"cpu: AMD EPYC",
		"BenchmarkX", // a benchmark's name printed before a b.Log line
		"BenchmarkX-2 10",
		"BenchmarkX-2 10 5",                // a value without a unit
		"BenchmarkX-2 ten 5 ns/op",         // iterations not a number
		"BenchmarkX-2 0 5 ns/op",           // no iterations
		"BenchmarkX-2 10 fast ns/op",       // value not a number
		"BenchmarkX-2 10 NaN ns/op",        // not a measurement
		"BenchmarkX-2 10 5 ns/op 6 ns/op",  // a unit twice
		"    bench_test.go:12: BenchmarkX", // a log line
	} {
		if b, ok := parseBenchLine(line); ok {
			t.Errorf("%q parsed as %+v", line, b)
		}
	}
}

func TestBenchName(t *testing.T) {
	f := func(name, bench, sub string, procs int) {
		t.Helper()
		b, s, p := benchName(name)
		if b != bench || s != sub || p != procs {
			t.Errorf("benchName(%q) = %q, %q, %d; want %q, %q, %d", name, b, s, p, bench, sub, procs)
		}
	}
	f("BenchmarkPickActor/replicas=64-2", "BenchmarkPickActor", "replicas=64", 2)
	f("BenchmarkPickActor/replicas=64", "BenchmarkPickActor", "replicas=64", 1)
	f("BenchmarkX-16", "BenchmarkX", "", 16)
	f("BenchmarkX/a-b/c=1-4", "BenchmarkX", "a-b/c=1", 4)
}

func TestParseNeverLate(t *testing.T) {
	out := `=== RUN   TestPickNeverLate
    time=2026-11-29T19:04:31.546Z level=INFO msg="actor system started" component=protoactor
    fleet_test.go:389: 5885 decisions, 515 deadline misses, 3 decisions observed after their deadline (worst 196.571µs)
--- PASS: TestPickNeverLate (0.02s)
PASS
`
	n, ok := parseNeverLate(out)
	if !ok || n.Decisions != 5885 || n.Misses != 515 || n.Late != 3 || n.Worst != 196571*time.Nanosecond || !n.Passed {
		t.Fatalf("parseNeverLate = %+v, %v", n, ok)
	}
	n, ok = parseNeverLate(strings.Replace(out, "--- PASS", "--- FAIL", 1))
	if !ok || n.Passed {
		t.Fatalf("a failed test: %+v, %v", n, ok)
	}
	if _, ok := parseNeverLate("--- PASS: TestPickNeverLate (0.02s)\n"); ok {
		t.Fatal("no summary line: parsed")
	}
	if _, ok := parseNeverLate("1 decisions, 2 deadline misses, 3 decisions observed after their deadline (worst soon)"); ok {
		t.Fatal("a bad duration: parsed")
	}
}

// FuzzParseBenchLine: any line either does not parse, or parses into a
// result that prints back to a line that parses the same.
func FuzzParseBenchLine(f *testing.F) {
	for line := range strings.Lines(pickOutput) {
		f.Add(line)
	}
	f.Add("BenchmarkX-2 1 -0 ns/op 1e300 p99-ns")
	f.Fuzz(func(t *testing.T, line string) {
		b, ok := parseBenchLine(line)
		if !ok {
			return
		}
		if b.Iterations <= 0 || len(b.Units) != len(b.Metrics) || !strings.HasPrefix(b.Name, "Benchmark") {
			t.Fatalf("%q parsed as %+v", line, b)
		}
		again, ok := parseBenchLine(b.String())
		if !ok || again.Name != b.Name || again.Iterations != b.Iterations || len(again.Units) != len(b.Units) {
			t.Fatalf("%q → %q → %+v, %v", line, b.String(), again, ok)
		}
		for i, u := range b.Units {
			if again.Units[i] != u || again.Metrics[u] != b.Metrics[u] {
				t.Fatalf("%q: %s %v came back as %s %v", line, u, b.Metrics[u], again.Units[i], again.Metrics[again.Units[i]])
			}
		}
	})
}

// FuzzParseNeverLate: any output either has no summary, or one whose line is
// in the output and whose counts are not negative.
func FuzzParseNeverLate(f *testing.F) {
	f.Add("    fleet_test.go:389: 5885 decisions, 515 deadline misses, 3 decisions observed after their deadline (worst 196.571µs)\n--- PASS: TestPickNeverLate (0.02s)\n")
	f.Add("0 decisions, 0 deadline misses, 0 decisions observed after their deadline (worst 0s)")
	f.Fuzz(func(t *testing.T, out string) {
		n, ok := parseNeverLate(out)
		if !ok {
			return
		}
		if !strings.Contains(out, n.Line) || n.Decisions < 0 || n.Misses < 0 || n.Late < 0 {
			t.Fatalf("%q parsed as %+v", out, n)
		}
	})
}

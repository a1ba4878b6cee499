package main

import (
	"fmt"
	"os"
	"strings"
	"time"
)

// decision is the decision-latency part of the report: the actors/fleet
// Pick benchmarks and TestPickNeverLate, run by scripts/bench-gateway.sh.
type decision struct {
	BenchCommand string      `json:"bench_command"`
	BenchOutput  string      `json:"bench_output"`
	Bench        []benchLine `json:"bench"`
	LateCommand  string      `json:"never_late_command"`
	LateOutput   string      `json:"never_late_output"`
	Late         *neverLate  `json:"never_late"`
	Problems     []string    `json:"problems,omitempty"`
}

func readDecision(c *config) *decision {
	if c.pickBench == "" && c.neverLate == "" {
		return nil
	}
	d := &decision{BenchCommand: c.pickCmd, LateCommand: c.neverCmd}
	if c.pickBench != "" {
		b, err := os.ReadFile(c.pickBench)
		if err != nil {
			d.Problems = append(d.Problems, err.Error())
		}
		d.BenchOutput = string(b)
		d.Bench = parseBench(d.BenchOutput)
	}
	if c.neverLate != "" {
		b, err := os.ReadFile(c.neverLate)
		if err != nil {
			d.Problems = append(d.Problems, err.Error())
		}
		d.LateOutput = string(b)
		if n, ok := parseNeverLate(d.LateOutput); ok {
			d.Late = &n
		}
	}
	return d
}

// pickRow is one row of the decision-latency table: a replica count, with
// the actor path and the direct computation side by side.
type pickRow struct {
	Sub           string
	Actor, Direct *benchLine
	ActorParallel *benchLine
}

// pickRows pairs BenchmarkPickActor, BenchmarkPickActorParallel and
// BenchmarkPickDirect by sub-benchmark, in the order the actor ones ran.
func pickRows(bs []benchLine) []pickRow {
	var rows []pickRow
	index := map[string]int{}
	for i := range bs {
		bench, sub, _ := benchName(bs[i].Name)
		k, ok := index[sub]
		if !ok {
			k = len(rows)
			index[sub] = k
			rows = append(rows, pickRow{Sub: sub})
		}
		switch bench {
		case "BenchmarkPickActor":
			rows[k].Actor = &bs[i]
		case "BenchmarkPickActorParallel":
			rows[k].ActorParallel = &bs[i]
		case "BenchmarkPickDirect":
			rows[k].Direct = &bs[i]
		}
	}
	return rows
}

func (r *report) evaluateDecision() {
	d := r.Decision
	if d == nil {
		r.fail("decision latency: not run (no --pick-bench or --never-late)")
		return
	}
	for _, p := range d.Problems {
		r.fail("decision latency: %s", p)
	}
	actors := 0
	for _, row := range pickRows(d.Bench) {
		if row.Actor == nil {
			continue
		}
		actors++
		p99, ok := row.Actor.Metrics["p99-ns"]
		if !ok {
			r.fail("decision latency: %s reports no p99-ns", row.Actor.Name)
			continue
		}
		got := time.Duration(p99)
		r.bound(fmt.Sprintf("decision p99 through the actor path (least_request), %s", strings.ReplaceAll(row.Sub, "=", " ")),
			dur(got), "≤ "+dur(decisionP99), got <= decisionP99)
	}
	if d.BenchOutput != "" && actors == 0 {
		r.fail("decision latency: no BenchmarkPickActor results in the benchmark output")
	}
	if d.LateOutput != "" {
		if d.Late == nil {
			r.fail("decision latency: no TestPickNeverLate summary line in its output")
			return
		}
		l := d.Late
		// Pick reads the clock after the answer arrives and hands no decision
		// over at or after the deadline; a caller's own clock read after
		// Pick returns can still land past it by the instructions (or a
		// preemption) in between, which the test tolerates within a bound.
		r.bound("no decision handed over after its deadline (TestPickNeverLate)",
			fmt.Sprintf("test %s; %d of %d decisions seen by their callers after the deadline (worst %v); %d deadline misses",
				passText(l.Passed), l.Late, l.Decisions, l.Worst, l.Misses),
			"test passes", l.Passed)
	}
}

func passText(ok bool) string {
	if ok {
		return "passed"
	}
	return "FAILED"
}

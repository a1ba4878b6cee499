package main

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"time"
)

// decision is the decision-latency part of the report: the actors/fleet
// Pick and cost_model benchmarks and TestPickNeverLate, run by
// scripts/bench-gateway.sh.
type decision struct {
	BenchCommand string      `json:"bench_command"`
	BenchOutput  string      `json:"bench_output"`
	Bench        []benchLine `json:"bench"`
	CostCommand  string      `json:"cost_command"`
	CostOutput   string      `json:"cost_output"`
	Cost         []benchLine `json:"cost"`
	LateCommand  string      `json:"never_late_command"`
	LateOutput   string      `json:"never_late_output"`
	Late         *neverLate  `json:"never_late"`
	Problems     []string    `json:"problems,omitempty"`
}

func readDecision(c *config) *decision {
	if c.pickBench == "" && c.neverLate == "" && c.costBench == "" {
		return nil
	}
	d := &decision{BenchCommand: c.pickCmd, LateCommand: c.neverCmd, CostCommand: c.costCmd}
	if c.costBench != "" {
		b, err := os.ReadFile(c.costBench)
		if err != nil {
			d.Problems = append(d.Problems, err.Error())
		}
		d.CostOutput = string(b)
		d.Cost = parseBench(d.CostOutput)
	}
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

// costTargets are issue 16's bounds on an 8,000-token cost_model decision
// through the actors (BenchmarkCostModelActor), by sub-benchmark: fanout 0
// asks every replica for an estimate, 16 only a shortlist.
var costTargets = []struct {
	Sub   string
	Name  string
	Bound time.Duration
}{
	{"fanout=0/replicas=8", "8 replicas", 50 * time.Microsecond},
	{"fanout=16/replicas=64", "64 replicas, shortlist of 16", 60 * time.Microsecond},
	{"fanout=16/replicas=256", "256 replicas, shortlist of 16", 100 * time.Microsecond},
}

// benchGroup is every run (-count) of one benchmark and sub-benchmark.
type benchGroup struct {
	Bench, Sub string
	Runs       []*benchLine
}

// median is the median of unit over the group's runs that report it; ok
// is false when none does.
func (g benchGroup) median(unit string) (v float64, ok bool) {
	var xs []float64
	for _, b := range g.Runs {
		if x, has := b.Metrics[unit]; has {
			xs = append(xs, x)
		}
	}
	if len(xs) == 0 {
		return 0, false
	}
	return medianFloat(xs), true
}

// groupBench groups result lines by benchmark and sub-benchmark, in the
// order each first appears, whatever GOMAXPROCS suffix they carry.
func groupBench(bs []benchLine) []benchGroup {
	var gs []benchGroup
	index := map[[2]string]int{}
	for i := range bs {
		bench, sub, _ := benchName(bs[i].Name)
		k, ok := index[[2]string{bench, sub}]
		if !ok {
			k = len(gs)
			index[[2]string{bench, sub}] = k
			gs = append(gs, benchGroup{Bench: bench, Sub: sub})
		}
		gs[k].Runs = append(gs[k].Runs, &bs[i])
	}
	return gs
}

// evaluateCost checks the cost_model decision's median p99 over -count runs.
func (r *report) evaluateCost(d *decision) {
	groups := groupBench(d.Cost)
	for _, t := range costTargets {
		name := fmt.Sprintf("8,000-token cost_model decision p99 through the actors, %s (median of runs)", t.Name)
		i := slices.IndexFunc(groups, func(g benchGroup) bool { return g.Bench == "BenchmarkCostModelActor" && g.Sub == t.Sub })
		if i < 0 {
			r.bound(name, "BenchmarkCostModelActor/"+t.Sub+" not in the benchmark output", "≤ "+dur(t.Bound), false)
			continue
		}
		g := groups[i]
		p99, ok := g.median("p99-ns")
		if !ok {
			r.bound(name, "no p99-ns reported", "≤ "+dur(t.Bound), false)
			continue
		}
		var each []string
		for _, b := range g.Runs {
			each = append(each, dur(time.Duration(b.Metrics["p99-ns"])))
		}
		got := time.Duration(p99)
		r.bound(name, fmt.Sprintf("%s (runs: %s)", dur(got), strings.Join(each, ", ")), "≤ "+dur(t.Bound), got <= t.Bound)
	}
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
	if d.CostCommand != "" || d.CostOutput != "" {
		r.evaluateCost(d)
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

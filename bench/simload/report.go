package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"

	"github.com/inferrail/inferrail/bench/loadgen"
)

// benchResult is one benchmark's outcome: the figures for the table, the
// bounds it missed and its raw numbers. It is owned by the goroutine that
// runs the benchmark.
type benchResult struct {
	ID      int      `json:"id"`
	Title   string   `json:"title"`
	Figures []figure `json:"-"` // the table says them

	Failures []string `json:"failures,omitempty"`
	Raw      any      `json:"raw"`
}

// figure is one row of the results table.
type figure struct {
	Name   string `json:"name"`
	Value  string `json:"value"`
	Bound  string `json:"bound,omitempty"`
	Status string `json:"status,omitempty"` // PASS or FAIL when Bound is set
}

// add records an informational figure.
func (r *benchResult) add(name, value string) {
	r.Figures = append(r.Figures, figure{Name: name, Value: value})
}

// bound records a figure that the benchmark asserts, and a failure when ok
// is false.
func (r *benchResult) bound(name, value, bound string, ok bool) {
	f := figure{Name: name, Value: value, Bound: bound, Status: "PASS"}
	if !ok {
		f.Status = "FAIL"
		r.fail("%s: %s, want %s", name, value, bound)
	}
	r.Figures = append(r.Figures, f)
}

func (r *benchResult) fail(format string, args ...any) {
	r.Failures = append(r.Failures, fmt.Sprintf(format, args...))
}

// Pass reports whether the benchmark met every bound.
func (r *benchResult) Pass() bool { return len(r.Failures) == 0 }

// runInfo is what the report says about the run around the numbers.
type runInfo struct {
	Date       time.Time     `json:"date"`
	Command    string        `json:"command"`
	Invocation string        `json:"invocation"`
	Commit     string        `json:"commit"`
	SimBin     string        `json:"sim_binary"`
	SimVersion string        `json:"sim_version"`
	Machine    machineInfo   `json:"machine"`
	Elapsed    time.Duration `json:"elapsed_ns"`
}

type machineInfo struct {
	NProc      int    `json:"nproc"`
	CPUModel   string `json:"cpu_model"`
	Kernel     string `json:"kernel"`
	MemTotal   string `json:"mem_total"`
	GoVersion  string `json:"go_version"`
	WrkVersion string `json:"wrk_version"`
	NoFile     string `json:"fd_limit"`
	LoadStart  string `json:"loadavg_at_start"`
	LoadEnd    string `json:"loadavg_at_end"`
}

// gatherInfo describes the machine, the tree and the simulator binary.
func gatherInfo(simBin, wrkBin string) runInfo {
	info := runInfo{Date: time.Now().UTC(), SimBin: simBin, Commit: loadgen.GitCommit()}
	if out, err := exec.Command(simBin, "version").Output(); err == nil {
		info.SimVersion = strings.TrimSpace(string(out))
	}
	m := &info.Machine
	m.NProc = runtime.NumCPU() // as nproc: the CPUs this process may run on
	m.GoVersion = runtime.Version()
	m.CPUModel = loadgen.ProcField("/proc/cpuinfo", "model name")
	m.MemTotal = loadgen.ProcField("/proc/meminfo", "MemTotal")
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = "Linux " + strings.TrimSpace(string(b))
	}
	m.WrkVersion = loadgen.WrkVersion(wrkBin)
	if f := strings.Fields(loadgen.ProcField("/proc/self/limits", "Max open files")); len(f) >= 2 {
		m.NoFile = "soft " + f[0] + ", hard " + f[1]
	}
	m.LoadStart = loadgen.LoadAvg()
	return info
}

// renderTable writes the Markdown table of every benchmark's figures.
func renderTable(w io.Writer, results []*benchResult) {
	fmt.Fprintln(w, "| # | benchmark | figure | value | bound | result |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|")
	for _, r := range results {
		for i, f := range r.Figures {
			title := ""
			if i == 0 {
				title = r.Title
			}
			fmt.Fprintf(w, "| %d | %s | %s | %s | %s | %s |\n", r.ID, mdCell(title), mdCell(f.Name),
				mdCell(f.Value), mdCell(f.Bound), f.Status)
		}
		status := "**PASS**"
		if !r.Pass() {
			status = "**FAIL**"
		}
		fmt.Fprintf(w, "| %d | | **benchmark %d** | | | %s |\n", r.ID, r.ID, status)
	}
}

func mdCell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// renderReport writes the whole results file.
func renderReport(w io.Writer, info runInfo, results []*benchResult) error {
	m := info.Machine
	fmt.Fprintf(w, "# Simulator load benchmarks, %s\n\n", info.Date.Format("2006-01-02"))
	fmt.Fprintf(w, "- Command: `%s`\n", info.Command)
	fmt.Fprintf(w, "- Load generator invocation: `%s`\n", info.Invocation)
	fmt.Fprintf(w, "- Commit: %s; simulator: `%s` (%s)\n", info.Commit, info.SimBin, info.SimVersion)
	fmt.Fprintf(w, "- Machine: nproc %d, %s, %s, %s RAM, %s; %s; fd limit %s\n", m.NProc, m.CPUModel, m.Kernel,
		m.MemTotal, m.GoVersion, m.WrkVersion, m.NoFile)
	fmt.Fprintf(w, "- Date: %s; all benchmarks took %.0f s; load average %s at the start, %s at the end\n\n",
		info.Date.Format(time.RFC3339), info.Elapsed.Seconds(), m.LoadStart, m.LoadEnd)
	fmt.Fprintf(w, "The load generator (bench/simload, or wrk) and the simulator share the machine's %d CPUs with\n", m.NProc)
	fmt.Fprintf(w, "whatever else runs on it, so absolute throughput and latency are a floor, not the simulator's\n")
	fmt.Fprintf(w, "ceiling. CPU time is read per process (the simulator's from /proc/<pid>/stat, in 10 ms ticks),\n")
	fmt.Fprintf(w, "and \"other processes\" is the rest of /proc/stat's busy time over the same interval.\n\n")
	renderTable(w, results)
	fmt.Fprintln(w)
	failed := false
	for _, r := range results {
		for _, f := range r.Failures {
			if !failed {
				fmt.Fprintf(w, "## Failures\n\n")
				failed = true
			}
			fmt.Fprintf(w, "- benchmark %d: %s\n", r.ID, f)
		}
	}
	if failed {
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "## Raw numbers\n\n```json\n")
	raw, err := json.MarshalIndent(struct {
		Run        runInfo        `json:"run"`
		Benchmarks []*benchResult `json:"benchmarks"`
	}{info, results}, "", "  ")
	if err != nil {
		return err
	}
	w.Write(raw)
	fmt.Fprintf(w, "\n```\n")
	return nil
}

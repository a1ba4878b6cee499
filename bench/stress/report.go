package stress

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// WriteTable writes results as a Markdown table: scenario, figures, bound,
// PASS or FAIL, duration, and the CPU the suite and every other process used
// meanwhile; then each failure and leak in full.
func WriteTable(w io.Writer, results []*Result) {
	fmt.Fprintln(w, "| # | scenario | measured | bound | result | time | CPU: suite / others |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|")
	for i, r := range results {
		verdict := "PASS"
		if !r.Passed() {
			verdict = "**FAIL**"
		}
		measured := strings.Join(r.Figures, "; ")
		if r.Leak.Leaked {
			measured += "; **leaked**: " + r.Leak.String()
		}
		fmt.Fprintf(w, "| %d | %s | %s | %s | %s | %s | %.2f / %.2f |\n", i+1, cell(r.Title), cell(measured), cell(r.Bound),
			verdict, r.Duration.Round(100*time.Millisecond), r.SelfCores, r.OtherCores)
	}
	var failed []*Result
	for _, r := range results {
		if !r.Passed() {
			failed = append(failed, r)
		}
	}
	if len(failed) == 0 {
		return
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Failures:")
	fmt.Fprintln(w)
	for _, r := range failed {
		for _, f := range r.Failures {
			fmt.Fprintf(w, "- %s: %s\n", r.Name, cell(f))
		}
		if r.Leak.Leaked {
			fmt.Fprintf(w, "- %s: leak check: %s after %s\n", r.Name, r.Leak, r.Leak.Waited.Round(time.Millisecond))
		}
	}
}

// LeakSummary is one line on the leak checks of results: the largest
// difference from baseline seen, in goroutines and file descriptors.
func LeakSummary(results []*Result) string {
	var dg, df int
	leaked := 0
	for _, r := range results {
		dg = max(dg, r.Leak.After.Goroutines-r.Leak.Before.Goroutines)
		df = max(df, r.Leak.After.FDs-r.Leak.Before.FDs)
		if r.Leak.Leaked {
			leaked++
		}
	}
	return fmt.Sprintf("leak checks: %d of %d scenarios leaked; largest difference from each scenario's baseline once settled: %+d goroutines, %+d fds (allowed +%d, +%d)",
		leaked, len(results), dg, df, defaultLeakBounds.Goroutines, defaultLeakBounds.FDs)
}

// cell makes s safe inside a Markdown table cell.
func cell(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	return strings.ReplaceAll(s, "\n", " ")
}

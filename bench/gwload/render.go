package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/inferrail/inferrail/bench/loadgen"
)

func mdCell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

func status(c check) string {
	switch {
	case c.Reported:
		return "—"
	case c.Pass:
		return "met"
	}
	return "**MISSED**"
}

// renderChecks writes the targets table.
func renderChecks(w io.Writer, r *report) {
	fmt.Fprintln(w, "| target | measured | bound | result |")
	fmt.Fprintln(w, "|---|---|---|---|")
	for _, c := range r.Checks {
		fmt.Fprintf(w, "| %s | %s | %s | %s |\n", mdCell(c.Name), mdCell(c.Value), mdCell(c.Bound), status(c))
	}
}

// renderSummary writes the tables a terminal wants: targets and medians.
func renderSummary(w io.Writer, r *report) {
	renderChecks(w, r)
	for _, ms := range r.Summary {
		fmt.Fprintln(w)
		renderMode(w, ms)
	}
	if len(r.Failures) > 0 {
		fmt.Fprintln(w)
		for _, f := range r.Failures {
			fmt.Fprintf(w, "- FAIL: %s\n", f)
		}
	}
}

// renderMode writes one request kind's median table.
func renderMode(w io.Writer, ms modeSummary) {
	n := len(ms.Targets[0].P50)
	fmt.Fprintf(w, "%s /v1/completions, max_tokens 1 — medians over %d rounds:\n\n", modeTitle(ms.Mode), n)
	fmt.Fprintln(w, "| path | p50 | p99 | added p50 | added p99 | proxy CPU (cores, µs/request, of which kernel) | proxy context switches / request (of which preempted) | errors |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|")
	for _, t := range ms.Targets {
		added50, added99, cpu, sw := "—", "—", "—", "—"
		if t.Target != direct {
			added50, added99 = dur(t.MedAddedP50), dur(t.MedAddedP99)
			cpu = fmt.Sprintf("%.2f, %.1f µs (%.1f µs)", t.MedProxyCores, t.MedProxyUs, t.MedSysUs)
			sw = fmt.Sprintf("%.2f (%.2f)", t.MedSwitches, t.MedInvol)
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %d |\n", t.Target, dur(t.MedP50), dur(t.MedP99), added50, added99, cpu, sw, t.Errors)
	}
	for _, rt := range ms.Ratios {
		of, to := ms.target(rt.Of), ms.target(rt.To)
		user, userOK := loadgen.Ratio(usDur(of.MedProxyUs-of.MedSysUs), usDur(to.MedProxyUs-to.MedSysUs))
		kernel, kernelOK := loadgen.Ratio(usDur(of.MedSysUs), usDur(to.MedSysUs))
		fmt.Fprintf(w, "| **%s / %s** | | | **%s** | **%s** | %s CPU per request (own code %s, kernel %s) | | |\n",
			rt.Of, rt.To, ratioText(rt.P50, rt.P50Defined), ratioText(rt.P99, rt.P99Defined), ratioText(rt.CPU, rt.CPUDefined),
			ratioText(user, userOK), ratioText(kernel, kernelOK))
	}
}

// renderReport writes the whole results file.
func renderReport(w io.Writer, r *report) error {
	i := r.Info
	fmt.Fprintf(w, "# Gateway overhead and decision latency, %s\n\n", i.Date.Format("2006-01-02"))
	fmt.Fprintf(w, "Issue 3, \"Benchmarks committed under bench/results\", and issue 16's table (\"It must show\").\n")
	fmt.Fprintf(w, "Everything below was measured in one run of\n")
	fmt.Fprintf(w, "`%s`.\n\n", i.Command)
	fmt.Fprintf(w, "- Command: `%s`\n", i.Command)
	fmt.Fprintf(w, "- Load generator invocation: `%s`\n", i.Invocation)
	fmt.Fprintf(w, "- Commit: %s; binary `%s` (%s)\n", i.Commit, i.Bin, i.BinVersion)
	fmt.Fprintf(w, "- Machine: nproc %d, %s, %s, %s RAM\n", i.NProc, i.CPUModel, i.Kernel, i.MemTotal)
	fmt.Fprintf(w, "- Versions: %s; %s; %s\n", i.GoVersion, i.NginxVersion, i.WrkVersion)
	fmt.Fprintf(w, "- Date: %s; the load benchmark took %.0f s; load average %s before, %s after\n",
		i.Date.Format(time.RFC3339), i.Elapsed.Seconds(), i.LoadStart, i.LoadEnd)
	other, worst := otherCores(r.Runs)
	fmt.Fprintf(w, "- Other processes: %.2f cores busy in the second before the benchmark; during the runs %.2f cores\n", i.BusyBefore, other)
	fmt.Fprintf(w, "  (median), %.2f at most\n\n", worst)
	if n := len(r.Discarded); n > 0 {
		fmt.Fprintf(w, "%d runs (whole rounds) were discarded and run again because other processes used more than %v\n", n, r.Config["max_other_cores"])
		fmt.Fprintf(w, "cores during them; they are listed apart below.\n\n")
	}
	if i.BusyBefore > 0.3 || worst > 0.5 {
		fmt.Fprintf(w, "**Warning: something else was using the CPUs while this ran; the latencies are not to be trusted.**\n\n")
	}

	fmt.Fprintf(w, "## Targets\n\n")
	renderChecks(w, r)
	fmt.Fprintln(w)
	if len(r.Failures) > 0 {
		fmt.Fprintf(w, "Missed or failed:\n\n")
		for _, f := range r.Failures {
			fmt.Fprintf(w, "- %s\n", mdCell(f))
		}
		fmt.Fprintln(w)
	}

	cfg := r.Config
	fmt.Fprintf(w, "## 1. Gateway overhead\n\n")
	fmt.Fprintf(w, "%v `inferrail sim --zero-latency` processes serve every path; the same processes, pids and ports\n", cfg["sims"])
	fmt.Fprintf(w, "throughout. Paths: **direct** (the client round robin over the simulators), **nginx**\n")
	fmt.Fprintf(w, "(`scripts/nginx-proxy.sh`: Debian's nginx, round-robin `proxy_pass` with upstream keep-alive, one\n")
	fmt.Fprintf(w, "process), **fastproxy** (`bench/fastproxy`: a minimal fasthttp reverse proxy, round robin, upstream\n")
	fmt.Fprintf(w, "keep-alive, the response streamed; the floor for a Go proxy on the gateway's libraries),\n")
	fmt.Fprintf(w, "**gateway** (`inferrail serve`, least_request, no tokenizer) and **gateway-cost_model**\n")
	fmt.Fprintf(w, "(`inferrail serve`, cost_model with `tokenizer: builtin:sim`, the simulators' own tokenizer); their\n")
	fmt.Fprintf(w, "configs are below.\n\n")
	fmt.Fprintf(w, "Load is open loop at %v requests/s: request *i* is due *i*/%v s after its block starts, whatever\n", cfg["rate_per_s"], cfg["rate_per_s"])
	fmt.Fprintf(w, "became of earlier ones, and its latency runs from that due time to the last byte of the response,\n")
	fmt.Fprintf(w, "so the load generator's own send lag (reported) counts against every path alike. Requests are\n")
	fmt.Fprintf(w, "`/v1/completions` with max_tokens 1 and a distinct short prompt, non-streamed or streamed; every\n")
	fmt.Fprintf(w, "answer is checked after the run (status, one token by text and usage, finish_reason, SSE framing\n")
	fmt.Fprintf(w, "and `[DONE]`) and a wrong one counts as an error.\n\n")
	fmt.Fprintf(w, "A round gives each path, for each kind of request, %v unmeasured warm-up requests and then %v\n", cfg["warmup_per_run"], cfg["requests_per_run"])
	fmt.Fprintf(w, "measured ones, sent in blocks of %v (one second each) that the paths take in turn, the turn order\n", cfg["block"])
	fmt.Fprintf(w, "rotating from block to block and from round to round: a burst of noise on the machine falls on\n")
	fmt.Fprintf(w, "every path rather than on whichever ran then. A round during which other processes used more than\n")
	fmt.Fprintf(w, "%v cores (from /proc/stat, less the benchmark's own processes) is discarded and run again, up to %v\n", cfg["max_other_cores"], cfg["redo"])
	fmt.Fprintf(w, "times in all. **Added latency** is (via the proxy) − (direct) at one percentile within a round; the\n")
	fmt.Fprintf(w, "tables give the median over rounds of each figure, and a ratio row (**a / b**) is a's median added\n")
	fmt.Fprintf(w, "latency over b's, and a's median CPU per request over b's. Proxy CPU is the proxy process's\n")
	fmt.Fprintf(w, "utime+stime from /proc/<pid>/stat over its blocks (10 ms ticks), over the measured requests;\n")
	fmt.Fprintf(w, "\"of which kernel\" is stime alone (its socket calls, the wake-ups of the processes it writes to,\n")
	fmt.Fprintf(w, "its context switches), so the rest is the proxy's own code. Its context switches are voluntary +\n")
	fmt.Fprintf(w, "involuntary ones summed over /proc/<pid>/task/*/status the same way: each is a thread that slept\n")
	fmt.Fprintf(w, "(epoll_wait, a futex, the Go runtime's sysmon in nanosleep) or was preempted (\"of which\n")
	fmt.Fprintf(w, "preempted\", the involuntary ones, mostly for a process it had just woken), and is woken again later.\n\n")
	for _, ms := range r.Summary {
		renderMode(w, ms)
		fmt.Fprintln(w)
		fmt.Fprintf(w, "Round by round, added latency:\n\n")
		for _, rt := range ms.Ratios {
			fmt.Fprintf(w, "- %s / %s: p50 %s; p99 %s\n", rt.Of, rt.To, strings.Join(rt.RoundP50, ", "), strings.Join(rt.RoundP99, ", "))
		}
		fmt.Fprintln(w)
	}

	fmt.Fprintf(w, "### Every run\n\n")
	fmt.Fprintf(w, "Latency and send lag in µs. Added latency is against the direct run of the same round and kind.\n")
	fmt.Fprintf(w, "CPU columns are seconds over the run; \"other\" is the rest of the machine's busy time, in cores.\n\n")
	renderRuns(w, r.Runs)
	if len(r.Discarded) > 0 {
		fmt.Fprintf(w, "\nDiscarded, and run again, because other processes used more than %v cores during a run of\n", r.Config["max_other_cores"])
		fmt.Fprintf(w, "the round (their raw numbers, for the record; no figure above uses them):\n\n")
		renderRuns(w, r.Discarded)
	}
	fmt.Fprintln(w)
	for _, run := range r.Runs {
		if len(run.ErrorKinds) > 0 {
			fmt.Fprintf(w, "- errors in round %d, %s %s: %s\n", run.Round, run.Target, run.Mode, mdCell(fmt.Sprint(run.ErrorKinds)))
		}
	}
	var spread []string
	for _, run := range r.Runs {
		if len(run.Replicas) > 0 {
			var parts []string
			for _, k := range slices.Sorted(maps.Keys(run.Replicas)) {
				parts = append(parts, fmt.Sprintf("%s %d", k, run.Replicas[k]))
			}
			spread = append(spread, fmt.Sprintf("round %d %s: %s", run.Round, run.Mode, strings.Join(parts, ", ")))
		}
	}
	if len(spread) > 0 {
		fmt.Fprintf(w, "The gateway's choices (x-inferrail-replica): %s.\n\n", strings.Join(spread, "; "))
	}

	renderThroughput(w, r.Throughput, cfg)
	renderDecision(w, r.Decision)

	fmt.Fprintf(w, "## Setup\n\n")
	for _, p := range r.Processes {
		fmt.Fprintf(w, "- %s: pid %d, `%s`\n", p.Name, p.Pid, loadgen.ShellJoin(p.Args))
	}
	fmt.Fprintf(w, "\nnginx.conf, as scripts/nginx-proxy.sh wrote it (the temp dir is gone):\n\n```nginx\n%s```\n\n", r.NginxConf)
	for _, g := range gatewaySpecs {
		fmt.Fprintf(w, "The config of %s:\n\n```yaml\n%s```\n\n", g.Target, r.GatewayConfs[g.Target])
	}
	if r.Throughput != nil && r.Throughput.Script != "" {
		fmt.Fprintf(w, "wrk's script:\n\n```lua\n%s```\n\n", r.Throughput.Script)
	}

	fmt.Fprintf(w, "## Raw numbers\n\n```json\n")
	raw := *r
	raw.Decision = nil // its output is above, verbatim
	if r.Decision != nil {
		d := *r.Decision
		d.BenchOutput, d.LateOutput, d.CostOutput = "", "", ""
		raw.Decision = &d
	}
	if r.Throughput != nil {
		tp := *r.Throughput
		tp.Script = ""
		raw.Throughput = &tp
	}
	raw.NginxConf, raw.GatewayConfs = "", nil
	w.Write(mustJSON(raw))
	fmt.Fprintf(w, "\n```\n")
	return nil
}

// renderThroughput writes the wrk section.
func renderThroughput(w io.Writer, tp *throughput, cfg map[string]any) {
	fmt.Fprintf(w, "## 2. Most requests per second\n\n")
	if tp == nil {
		fmt.Fprintf(w, "Not run.\n\n")
		return
	}
	fmt.Fprintf(w, "Closed loop: Debian's `wrk` with %v connections and %v threads for %v s against each proxy in\n", cfg["wrk_connections"], cfg["wrk_threads"], cfg["wrk_duration_s"])
	fmt.Fprintf(w, "front of the same zero-latency simulators, every request the same non-streamed POST\n")
	fmt.Fprintf(w, "/v1/completions with max_tokens 1 (script under Setup). Each proxy first gets a 1 s warm-up; then\n")
	fmt.Fprintf(w, "every round runs each proxy once, the order rotating. wrk, the simulators and the proxy share the\n")
	fmt.Fprintf(w, "machine's cores, so a proxy's CPU per request is what it leaves for the rest; nginx is one event\n")
	fmt.Fprintf(w, "loop (one core at most), the Go proxies may use every core. wrk's answers are not checked past\n")
	fmt.Fprintf(w, "their status (the open-loop runs above check every one). wrk's latency is closed loop: it leaves\n")
	fmt.Fprintf(w, "out the time a request would have waited to be sent.\n\n")
	fmt.Fprintf(w, "Command, per proxy: `%s`\n\n", tp.Command)
	fmt.Fprintln(w, "| proxy | req/s, median | req/s per round | proxy CPU, median (cores, µs/request) | wrk p50 / p99 per round | errors |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|")
	for _, name := range wrkTargets {
		var rps, lat []string
		errs := 0
		for _, run := range tp.Runs {
			if run.Target == name {
				rps = append(rps, fmt.Sprintf("%.0f", run.Result.RequestsPerSec()))
				lat = append(lat, fmt.Sprintf("%.0f / %.0f µs", run.Result["p50_us"], run.Result["p99_us"]))
				errs += run.errors()
			}
		}
		fmt.Fprintf(w, "| %s | %.0f | %s | %.2f, %.1f µs | %s | %d |\n", name, tp.MedReqPerS[name], strings.Join(rps, ", "),
			tp.MedCores[name], tp.MedUsPerRq[name], strings.Join(lat, "; "), errs)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "Every run (CPU in seconds over the run; \"other\" is the rest of the machine's busy time, in cores):\n\n")
	fmt.Fprintln(w, "| round | proxy | requests | req/s | p50 / p99 µs | errors (connect, read, write, status, timeout) | proxy CPU s (cores, µs/req) | sims CPU s | wrk CPU s | other cores |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|")
	for _, run := range tp.Runs {
		res := run.Result
		fmt.Fprintf(w, "| %d | %s | %s | %.0f | %.0f / %.0f | %.0f, %.0f, %.0f, %.0f, %.0f | %.2f (%.2f, %.1f) | %.2f | %.2f | %.2f |\n",
			run.Round, run.Target, loadgen.Thousands(int(res["requests"])), res.RequestsPerSec(), res["p50_us"], res["p99_us"],
			res["connect"], res["read"], res["write"], res["status"], res["timeout"],
			run.ProxyCPUS, run.ProxyCores, run.ProxyUsPerReq, run.SimsCPUS, run.WrkCPUS, run.OtherCores)
	}
	fmt.Fprintln(w)
	for _, p := range tp.Problems {
		fmt.Fprintf(w, "- problem: %s\n", mdCell(p))
	}
	if len(tp.Problems) > 0 {
		fmt.Fprintln(w)
	}
}

func renderDecision(w io.Writer, d *decision) {
	fmt.Fprintf(w, "## 3. Decision latency\n\n")
	if d == nil {
		fmt.Fprintf(w, "Not run.\n\n")
		return
	}
	fmt.Fprintf(w, "From the Go benchmarks beside the code (actors/fleet/bench_test.go). BenchmarkPickActor is a\n")
	fmt.Fprintf(w, "decision through the actor path: Fleet.Pick's message and future to the model's routing actor,\n")
	fmt.Fprintf(w, "which reads the replicas' snapshots, runs least_request and takes a lease. BenchmarkPickDirect\n")
	fmt.Fprintf(w, "computes the same decision in the caller's goroutine without messaging. p50/p99/max are the\n")
	fmt.Fprintf(w, "benchmark's own per-decision clock readings, over every iteration of the final b.N run.\n\n")
	fmt.Fprintf(w, "Command: `%s`\n\n", d.BenchCommand)
	fmt.Fprintln(w, "| replicas | actor p50 | actor p99 | actor max | actor ns/op, allocs | direct p50 | direct p99 | direct max | direct ns/op, allocs | actor, parallel callers: ns/op |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|")
	m := func(b *benchLine, unit string) string {
		if b == nil {
			return "—"
		}
		v, ok := b.Metrics[unit]
		return metricText(unit, v, ok)
	}
	per := func(b *benchLine) string {
		if b == nil {
			return "—"
		}
		return fmt.Sprintf("%s ns, %s", m(b, "ns/op"), m(b, "allocs/op"))
	}
	for _, row := range pickRows(d.Bench) {
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", strings.TrimPrefix(row.Sub, "replicas="),
			m(row.Actor, "p50-ns"), m(row.Actor, "p99-ns"), m(row.Actor, "max-ns"), per(row.Actor),
			m(row.Direct, "p50-ns"), m(row.Direct, "p99-ns"), m(row.Direct, "max-ns"), per(row.Direct),
			m(row.ActorParallel, "ns/op"))
	}
	fmt.Fprintf(w, "\nIts output, verbatim:\n\n```\n%s```\n\n", d.BenchOutput)
	renderCost(w, d)
	if d.LateCommand != "" || d.LateOutput != "" {
		fmt.Fprintf(w, "Deadlines: TestPickNeverLate (actors/fleet/fleet_test.go) runs 16 goroutines × 400 picks with\n")
		fmt.Fprintf(w, "deadlines from 0 to 300 µs away. Pick reads the clock once the answer is in and releases a\n")
		fmt.Fprintf(w, "decision that is late instead of returning it. The test also counts decisions that their callers\n")
		fmt.Fprintf(w, "saw after the deadline by their own clock read after Pick returned, which a preemption in between\n")
		fmt.Fprintf(w, "can cause, and fails past a bound that only a Pick without the check would reach (see the test).\n\n")
		fmt.Fprintf(w, "Command: `%s`\n\n```\n%s```\n\n", d.LateCommand, lastLines(d.LateOutput, 6))
	}
}

// metricText renders a benchmark figure: nanoseconds as µs, others as
// printed, and a dash when there is none.
func metricText(unit string, v float64, ok bool) string {
	switch {
	case !ok:
		return "—"
	case strings.HasSuffix(unit, "-ns"):
		return dur(time.Duration(v))
	}
	return fmt.Sprintf("%g", v)
}

// renderCost writes the cost_model decision benchmarks: one row per
// benchmark and sub-benchmark, each figure over its -count runs.
func renderCost(w io.Writer, d *decision) {
	if d.CostCommand == "" && d.CostOutput == "" {
		return
	}
	fmt.Fprintf(w, "### cost_model\n\n")
	fmt.Fprintf(w, "From actors/fleet/bench_estimate_test.go: an 8,000-token prompt, every replica's index holding\n")
	fmt.Fprintf(w, "8,192 other blocks and the prompt on every other replica. BenchmarkCostModelActor is the whole\n")
	fmt.Fprintf(w, "decision through the actors (Fleet.Pick to the routing actor, the estimate broadcast to the replica\n")
	fmt.Fprintf(w, "actors, the gather under routing.estimate_deadline, the policy and the lease); fanout=0 asks every\n")
	fmt.Fprintf(w, "replica, fanout=16 a shortlist of 16. BenchmarkCostModelDirect computes the same decision in the\n")
	fmt.Fprintf(w, "caller's goroutine. The targets are on the median p99 over the runs.\n\n")
	fmt.Fprintf(w, "Command: `%s`\n\n", d.CostCommand)
	fmt.Fprintln(w, "| benchmark | case | runs | p50, median | p99 per run | p99, median | max, median | late-%, median | misses/op, median | allocs/op |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|")
	m := func(g benchGroup, unit string) string {
		v, ok := g.median(unit)
		return metricText(unit, v, ok)
	}
	for _, g := range groupBench(d.Cost) {
		var each []string
		for _, b := range g.Runs {
			if v, ok := b.Metrics["p99-ns"]; ok {
				each = append(each, dur(time.Duration(v)))
			}
		}
		fmt.Fprintf(w, "| %s | %s | %d | %s | %s | %s | %s | %s | %s | %s |\n", strings.TrimPrefix(g.Bench, "Benchmark"), g.Sub, len(g.Runs),
			m(g, "p50-ns"), strings.Join(each, ", "), m(g, "p99-ns"), m(g, "max-ns"), m(g, "late-%"), m(g, "misses/op"), m(g, "allocs/op"))
	}
	fmt.Fprintf(w, "\nIts output, verbatim:\n\n```\n%s```\n\n", d.CostOutput)
}

// lastLines is the last n lines of s, each ending in a newline.
func lastLines(s string, n int) string {
	lines := strings.SplitAfter(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "") + "\n"
}

// otherCores is the median and the largest CPU use, in cores, of every
// process outside the benchmark during the runs.
func otherCores(runs []*runResult) (median, worst float64) {
	var xs []float64
	for _, r := range runs {
		xs = append(xs, r.OtherCores)
		worst = max(worst, r.OtherCores)
	}
	return medianFloat(xs), worst
}

// renderRuns writes one row per run; added latency is against the direct
// run of the same round and kind in runs.
func renderRuns(w io.Writer, runs []*runResult) {
	fmt.Fprintln(w, "| round (try) | path | kind | ok / errors (warm-up errors) | rate/s | lag p50 / p99 / max | p50 | p90 | p99 | p99.9 | max | added p50 / p99 | proxy CPU s (cores, µs/req, kernel µs/req, switches/req, preempted/req) | sims CPU s | loadgen CPU s | other cores |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	direct := map[string]*runResult{}
	for _, run := range runs {
		if run.Target == "direct" {
			direct[fmt.Sprint(run.Round, run.Attempt, run.Mode)] = run
		}
	}
	for _, run := range runs {
		added, proxy := "—", "—"
		if d := direct[fmt.Sprint(run.Round, run.Attempt, run.Mode)]; d != nil && run.Target != "direct" {
			added = fmt.Sprintf("%.0f / %.0f", (run.Latency.P50S-d.Latency.P50S)*1e6, (run.Latency.P99S-d.Latency.P99S)*1e6)
		}
		if run.Target != "direct" {
			proxy = fmt.Sprintf("%.2f (%.2f, %.1f, %.1f, %.2f, %.2f)", run.ProxyCPUS, run.ProxyCores, run.ProxyUsPerReq,
				run.ProxySysUsPerReq, run.ProxySwitchesPerReq, run.ProxyInvoluntaryPerReq)
		}
		fmt.Fprintf(w, "| %d (%d) | %s | %s | %s / %d (%d) | %.0f | %.0f / %.0f / %.0f | %.0f | %.0f | %.0f | %.0f | %.0f | %s | %s | %.2f | %.2f | %.2f |\n",
			run.Round, run.Attempt, run.Target, run.Mode, loadgen.Thousands(run.OK), run.Errors, run.WarmupErrors, run.RateAchieved,
			run.Lag.P50S*1e6, run.Lag.P99S*1e6, run.Lag.MaxS*1e6,
			run.Latency.P50S*1e6, run.Latency.P90S*1e6, run.Latency.P99S*1e6, run.LatencyP9*1e6, run.Latency.MaxS*1e6,
			added, proxy, run.SimsCPUS, run.LoadgenCPUS, run.OtherCores)
	}
}

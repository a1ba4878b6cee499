package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/inferrail/inferrail/bench/loadgen"
)

// Targets from issues 3 and 16.
const (
	ratioP50Bound     = 1.0 // gateway's (least_request) added p50 ≤ 1.0 × nginx's
	ratioP99Bound     = 1.2 // gateway's (least_request) added p99 ≤ 1.2 × nginx's
	costP50Bound      = 1.3 // gateway's (cost_model, tokenizing) added p50 ≤ 1.3 × nginx's
	costP99Bound      = 1.5 // and p99 ≤ 1.5 × nginx's
	cpuBound          = 1.5 // gateway's (least_request) CPU per request ≤ 1.5 × nginx's
	throughputBound   = 0.8 // gateway's (least_request) most req/s ≥ 0.8 × nginx's
	decisionP99       = 20 * time.Microsecond
	reportedBoundText = "reported"
)

// ratioPairs are the comparisons every request kind reports: Of over To.
var ratioPairs = [][2]string{{gateway, nginx}, {gatewayCost, nginx}, {fastproxy, nginx}, {gateway, fastproxy}}

// report is everything the results file says. It is owned by run's goroutine.
type report struct {
	Info         runInfo           `json:"run"`
	Config       map[string]any    `json:"config"`
	Processes    []procInfo        `json:"processes"`
	NginxConf    string            `json:"nginx_conf"`
	GatewayConfs map[string]string `json:"gateway_confs"`
	Runs         []*runResult      `json:"runs"`
	Discarded    []*runResult      `json:"discarded_runs,omitempty"`
	Summary      []modeSummary     `json:"summary"`
	Throughput   *throughput       `json:"throughput"`
	Decision     *decision         `json:"decision"`
	Checks       []check           `json:"checks"`
	Failures     []string          `json:"failures,omitempty"`
}

type runInfo struct {
	Date         time.Time `json:"date"`
	Command      string    `json:"command"`
	Invocation   string    `json:"invocation"`
	Commit       string    `json:"commit"`
	Bin          string    `json:"binary"`
	BinVersion   string    `json:"binary_version"`
	NProc        int       `json:"nproc"`
	CPUModel     string    `json:"cpu_model"`
	Kernel       string    `json:"kernel"`
	MemTotal     string    `json:"mem_total"`
	GoVersion    string    `json:"go_version"`
	NginxVersion string    `json:"nginx_version"`
	WrkVersion   string    `json:"wrk_version,omitempty"`
	LoadStart    string    `json:"loadavg_at_start"`
	LoadEnd      string    `json:"loadavg_at_end"`
	// BusyBefore is the machine's busy CPU, in cores, over one second just
	// before the processes started: what else was running.
	BusyBefore float64       `json:"busy_cores_before"`
	Elapsed    time.Duration `json:"elapsed_ns"`
}

type procInfo struct {
	Name string   `json:"name"`
	Pid  int      `json:"pid"`
	Args []string `json:"argv"`
}

func newProcInfo(p *loadgen.Proc) procInfo {
	return procInfo{Name: p.Name, Pid: p.Pid, Args: append([]string{p.Bin}, p.Args...)}
}

// check is one target the report asserts, or one figure it only reports.
type check struct {
	Name     string `json:"name"`
	Value    string `json:"value"`
	Bound    string `json:"bound"`
	Pass     bool   `json:"pass"`
	Reported bool   `json:"reported,omitempty"` // no target: never a failure
}

func (r *report) fail(format string, args ...any) {
	r.Failures = append(r.Failures, fmt.Sprintf(format, args...))
}

func (r *report) bound(name, value, bound string, ok bool) {
	r.Checks = append(r.Checks, check{Name: name, Value: value, Bound: bound, Pass: ok})
	if !ok {
		r.fail("%s: %s, want %s", name, value, bound)
	}
}

// report records a figure that has no target.
func (r *report) report(name, value string) {
	r.Checks = append(r.Checks, check{Name: name, Value: value, Bound: reportedBoundText, Pass: true, Reported: true})
}

// ratioBound checks a ratio of medians against "≤ bound". When the ratio
// is undefined (the denominator's median was not positive), the numerator
// passes only by being no larger.
func (r *report) ratioBound(name string, ratio float64, defined bool, of, to time.Duration, unit func(time.Duration) string, bound float64) {
	r.bound(name, fmt.Sprintf("%s (%s / %s)", ratioText(ratio, defined), unit(of), unit(to)),
		fmt.Sprintf("≤ %.1f×", bound), defined && ratio <= bound || !defined && of <= to)
}

// Pass reports whether every target was met and nothing failed.
func (r *report) Pass() bool { return len(r.Failures) == 0 }

func gatherInfo(c *config) runInfo {
	info := runInfo{Date: time.Now().UTC(), Command: c.command, Bin: c.bin,
		Invocation: loadgen.ShellJoin(append([]string{"gwload"}, c.args...)), Commit: loadgen.GitCommit()}
	if out, err := exec.Command(c.bin, "version").Output(); err == nil {
		info.BinVersion = strings.TrimSpace(string(out))
	}
	info.NProc = runtime.NumCPU()
	info.GoVersion = runtime.Version()
	if out, err := exec.Command("go", "version").Output(); err == nil {
		info.GoVersion = strings.TrimSpace(string(out))
	}
	info.CPUModel = loadgen.ProcField("/proc/cpuinfo", "model name")
	info.MemTotal = loadgen.ProcField("/proc/meminfo", "MemTotal")
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		info.Kernel = "Linux " + strings.TrimSpace(string(b))
	}
	// nginx -v prints to stderr.
	if out, err := exec.Command(c.nginx, "-v").CombinedOutput(); err == nil {
		info.NginxVersion = strings.TrimSpace(string(out))
	} else {
		info.NginxVersion = fmt.Sprintf("unknown (%v)", err)
	}
	if c.wrk != "" {
		info.WrkVersion = loadgen.WrkVersion(c.wrk)
	}
	info.LoadStart = c.loadBefore
	if info.LoadStart == "" {
		info.LoadStart = loadAvg()
	}
	return info
}

func loadAvg() string { return loadgen.LoadAvg() }

func reportConfig(c *config) map[string]any {
	return map[string]any{"sims": c.sims, "rate_per_s": c.rate, "requests_per_run": c.requests,
		"warmup_per_run": c.warmup, "block": c.block, "rounds": c.rounds, "redo": c.redo, "max_other_cores": c.maxOther, "modes": c.modes, "model": c.model,
		"max_tokens": 1, "endpoint": "/v1/completions", "gateway_env": c.gatewayEnv,
		"wrk_connections": c.wrkConns, "wrk_threads": c.wrkThreads, "wrk_duration_s": c.wrkDuration.Seconds()}
}

// modeSummary is one request kind's figures over every round.
type modeSummary struct {
	Mode    string          `json:"mode"`
	Targets []targetSummary `json:"targets"` // in targetNames' order
	Ratios  []ratio         `json:"ratios"`  // in ratioPairs' order
}

// ratio compares two proxies of one request kind, Of over To: their median
// added latencies, round by round, and their median CPU per request. A
// Defined flag is false where To's figure was not positive.
type ratio struct {
	Of         string   `json:"of"`
	To         string   `json:"to"`
	P50        float64  `json:"added_p50"`
	P50Defined bool     `json:"added_p50_defined"`
	P99        float64  `json:"added_p99"`
	P99Defined bool     `json:"added_p99_defined"`
	RoundP50   []string `json:"round_added_p50"`
	RoundP99   []string `json:"round_added_p99"`
	CPU        float64  `json:"cpu_per_request"`
	CPUDefined bool     `json:"cpu_per_request_defined"`
}

// target is the summary of the target called name.
func (ms *modeSummary) target(name string) *targetSummary {
	for i := range ms.Targets {
		if ms.Targets[i].Target == name {
			return &ms.Targets[i]
		}
	}
	return nil
}

// ratio is the comparison of of over to.
func (ms *modeSummary) ratio(of, to string) *ratio {
	for i := range ms.Ratios {
		if ms.Ratios[i].Of == of && ms.Ratios[i].To == to {
			return &ms.Ratios[i]
		}
	}
	return nil
}

// targetSummary is one target's percentiles per round and their medians.
type targetSummary struct {
	Target        string          `json:"target"`
	P50           []time.Duration `json:"p50_ns"` // per round
	P99           []time.Duration `json:"p99_ns"`
	AddedP50      []time.Duration `json:"added_p50_ns,omitempty"`
	AddedP99      []time.Duration `json:"added_p99_ns,omitempty"`
	MedP50        time.Duration   `json:"median_p50_ns"`
	MedP99        time.Duration   `json:"median_p99_ns"`
	MedAddedP50   time.Duration   `json:"median_added_p50_ns"`
	MedAddedP99   time.Duration   `json:"median_added_p99_ns"`
	MedProxyCores float64         `json:"median_proxy_cores"`
	MedProxyUs    float64         `json:"median_proxy_cpu_us_per_request"`
	MedSwitches   float64         `json:"median_proxy_context_switches_per_request"`
	MedSysUs      float64         `json:"median_proxy_sys_cpu_us_per_request"`
	MedInvol      float64         `json:"median_proxy_involuntary_switches_per_request"`
	Errors        int             `json:"errors"` // measured and warm-up, every round
}

func secs(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// usDur is a figure in µs as a Duration, for Ratio.
func usDur(us float64) time.Duration { return time.Duration(us * float64(time.Microsecond)) }

// summarize builds one request kind's summary from its runs: every target
// of targetNames must have one run per round.
func summarize(mode string, runs []*runResult, rounds int) (modeSummary, error) {
	ms := modeSummary{Mode: mode}
	for _, name := range targetNames {
		ts := targetSummary{Target: name, P50: make([]time.Duration, rounds), P99: make([]time.Duration, rounds)}
		var cores, usPerReq, switches, sysUs, invol []float64
		seen := 0
		for _, r := range runs {
			if r.Mode != mode || r.Target != name {
				continue
			}
			if r.Round < 1 || r.Round > rounds {
				return ms, fmt.Errorf("%s %s: round %d of %d", name, mode, r.Round, rounds)
			}
			ts.P50[r.Round-1] = secs(r.Latency.P50S)
			ts.P99[r.Round-1] = secs(r.Latency.P99S)
			cores = append(cores, r.ProxyCores)
			usPerReq = append(usPerReq, r.ProxyUsPerReq)
			switches = append(switches, r.ProxySwitchesPerReq)
			sysUs = append(sysUs, r.ProxySysUsPerReq)
			invol = append(invol, r.ProxyInvoluntaryPerReq)
			ts.Errors += r.Errors + r.WarmupErrors
			seen++
		}
		if seen != rounds {
			return ms, fmt.Errorf("%s %s: %d runs for %d rounds", name, mode, seen, rounds)
		}
		ts.MedP50, ts.MedP99 = loadgen.Median(ts.P50), loadgen.Median(ts.P99)
		ts.MedProxyCores, ts.MedProxyUs, ts.MedSwitches = medianFloat(cores), medianFloat(usPerReq), medianFloat(switches)
		ts.MedSysUs, ts.MedInvol = medianFloat(sysUs), medianFloat(invol)
		ms.Targets = append(ms.Targets, ts)
	}
	straight := ms.target(direct)
	for i := range ms.Targets {
		ts := &ms.Targets[i]
		if ts.Target == direct {
			continue
		}
		var err error
		if ts.AddedP50, err = loadgen.AddedPerRound(ts.P50, straight.P50); err != nil {
			return ms, err
		}
		if ts.AddedP99, err = loadgen.AddedPerRound(ts.P99, straight.P99); err != nil {
			return ms, err
		}
		ts.MedAddedP50, ts.MedAddedP99 = loadgen.Median(ts.AddedP50), loadgen.Median(ts.AddedP99)
	}
	for _, pair := range ratioPairs {
		of, to := ms.target(pair[0]), ms.target(pair[1])
		rt := ratio{Of: of.Target, To: to.Target}
		rt.P50, rt.P50Defined = loadgen.Ratio(of.MedAddedP50, to.MedAddedP50)
		rt.P99, rt.P99Defined = loadgen.Ratio(of.MedAddedP99, to.MedAddedP99)
		rt.CPU, rt.CPUDefined = loadgen.Ratio(usDur(of.MedProxyUs), usDur(to.MedProxyUs))
		for i := range rounds {
			rt.RoundP50 = append(rt.RoundP50, ratioText(loadgen.Ratio(of.AddedP50[i], to.AddedP50[i])))
			rt.RoundP99 = append(rt.RoundP99, ratioText(loadgen.Ratio(of.AddedP99[i], to.AddedP99[i])))
		}
		ms.Ratios = append(ms.Ratios, rt)
	}
	return ms, nil
}

func medianFloat(xs []float64) float64 {
	d := make([]time.Duration, len(xs))
	for i, x := range xs {
		d[i] = time.Duration(x * 1e9)
	}
	return float64(loadgen.Median(d)) / 1e9
}

func ratioText(r float64, ok bool) string {
	if !ok {
		return "n/a"
	}
	return fmt.Sprintf("%.2f×", r)
}

// evaluate fills in the summaries and checks every target.
func (r *report) evaluate() {
	rounds := 0
	for _, run := range r.Runs {
		rounds = max(rounds, run.Round)
	}
	// Every request counts, discarded rounds' too: a failed request is a
	// failure whatever else the machine was doing.
	errs, warm, total := 0, 0, 0
	for _, run := range append(slices.Clone(r.Runs), r.Discarded...) {
		errs += run.Errors
		warm += run.WarmupErrors
		total += run.Requests + run.Warmup
	}
	if len(r.Runs)+len(r.Discarded) > 0 {
		r.bound("errors, every run (measured + warm-up)", fmt.Sprintf("%d + %d of %s requests", errs, warm, loadgen.Thousands(total)), "0", errs+warm == 0)
	}
	modes := []string{}
	for _, run := range r.Runs {
		if !slices.Contains(modes, run.Mode) {
			modes = append(modes, run.Mode)
		}
	}
	for _, mode := range modes {
		ms, err := summarize(mode, r.Runs, rounds)
		if err != nil {
			r.fail("summary: %v", err)
			continue
		}
		r.Summary = append(r.Summary, ms)
		r.evaluateMode(&ms)
	}
	r.evaluateThroughput()
	r.evaluateDecision()
}

// evaluateMode checks one request kind's ratios against issue 16's table.
func (r *report) evaluateMode(ms *modeSummary) {
	kind := modeTitle(ms.Mode)
	for _, b := range []struct {
		of          string
		p50, p99    float64
		description string
	}{
		{gateway, ratioP50Bound, ratioP99Bound, "least_request"},
		{gatewayCost, costP50Bound, costP99Bound, "cost_model, builtin:sim tokenizer"},
	} {
		rt, of, ng := ms.ratio(b.of, nginx), ms.target(b.of), ms.target(nginx)
		r.ratioBound(fmt.Sprintf("%s: added p50, %s (%s) / nginx", kind, b.of, b.description),
			rt.P50, rt.P50Defined, of.MedAddedP50, ng.MedAddedP50, dur, b.p50)
		r.ratioBound(fmt.Sprintf("%s: added p99, %s (%s) / nginx", kind, b.of, b.description),
			rt.P99, rt.P99Defined, of.MedAddedP99, ng.MedAddedP99, dur, b.p99)
	}
	cpu := func(of, to string) (string, *ratio) {
		rt := ms.ratio(of, to)
		return fmt.Sprintf("%s (%s / %s)", ratioText(rt.CPU, rt.CPUDefined), dur(usDur(ms.target(of).MedProxyUs)), dur(usDur(ms.target(to).MedProxyUs))), rt
	}
	v, rt := cpu(gateway, nginx)
	r.bound(fmt.Sprintf("%s: CPU per request, gateway (least_request) / nginx", kind), v, fmt.Sprintf("≤ %.1f×", cpuBound), rt.CPUDefined && rt.CPU <= cpuBound)
	v, _ = cpu(gateway, fastproxy)
	r.report(fmt.Sprintf("%s: CPU per request, gateway (least_request) / fastproxy", kind), v)
	v, _ = cpu(gatewayCost, nginx)
	r.report(fmt.Sprintf("%s: CPU per request, %s / nginx", kind, gatewayCost), v)
}

func modeTitle(mode string) string {
	if mode == "stream" {
		return "streamed"
	}
	return "non-streamed"
}

// dur renders a duration in µs with one decimal.
func dur(d time.Duration) string {
	return fmt.Sprintf("%.1f µs", float64(d)/float64(time.Microsecond))
}

// writeReport writes the results file.
func writeReport(path string, r *report) error {
	var buf bytes.Buffer
	if err := renderReport(&buf, r); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}

func mustJSON(v any) []byte {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return []byte(fmt.Sprintf("%q", err.Error()))
	}
	return b
}

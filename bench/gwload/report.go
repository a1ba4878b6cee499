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

// Targets from issue 3.
const (
	ratioP50Bound = 1.0 // gateway's added p50 ≤ 1.0 × nginx's
	ratioP99Bound = 1.2 // gateway's added p99 ≤ 1.2 × nginx's
	decisionP99   = 20 * time.Microsecond
)

// report is everything the results file says. It is owned by run's goroutine.
type report struct {
	Info        runInfo        `json:"run"`
	Config      map[string]any `json:"config"`
	Processes   []procInfo     `json:"processes"`
	NginxConf   string         `json:"nginx_conf"`
	GatewayConf string         `json:"gateway_conf"`
	Runs        []*runResult   `json:"runs"`
	Discarded   []*runResult   `json:"discarded_runs,omitempty"`
	Summary     []modeSummary  `json:"summary"`
	Decision    *decision      `json:"decision"`
	Checks      []check        `json:"checks"`
	Failures    []string       `json:"failures,omitempty"`
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

// check is one target the report asserts.
type check struct {
	Name  string `json:"name"`
	Value string `json:"value"`
	Bound string `json:"bound"`
	Pass  bool   `json:"pass"`
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
		"max_tokens": 1, "endpoint": "/v1/completions", "gateway_env": c.gatewayEnv}
}

// modeSummary is one request kind's figures over every round.
type modeSummary struct {
	Mode    string          `json:"mode"`
	Targets []targetSummary `json:"targets"`
	// Ratios of the median added latencies, gateway over nginx; Defined is
	// false where nginx's median added latency was not positive.
	RatioP50        float64 `json:"ratio_p50"`
	RatioP50Defined bool    `json:"ratio_p50_defined"`
	RatioP99        float64 `json:"ratio_p99"`
	RatioP99Defined bool    `json:"ratio_p99_defined"`
	// RoundRatios are the same ratios round by round.
	RoundRatiosP50 []string `json:"round_ratios_p50"`
	RoundRatiosP99 []string `json:"round_ratios_p99"`
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
	Errors        int             `json:"errors"` // measured and warm-up, every round
}

var targetNames = []string{"direct", "nginx", "gateway"}

func secs(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// summarize builds one request kind's summary from its runs.
func summarize(mode string, runs []*runResult, rounds int) (modeSummary, error) {
	ms := modeSummary{Mode: mode}
	byTarget := map[string]*targetSummary{}
	for _, name := range targetNames {
		ts := &targetSummary{Target: name, P50: make([]time.Duration, rounds), P99: make([]time.Duration, rounds)}
		var cores, usPerReq []float64
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
			ts.Errors += r.Errors + r.WarmupErrors
			seen++
		}
		if seen != rounds {
			return ms, fmt.Errorf("%s %s: %d runs for %d rounds", name, mode, seen, rounds)
		}
		ts.MedP50, ts.MedP99 = loadgen.Median(ts.P50), loadgen.Median(ts.P99)
		ts.MedProxyCores, ts.MedProxyUs = medianFloat(cores), medianFloat(usPerReq)
		byTarget[name] = ts
	}
	direct := byTarget["direct"]
	for _, name := range []string{"nginx", "gateway"} {
		ts := byTarget[name]
		var err error
		if ts.AddedP50, err = loadgen.AddedPerRound(ts.P50, direct.P50); err != nil {
			return ms, err
		}
		if ts.AddedP99, err = loadgen.AddedPerRound(ts.P99, direct.P99); err != nil {
			return ms, err
		}
		ts.MedAddedP50, ts.MedAddedP99 = loadgen.Median(ts.AddedP50), loadgen.Median(ts.AddedP99)
	}
	gw, ng := byTarget["gateway"], byTarget["nginx"]
	ms.RatioP50, ms.RatioP50Defined = loadgen.Ratio(gw.MedAddedP50, ng.MedAddedP50)
	ms.RatioP99, ms.RatioP99Defined = loadgen.Ratio(gw.MedAddedP99, ng.MedAddedP99)
	for i := range rounds {
		ms.RoundRatiosP50 = append(ms.RoundRatiosP50, ratioText(loadgen.Ratio(gw.AddedP50[i], ng.AddedP50[i])))
		ms.RoundRatiosP99 = append(ms.RoundRatiosP99, ratioText(loadgen.Ratio(gw.AddedP99[i], ng.AddedP99[i])))
	}
	for _, name := range targetNames {
		ms.Targets = append(ms.Targets, *byTarget[name])
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
		gw, ng := ms.Targets[2], ms.Targets[1]
		r.bound(fmt.Sprintf("%s: added p50, gateway / nginx", modeTitle(mode)),
			fmt.Sprintf("%s (%s / %s)", ratioText(ms.RatioP50, ms.RatioP50Defined), dur(gw.MedAddedP50), dur(ng.MedAddedP50)),
			fmt.Sprintf("≤ %.1f×", ratioP50Bound), ms.RatioP50Defined && ms.RatioP50 <= ratioP50Bound || !ms.RatioP50Defined && gw.MedAddedP50 <= ng.MedAddedP50)
		r.bound(fmt.Sprintf("%s: added p99, gateway / nginx", modeTitle(mode)),
			fmt.Sprintf("%s (%s / %s)", ratioText(ms.RatioP99, ms.RatioP99Defined), dur(gw.MedAddedP99), dur(ng.MedAddedP99)),
			fmt.Sprintf("≤ %.1f×", ratioP99Bound), ms.RatioP99Defined && ms.RatioP99 <= ratioP99Bound || !ms.RatioP99Defined && gw.MedAddedP99 <= ng.MedAddedP99)
	}
	r.evaluateDecision()
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

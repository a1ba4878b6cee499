package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/inferrail/inferrail/bench/loadgen"
)

// wrkTargets are the proxies the throughput runs compare.
var wrkTargets = []string{nginx, fastproxy, gateway, gatewayCost}

// throughput is the closed-loop part of the report: wrk against each proxy.
type throughput struct {
	Command string    `json:"command"` // one run's, with the target's URL as URL
	Script  string    `json:"script"`
	Runs    []*wrkRun `json:"runs"`
	// Median requests/s and CPU per request over rounds, by target.
	MedReqPerS map[string]float64 `json:"median_requests_per_s"`
	MedUsPerRq map[string]float64 `json:"median_proxy_cpu_us_per_request"`
	MedCores   map[string]float64 `json:"median_proxy_cores"`
	Problems   []string           `json:"problems,omitempty"`
}

// wrkRun is one wrk run against one proxy.
type wrkRun struct {
	Round  int                `json:"round"` // from 1
	Target string             `json:"target"`
	Result loadgen.WrkSummary `json:"wrk"`
	// CPU over the run, from /proc, as for the open-loop runs.
	ProxyCPUS     float64 `json:"proxy_cpu_s"`
	ProxyCores    float64 `json:"proxy_cores"`
	ProxyUsPerReq float64 `json:"proxy_cpu_us_per_request"`
	SimsCPUS      float64 `json:"sims_cpu_s"`
	WrkCPUS       float64 `json:"wrk_cpu_s"`
	OtherCores    float64 `json:"other_processes_cores"`
}

// errors is every failed request of the run: socket errors and answers
// that were not 2xx or 3xx.
func (w *wrkRun) errors() int { return int(w.Result.SocketErrors() + w.Result["status"]) }

// wrkArgs is one run's command line.
func wrkArgs(c *config, script, url string, d time.Duration) []string {
	return []string{"--threads", strconv.Itoa(c.wrkThreads), "--connections", strconv.Itoa(c.wrkConns),
		"--duration", fmt.Sprintf("%ds", int(d.Round(time.Second).Seconds())), "--timeout", "5s", "--script", script, url}
}

// wrkBudget is about how long runThroughput takes.
func wrkBudget(c *config) time.Duration {
	if c.wrk == "" {
		return 0
	}
	per := c.wrkDuration + time.Second // start, GC, samples
	return time.Duration(len(wrkTargets)) * (2*time.Second + time.Duration(c.rounds)*per)
}

// runThroughput runs wrk against every proxy: a 1 s warm-up each, then
// c.rounds rounds in which every proxy runs once, the order rotating.
func runThroughput(ctx context.Context, c *config, s *setup, stderr io.Writer) *throughput {
	tp := &throughput{Script: loadgen.WrkScript("bench/gwload", loadgen.AppendBody(nil, c.model,
		loadgen.Spec{MaxTokens: 1, Prompt: "wrk: tell me about the weather"}))}
	script := filepath.Join(s.dir, "completions.lua")
	if err := os.WriteFile(script, []byte(tp.Script), 0o644); err != nil {
		tp.Problems = append(tp.Problems, err.Error())
		return tp
	}
	tp.Command = loadgen.ShellJoin(append([]string{c.wrk}, wrkArgs(c, "completions.lua", "URL/v1/completions", c.wrkDuration)...))
	var targets []target
	for _, name := range wrkTargets {
		t := s.target(name)
		if t == nil {
			tp.Problems = append(tp.Problems, fmt.Sprintf("no target %s", name))
			return tp
		}
		targets = append(targets, *t)
	}
	for _, t := range targets {
		if _, err := runWrk(ctx, c, s, t, script, time.Second, 0); err != nil {
			tp.Problems = append(tp.Problems, fmt.Sprintf("%s warm-up: %v", t.Name, err))
			return tp
		}
	}
	for r := range c.rounds {
		for _, t := range rotation(targets, r) {
			run, err := runWrk(ctx, c, s, t, script, c.wrkDuration, r+1)
			if err != nil {
				tp.Problems = append(tp.Problems, fmt.Sprintf("round %d %s: %v", r+1, t.Name, err))
				return tp
			}
			fmt.Fprintf(stderr, "gwload: wrk round %d %-18s %8.0f req/s, p99 %.0f µs, errors %d, proxy %.2f cores (%.1f µs/request), other %.2f cores\n",
				run.Round, run.Target, run.Result.RequestsPerSec(), run.Result["p99_us"], run.errors(), run.ProxyCores, run.ProxyUsPerReq, run.OtherCores)
			tp.Runs = append(tp.Runs, run)
		}
	}
	return tp
}

// runWrk runs wrk once against t for d; round 0 is a warm-up.
func runWrk(ctx context.Context, c *config, s *setup, t target, script string, d time.Duration, round int) (*wrkRun, error) {
	if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < d+3*time.Second {
		return nil, fmt.Errorf("no time left for it under --timeout (%v left)", time.Until(deadline).Round(time.Second))
	}
	cmd := exec.CommandContext(ctx, c.wrk, wrkArgs(c, script, t.URLs[0]+"/v1/completions", d)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = time.Second
	before, err := sampleCPU(s, t)
	if err != nil {
		return nil, err
	}
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s: %w: %s", c.wrk, err, firstLines(stderr.String()+stdout.String(), 5))
	}
	after, err := sampleCPU(s, t)
	if err != nil {
		return nil, err
	}
	res, err := loadgen.ParseWrkSummary(stdout.String())
	if err != nil {
		return nil, fmt.Errorf("%w: %s", err, firstLines(stdout.String()+stderr.String(), 5))
	}
	wrkCPU := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	wall := after.at.Sub(before.at).Seconds()
	run := &wrkRun{Round: round, Target: t.Name, Result: res,
		ProxyCPUS: (after.proxy - before.proxy).Seconds(), SimsCPUS: (after.sims - before.sims).Seconds(), WrkCPUS: wrkCPU.Seconds()}
	other := (after.machine - before.machine) - (after.proxy - before.proxy) - (after.sims - before.sims) - (after.self - before.self) - wrkCPU
	if wall > 0 {
		run.ProxyCores = run.ProxyCPUS / wall
		run.OtherCores = max(0, other.Seconds()/wall)
	}
	if n := res["requests"]; n > 0 {
		run.ProxyUsPerReq = run.ProxyCPUS * 1e6 / n
	}
	return run, nil
}

func firstLines(s string, n int) string {
	lines := strings.SplitAfterN(strings.TrimSpace(s), "\n", n+1)
	return strings.TrimSpace(strings.Join(lines[:min(n, len(lines))], ""))
}

// summarizeThroughput fills in the medians over rounds.
func (tp *throughput) summarize() {
	tp.MedReqPerS, tp.MedUsPerRq, tp.MedCores = map[string]float64{}, map[string]float64{}, map[string]float64{}
	for _, name := range wrkTargets {
		var rps, us, cores []float64
		for _, run := range tp.Runs {
			if run.Target == name {
				rps = append(rps, run.Result.RequestsPerSec())
				us = append(us, run.ProxyUsPerReq)
				cores = append(cores, run.ProxyCores)
			}
		}
		if len(rps) > 0 {
			tp.MedReqPerS[name], tp.MedUsPerRq[name], tp.MedCores[name] = medianFloat(rps), medianFloat(us), medianFloat(cores)
		}
	}
}

// evaluateThroughput checks the gateway's most requests per second against
// nginx's and reports the other proxies'.
func (r *report) evaluateThroughput() {
	tp := r.Throughput
	if tp == nil {
		return
	}
	for _, p := range tp.Problems {
		r.fail("throughput (wrk): %s", p)
	}
	tp.summarize()
	errs, total := 0, 0
	for _, run := range tp.Runs {
		errs += run.errors()
		total += int(run.Result["requests"])
	}
	r.bound("throughput (wrk): errors, every run (connect, read, write, timeout, not 2xx/3xx)",
		fmt.Sprintf("%d of %s requests", errs, loadgen.Thousands(total)), "0", errs == 0)
	rps := func(of, to string) (string, float64, bool) {
		a, b := tp.MedReqPerS[of], tp.MedReqPerS[to]
		if !(b > 0) {
			return fmt.Sprintf("n/a (%.0f / %.0f req/s)", a, b), 0, false
		}
		return fmt.Sprintf("%.2f× (%.0f / %.0f req/s)", a/b, a, b), a / b, true
	}
	v, x, ok := rps(gateway, nginx)
	r.bound("most req/s (wrk, zero-latency simulators), gateway (least_request) / nginx", v,
		fmt.Sprintf("≥ %.1f×", throughputBound), ok && x >= throughputBound)
	for _, pair := range [][2]string{{gatewayCost, nginx}, {fastproxy, nginx}, {gateway, fastproxy}} {
		v, _, _ := rps(pair[0], pair[1])
		r.report(fmt.Sprintf("most req/s (wrk), %s / %s", pair[0], pair[1]), v)
	}
}

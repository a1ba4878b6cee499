package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/inferrail/inferrail/bench/loadgen"
)

// wrkConfig shapes benchmark 4: maximum request rate measured with wrk.
type wrkConfig struct {
	Bin         string        `json:"wrk"`
	Threads     int           `json:"threads"`
	Connections []int         `json:"connections"`
	MaxTokens   []int         `json:"max_tokens"`
	Duration    time.Duration `json:"duration_ns"`
	// Timeout is wrk's --timeout. wrk counts a response slower than it as a
	// socket timeout and leaves it out of the latency histogram; at 10 s a
	// stall on a crowded machine shows up as latency, and a timeout means
	// the simulator really did not answer.
	Timeout time.Duration `json:"timeout_ns"`
}

// wrkText is what benchmark 4 reads from wrk's human-readable report, as a
// cross-check on the summary line.
type wrkText struct {
	RequestsPerSec float64
	Non2xx         int // "Non-2xx or 3xx responses", absent when 0
	SocketErrors   int // connect + read + write + timeout, absent when 0
}

var (
	reRPS    = regexp.MustCompile(`(?m)^Requests/sec:\s+([0-9.]+)`)
	reNon2xx = regexp.MustCompile(`(?m)^\s*Non-2xx or 3xx responses:\s+(\d+)`)
	reSocket = regexp.MustCompile(`(?m)^\s*Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)`)
)

func parseWrkText(out string) (wrkText, error) {
	var t wrkText
	m := reRPS.FindStringSubmatch(out)
	if m == nil {
		return t, errors.New("wrk output has no Requests/sec line")
	}
	t.RequestsPerSec, _ = strconv.ParseFloat(m[1], 64)
	if m := reNon2xx.FindStringSubmatch(out); m != nil {
		t.Non2xx, _ = strconv.Atoi(m[1])
	}
	if m := reSocket.FindStringSubmatch(out); m != nil {
		for _, s := range m[1:] {
			n, _ := strconv.Atoi(s)
			t.SocketErrors += n
		}
	}
	return t, nil
}

// wrkPoint is one wrk run's numbers.
type wrkPoint struct {
	MaxTokens      int                `json:"max_tokens"`
	Connections    int                `json:"connections"`
	Threads        int                `json:"threads"`
	Command        string             `json:"command"`
	RequestsPerSec float64            `json:"requests_per_s"`
	TextRPS        float64            `json:"wrk_printed_requests_per_s"`
	Requests       float64            `json:"requests"`
	Non2xx         int                `json:"non_2xx"`
	SocketErrors   int                `json:"socket_errors"`
	Summary        loadgen.WrkSummary `json:"wrk_summary"`
	SimCPUS        float64            `json:"sim_cpu_s"`
	WrkCPUS        float64            `json:"wrk_cpu_s"`
	SimCores       float64            `json:"sim_cores"`
	WrkCores       float64            `json:"wrk_cores"`
	OtherCores     float64            `json:"other_processes_cores"`
	SimUsPerReq    float64            `json:"sim_cpu_us_per_request"`
	Output         string             `json:"wrk_output"`
}

type wrkRaw struct {
	Config  wrkConfig  `json:"config"`
	SimArgs []string   `json:"sim_args"`
	Version string     `json:"wrk_version"`
	Warmup  *wrkPoint  `json:"warmup"` // discarded: lets the heap and the connections settle
	Points  []wrkPoint `json:"points"`
}

// runWrk is benchmark 4: the highest rate of small non-streamed completions
// the zero-latency simulator answers, every response 2xx.
func runWrk(ctx context.Context, bin, model string, cfg wrkConfig) (*benchResult, error) {
	res := &benchResult{ID: 4, Title: "maximum req/s, non-streamed /v1/completions (--zero-latency, wrk)"}
	raw := &wrkRaw{Config: cfg, Version: loadgen.WrkVersion(cfg.Bin)}
	res.Raw = raw
	if _, err := exec.LookPath(cfg.Bin); err != nil {
		return nil, fmt.Errorf("wrk: %w (apt-get install -y wrk)", err)
	}
	dir, err := os.MkdirTemp("", "simload-wrk")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	sim, err := loadgen.StartSim(ctx, bin, "--zero-latency", "--served-model-name", model)
	if err != nil {
		return nil, err
	}
	raw.SimArgs = sim.Args
	c := newLoadClient(sim.URL, model, 4)
	defer c.close()
	for _, mt := range cfg.MaxTokens {
		spec := loadgen.Spec{MaxTokens: mt, Prompt: "Hello, my name is"}
		// wrk checks only status codes, so first check one answer in full.
		if o := c.do(ctx, spec); o.Err != nil {
			sim.Stop()
			return nil, fmt.Errorf("wrk body with max_tokens %d: %w", mt, o.Err)
		}
		script := filepath.Join(dir, fmt.Sprintf("completions-%d.lua", mt))
		if err := os.WriteFile(script, []byte(loadgen.WrkScript("bench/simload", loadgen.AppendBody(nil, model, spec))), 0o644); err != nil {
			sim.Stop()
			return nil, err
		}
		if raw.Warmup == nil {
			warm := cfg
			warm.Duration = 2 * time.Second
			p, err := wrkOnce(ctx, sim, warm, script, cfg.Connections[0])
			if err != nil {
				sim.Stop()
				return nil, err
			}
			p.MaxTokens = mt
			raw.Warmup = &p
		}
		for _, conns := range cfg.Connections {
			p, err := wrkOnce(ctx, sim, cfg, script, conns)
			if err != nil {
				sim.Stop()
				return nil, err
			}
			p.MaxTokens = mt
			raw.Points = append(raw.Points, p)
		}
	}
	if err := sim.Stop(); err != nil {
		res.fail("simulator: %v", err)
	}
	for _, p := range raw.Points {
		name := fmt.Sprintf("max_tokens %d, -t%d -c%d -d%s", p.MaxTokens, p.Threads, p.Connections, cfg.Duration)
		s := p.Summary
		res.bound(name, fmt.Sprintf("%.0f req/s; latency p50 %.2f ms, p99 %.2f ms, max %.1f ms; non-2xx %d, socket errors %d",
			p.RequestsPerSec, s["p50_us"]/1e3, s["p99_us"]/1e3, s["lat_max_us"]/1e3, p.Non2xx, p.SocketErrors),
			"non-2xx = 0, socket errors = 0", p.Non2xx == 0 && p.SocketErrors == 0)
		res.add(name+": CPU", fmt.Sprintf("sim %.2f cores (%.1f µs/request), wrk %.2f cores, other processes %.2f cores",
			p.SimCores, p.SimUsPerReq, p.WrkCores, p.OtherCores))
	}
	return res, nil
}

func wrkOnce(ctx context.Context, sim *loadgen.Proc, cfg wrkConfig, script string, conns int) (wrkPoint, error) {
	p := wrkPoint{Connections: conns, Threads: cfg.Threads}
	args := []string{"-t", strconv.Itoa(cfg.Threads), "-c", strconv.Itoa(conns),
		"-d", fmt.Sprintf("%ds", int(cfg.Duration.Seconds())),
		"--timeout", fmt.Sprintf("%ds", int(cfg.Timeout.Seconds())), "--latency", "-s", script, sim.URL + "/v1/completions"}
	p.Command = cfg.Bin + " " + strings.Join(args, " ")
	ctx, cancel := context.WithTimeout(ctx, cfg.Duration+cfg.Timeout+30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, cfg.Bin, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	before, err := sim.Sample()
	if err != nil {
		return p, err
	}
	m0, err := loadgen.MachineCPU()
	if err != nil {
		return p, err
	}
	self0 := loadgen.SelfCPU()
	start := time.Now()
	runErr := cmd.Run()
	wall := time.Since(start)
	after, err := sim.Sample()
	if err != nil {
		return p, err
	}
	m1, err := loadgen.MachineCPU()
	if err != nil {
		return p, err
	}
	self := loadgen.SelfCPU() - self0
	p.Output = out.String()
	if runErr != nil {
		return p, fmt.Errorf("%s: %w\n%s", p.Command, runErr, p.Output)
	}
	if p.Summary, err = loadgen.ParseWrkSummary(p.Output); err != nil {
		return p, fmt.Errorf("%s: %w\n%s", p.Command, err, p.Output)
	}
	text, err := parseWrkText(p.Output)
	if err != nil {
		return p, fmt.Errorf("%s: %w\n%s", p.Command, err, p.Output)
	}
	s := p.Summary
	p.Requests = s["requests"]
	p.RequestsPerSec = s.RequestsPerSec()
	p.TextRPS = text.RequestsPerSec
	// Take the worse of the two readings of each error count.
	p.Non2xx = max(text.Non2xx, int(s["status"]))
	p.SocketErrors = max(text.SocketErrors, int(s.SocketErrors()))
	simCPU := after.CPU - before.CPU
	wrkCPU := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	p.SimCPUS, p.WrkCPUS = simCPU.Seconds(), wrkCPU.Seconds()
	p.SimCores, p.WrkCores = simCPU.Seconds()/wall.Seconds(), wrkCPU.Seconds()/wall.Seconds()
	p.OtherCores = max(0, (m1-m0-simCPU-wrkCPU-self).Seconds()/wall.Seconds())
	if p.Requests > 0 {
		p.SimUsPerReq = float64(simCPU.Microseconds()) / p.Requests
	}
	return p, nil
}

// Command simload runs the simulator's load benchmarks against `inferrail
// sim` started as a child process, so that the simulator's CPU time and
// resident memory can be read from /proc apart from the load generator's:
//
//  1. streams: thousands of concurrent SSE streams with the default latency
//     model, every one checked token for token, with TTFT percentiles;
//  2. cpu: simulator CPU time per generated token, streamed and not, paced
//     and with --zero-latency;
//  3. soak: VmRSS growth over a long mixed run with --zero-latency;
//  4. wrk: the highest rate of small non-streamed completions, with wrk.
//
// Each benchmark asserts its bound; simload prints a Markdown table, writes
// the full report with --out and exits 1 when any bound is missed.
// scripts/bench-sim.sh is the usual way to run it.
//
// simload owns only its child processes: it starts each simulator (and wrk)
// itself and stops it before it returns. It talks to them over loopback only.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/inferrail/inferrail/bench/loadgen"
)

var benchNames = []string{"streams", "cpu", "soak", "wrk"}

type config struct {
	bin     string
	model   string
	out     string
	command string
	streams streamsConfig
	cpu     cpuConfig
	soak    soakConfig
	wrk     wrkConfig
	run     []string
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// intList is a comma-separated list of positive integers flag.
type intList []int

func (l *intList) String() string {
	s := make([]string, len(*l))
	for i, n := range *l {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

func (l *intList) Set(v string) error {
	var out []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return fmt.Errorf("want positive integers separated by commas, got %q", v)
		}
		out = append(out, n)
	}
	*l = out
	return nil
}

func parse(args []string, stderr io.Writer) (*config, error) {
	c := &config{
		model:   "inferrail/sim-8b",
		streams: streamsConfig{Streams: 2000, MinTokens: 32, MaxTokens: 64, MaxNumSeqs: 2048, GPUBlocks: 32768, BatchedTokens: 65536, Timeout: 3 * time.Minute},
		cpu:     cpuConfig{Requests: 8000, Concurrency: 64, Tokens: 64, Timeout: 3 * time.Minute},
		soak:    soakConfig{Warmup: 2000, Requests: 30000, Concurrency: 64, BoundMiB: 20, Timeout: 4 * time.Minute},
		wrk:     wrkConfig{Bin: "wrk", Threads: 2, Connections: []int{64, 256}, MaxTokens: []int{1, 16}, Duration: 10 * time.Second, Timeout: 10 * time.Second},
	}
	fs := flag.NewFlagSet("simload", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: simload --bin path/to/inferrail [flags] [benchmark...]\n\n"+
			"Runs the simulator load benchmarks (default: all of %s) against `inferrail sim`\n"+
			"child processes on loopback, prints a Markdown table and exits 1 if a bound is missed.\n"+
			"The streams benchmark needs more than --streams open files (ulimit -n); wrk needs wrk.\n\nFlags:\n",
			strings.Join(benchNames, " "))
		fs.PrintDefaults()
	}
	fs.StringVar(&c.bin, "bin", "", "the inferrail binary to run as 'inferrail sim' (required)")
	fs.StringVar(&c.model, "model", c.model, "served model name to start the simulator with and request")
	fs.StringVar(&c.out, "out", "", "write the full Markdown report (table, run info, raw numbers) to this file")
	fs.StringVar(&c.command, "command", "", "the command line to record in the report (default: this invocation)")

	fs.IntVar(&c.streams.Streams, "streams", c.streams.Streams, "streams: concurrent SSE streams")
	fs.IntVar(&c.streams.MinTokens, "stream-min-tokens", c.streams.MinTokens, "streams: smallest max_tokens")
	fs.IntVar(&c.streams.MaxTokens, "stream-max-tokens", c.streams.MaxTokens, "streams: largest max_tokens")
	fs.IntVar(&c.streams.MaxNumSeqs, "stream-max-num-seqs", c.streams.MaxNumSeqs, "streams, cpu: the simulator's --max-num-seqs")
	fs.IntVar(&c.streams.GPUBlocks, "stream-gpu-blocks", c.streams.GPUBlocks, "streams, cpu: the simulator's --num-gpu-blocks-override")
	fs.IntVar(&c.streams.BatchedTokens, "stream-max-batched-tokens", c.streams.BatchedTokens,
		"streams, cpu: the simulator's --max-num-batched-tokens, enough to admit every stream's prompt at once")
	fs.DurationVar(&c.streams.Timeout, "stream-timeout", c.streams.Timeout, "streams: give up after this long")

	fs.IntVar(&c.cpu.Requests, "cpu-requests", c.cpu.Requests, "cpu: requests per zero-latency run")
	fs.IntVar(&c.cpu.Concurrency, "cpu-concurrency", c.cpu.Concurrency, "cpu: concurrency of the zero-latency runs")
	fs.IntVar(&c.cpu.Tokens, "cpu-tokens", c.cpu.Tokens, "cpu: max_tokens of the zero-latency runs")
	fs.DurationVar(&c.cpu.Timeout, "cpu-timeout", c.cpu.Timeout, "cpu: give up after this long")

	fs.IntVar(&c.soak.Warmup, "soak-warmup", c.soak.Warmup, "soak: warm-up requests before the baseline RSS")
	fs.IntVar(&c.soak.Requests, "soak-requests", c.soak.Requests, "soak: requests after the warm-up")
	fs.IntVar(&c.soak.Concurrency, "soak-concurrency", c.soak.Concurrency, "soak: concurrent requests")
	fs.Float64Var(&c.soak.BoundMiB, "soak-rss-bound-mib", c.soak.BoundMiB, "soak: allowed VmRSS growth, MiB")
	fs.DurationVar(&c.soak.Timeout, "soak-timeout", c.soak.Timeout, "soak: give up after this long")

	fs.StringVar(&c.wrk.Bin, "wrk", c.wrk.Bin, "wrk: the wrk binary")
	fs.IntVar(&c.wrk.Threads, "wrk-threads", c.wrk.Threads, "wrk: -t")
	fs.Var((*intList)(&c.wrk.Connections), "wrk-connections", "wrk: -c values to run, comma-separated")
	fs.Var((*intList)(&c.wrk.MaxTokens), "wrk-max-tokens", "wrk: max_tokens values to run, comma-separated")
	fs.DurationVar(&c.wrk.Duration, "wrk-duration", c.wrk.Duration, "wrk: -d of each run (whole seconds)")
	fs.DurationVar(&c.wrk.Timeout, "wrk-timeout", c.wrk.Timeout, "wrk: --timeout, beyond which a response counts as a socket error (whole seconds)")

	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	var errs []error
	if c.bin == "" {
		errs = append(errs, errors.New("--bin: required"))
	} else if abs, err := filepath.Abs(c.bin); err == nil {
		c.bin = abs
	}
	c.run = fs.Args()
	if len(c.run) == 0 {
		c.run = benchNames
	}
	for _, b := range c.run {
		if !slices.Contains(benchNames, b) {
			errs = append(errs, fmt.Errorf("unknown benchmark %q (want %s)", b, strings.Join(benchNames, ", ")))
		}
	}
	if c.streams.Streams <= 0 || c.streams.MinTokens <= 0 || c.streams.MaxTokens < c.streams.MinTokens {
		errs = append(errs, errors.New("--streams, --stream-min-tokens, --stream-max-tokens: want 0 < min ≤ max and streams > 0"))
	}
	if c.streams.MaxNumSeqs < c.streams.Streams {
		errs = append(errs, fmt.Errorf("--stream-max-num-seqs %d: below --streams %d, so not all would run at once",
			c.streams.MaxNumSeqs, c.streams.Streams))
	}
	if c.wrk.Duration < time.Second {
		errs = append(errs, fmt.Errorf("--wrk-duration %v: want at least 1s", c.wrk.Duration))
	}
	if c.wrk.Timeout < time.Second {
		errs = append(errs, fmt.Errorf("--wrk-timeout %v: want at least 1s", c.wrk.Timeout))
	}
	if err := errors.Join(errs...); err != nil {
		fmt.Fprintln(stderr, "simload:", err)
		return nil, errUsage
	}
	if c.command == "" {
		c.command = loadgen.ShellJoin(append([]string{"simload"}, args...))
	}
	return c, nil
}

var errUsage = errors.New("usage")

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c, err := parse(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		return 2
	}
	info := gatherInfo(c.bin, c.wrk.Bin)
	info.Command = c.command
	info.Invocation = loadgen.ShellJoin(append([]string{"simload"}, args...))
	start := time.Now()

	var results []*benchResult
	var streamed *cpuPoint
	failed := false
	for _, name := range benchNames {
		if !slices.Contains(c.run, name) {
			continue
		}
		fmt.Fprintf(stderr, "simload: running %s …\n", name)
		t0 := time.Now()
		var r *benchResult
		var err error
		switch name {
		case "streams":
			r, err = runStreams(ctx, c.bin, c.model, c.streams)
			if err == nil {
				p := r.Raw.(*streamsRaw).CPU
				streamed = &p
			}
		case "cpu":
			r, err = runCPU(ctx, c.bin, c.model, c.streams, c.cpu, streamed)
		case "soak":
			r, err = runSoak(ctx, c.bin, c.model, c.soak)
		case "wrk":
			r, err = runWrk(ctx, c.bin, c.model, c.wrk)
		}
		if err != nil {
			// The benchmark could not run at all: record it as failed and go on.
			r = &benchResult{ID: slices.Index(benchNames, name) + 1, Title: name}
			r.bound("ran", "no", "yes", false)
			r.fail("%v", err)
		}
		results = append(results, r)
		status := "PASS"
		if !r.Pass() {
			status, failed = "FAIL", true
		}
		fmt.Fprintf(stderr, "simload: %s: %s in %.1f s\n", name, status, time.Since(t0).Seconds())
		for _, f := range r.Failures {
			fmt.Fprintf(stderr, "simload: FAIL: benchmark %d (%s): %s\n", r.ID, name, f)
		}
		if ctx.Err() != nil {
			break
		}
	}
	info.Elapsed = time.Since(start)
	info.Machine.LoadEnd = loadgen.LoadAvg()

	renderTable(stdout, results)
	if c.out != "" {
		var buf bytes.Buffer
		if err := renderReport(&buf, info, results); err != nil {
			fmt.Fprintln(stderr, "simload: report:", err)
			return 1
		}
		if err := os.WriteFile(c.out, buf.Bytes(), 0o644); err != nil {
			fmt.Fprintln(stderr, "simload:", err)
			return 1
		}
		fmt.Fprintf(stdout, "\nwrote %s\n", c.out)
	}
	if failed || ctx.Err() != nil {
		fmt.Fprintln(stderr, "simload: FAILED: at least one benchmark missed its bound (see above)")
		return 1
	}
	return 0
}

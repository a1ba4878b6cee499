// Command gwload measures the latency the Inferrail gateway adds to a
// request, next to the latency Debian's nginx adds as a plain round-robin
// proxy, all in front of the same `inferrail sim --zero-latency` engines
// (issue 3, "Benchmarks committed under bench/results"; issue 16):
//
//   - direct: the client sends round robin straight to the simulators;
//   - nginx: through scripts/nginx-proxy.sh (proxy_pass, upstream keep-alive);
//   - fastproxy: through bench/fastproxy, a minimal fasthttp round-robin
//     proxy, the floor for a Go proxy on the gateway's libraries;
//   - gateway: through `inferrail serve`, policy least_request;
//   - gateway-cost_model: through `inferrail serve`, policy cost_model with
//     the simulators' own tokenizer (builtin:sim).
//
// Load is open loop: request i is sent i/rate seconds after the start
// whatever became of earlier ones, and its latency counts from that due
// time (bench/loadgen.RunOpenLoop). Each round runs every target once per
// request kind (non-streamed and streamed /v1/completions, max_tokens 1),
// in an order that rotates from round to round, so drift and noise fall on
// all of them alike. Added latency is (via proxy) − (direct) at a
// percentile within a round; the report gives each round and the median
// over rounds.
//
// Then it measures the most requests per second each proxy passes: wrk,
// closed loop, the same connections and duration for every proxy, the
// proxies taking turns round by round.
//
// gwload also folds the decision-latency benchmarks of actors/fleet into the
// report, from the output files scripts/bench-gateway.sh passes in.
//
// gwload owns only its child processes (the simulators, the proxies and
// wrk): it starts them, stops them before it returns, and they die with
// it if it is killed. It sends traffic to loopback addresses only.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/inferrail/inferrail/bench/loadgen"
)

type config struct {
	bin         string
	nginx       string
	nginxScript string
	fastproxy   string
	wrk         string
	wrkConns    int
	wrkThreads  int
	wrkDuration time.Duration
	model       string
	sims        int
	rate        float64
	requests    int
	warmup      int
	block       int
	rounds      int
	redo        int
	maxOther    float64
	modes       []string
	timeout     time.Duration
	pickBench   string
	pickCmd     string
	neverLate   string
	neverCmd    string
	costBench   string
	costCmd     string
	gatewayEnv  []string
	loadBefore  string
	out         string
	command     string
	args        []string
}

var modeNames = []string{"unary", "stream"}

func main() {
	// The pacer's thread sleeps in nanosleep(2) holding a P; one more P than
	// CPUs keeps both CPUs' worth for the requests themselves.
	runtime.GOMAXPROCS(runtime.NumCPU() + 1)
	// No collection during a run, so that the load generator's GC is not what
	// the percentiles show: a run allocates a few hundred MiB at most, and
	// measure collects before each one. The limit is a backstop.
	debug.SetGCPercent(-1)
	debug.SetMemoryLimit(2 << 30)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

var errUsage = errors.New("usage")

func parse(args []string, stderr io.Writer) (*config, error) {
	c := &config{args: args}
	fs := flag.NewFlagSet("gwload", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: gwload --bin path/to/inferrail --fastproxy path/to/fastproxy [flags]\n\n"+
			"Measures the gateway's added latency, CPU and throughput against nginx's and a minimal\n"+
			"fasthttp proxy's, in front of the same simulators,\n"+
			"writes a Markdown report and exits 1 if a target is missed or any request failed.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	fs.StringVar(&c.bin, "bin", "", "the inferrail binary, run as 'inferrail sim' and 'inferrail serve' (required)")
	fs.StringVar(&c.nginx, "nginx", "nginx", "the nginx binary")
	fs.StringVar(&c.nginxScript, "nginx-script", "scripts/nginx-proxy.sh", "the script that configures and execs nginx")
	fs.StringVar(&c.fastproxy, "fastproxy", "", "the bench/fastproxy binary (required)")
	fs.StringVar(&c.wrk, "wrk", "wrk", "the wrk binary for the throughput runs; empty: skip them")
	fs.IntVar(&c.wrkConns, "wrk-connections", 64, "wrk's connections, the same for every proxy")
	fs.IntVar(&c.wrkThreads, "wrk-threads", 2, "wrk's threads")
	fs.DurationVar(&c.wrkDuration, "wrk-duration", 5*time.Second, "each wrk run's length; every proxy runs once per round")
	fs.StringVar(&c.model, "model", "inferrail/sim-8b", "the model the simulators serve and clients request")
	fs.IntVar(&c.sims, "sims", 3, "simulators behind every target")
	fs.Float64Var(&c.rate, "rate", 2000, "open-loop send rate, requests per second")
	fs.IntVar(&c.requests, "requests", 10000, "measured requests per run")
	fs.IntVar(&c.warmup, "warmup", 1000, "unmeasured requests at the same rate before each run, to open connections")
	fs.IntVar(&c.block, "block", 2000, "measured requests the targets send in turn; a run is --requests over its blocks")
	fs.IntVar(&c.rounds, "rounds", 3, "rounds of every target and request kind")
	fs.IntVar(&c.redo, "redo", 3, "rounds that may be run again, in all, when other processes used the CPUs during them")
	fs.Float64Var(&c.maxOther, "max-other-cores", 0.3, "CPU, in cores, that other processes may use during a run before its round is run again")
	modes := fs.String("modes", strings.Join(modeNames, ","), "request kinds: unary (non-streamed), stream")
	fs.DurationVar(&c.timeout, "timeout", 6*time.Minute, "give up on the whole load benchmark (open loop and wrk) after this long")
	fs.StringVar(&c.pickBench, "pick-bench", "", "output of the actors/fleet Pick benchmarks to report")
	fs.StringVar(&c.pickCmd, "pick-command", "", "the command that produced --pick-bench")
	fs.StringVar(&c.neverLate, "never-late", "", "output of `go test -v -run TestPickNeverLate` to report")
	fs.StringVar(&c.neverCmd, "never-late-command", "", "the command that produced --never-late")
	fs.StringVar(&c.costBench, "cost-bench", "", "output of the actors/fleet CostModelActor benchmarks to report")
	fs.StringVar(&c.costCmd, "cost-command", "", "the command that produced --cost-bench")
	fs.Func("gateway-env", "KEY=value added to the gateway's environment, e.g. GOMAXPROCS=1 (repeatable; for experiments)", func(v string) error {
		if k, _, ok := strings.Cut(v, "="); !ok || k == "" {
			return fmt.Errorf("want KEY=value, got %q", v)
		}
		c.gatewayEnv = append(c.gatewayEnv, v)
		return nil
	})
	fs.StringVar(&c.loadBefore, "loadavg-before", "", "the load average before the whole benchmark began (default: when gwload starts)")
	fs.StringVar(&c.out, "out", "", "write the Markdown report here")
	fs.StringVar(&c.command, "command", "", "the command line to record in the report (default: this invocation)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	var errs []error
	if c.bin == "" {
		errs = append(errs, errors.New("--bin: required"))
	} else if abs, err := filepath.Abs(c.bin); err == nil {
		c.bin = abs
	}
	if abs, err := filepath.Abs(c.nginxScript); err == nil {
		c.nginxScript = abs
	}
	if c.fastproxy == "" {
		errs = append(errs, errors.New("--fastproxy: required (go build -o fastproxy ./bench/fastproxy)"))
	} else if abs, err := filepath.Abs(c.fastproxy); err == nil {
		c.fastproxy = abs
	}
	if c.wrkConns < 1 || c.wrkConns > 10000 {
		errs = append(errs, fmt.Errorf("--wrk-connections %d: want 1 to 10,000", c.wrkConns))
	}
	if c.wrkThreads < 1 || c.wrkThreads > c.wrkConns {
		errs = append(errs, fmt.Errorf("--wrk-threads %d: want 1 to --wrk-connections", c.wrkThreads))
	}
	if c.wrkDuration < time.Second || c.wrkDuration > time.Minute {
		errs = append(errs, fmt.Errorf("--wrk-duration %v: want 1s to 1m", c.wrkDuration))
	}
	for _, m := range strings.Split(*modes, ",") {
		m = strings.TrimSpace(m)
		if m != "unary" && m != "stream" {
			errs = append(errs, fmt.Errorf("--modes: %q: want unary or stream", m))
			continue
		}
		c.modes = append(c.modes, m)
	}
	if c.sims < 1 {
		errs = append(errs, fmt.Errorf("--sims %d: want at least 1", c.sims))
	}
	if !(c.rate > 0) || c.rate > 50000 {
		errs = append(errs, fmt.Errorf("--rate %v: want 0 < rate ≤ 50,000", c.rate))
	}
	// Bounded: the machine is shared, and the run must stop by itself.
	if c.requests < 100 || c.requests > 100000 {
		errs = append(errs, fmt.Errorf("--requests %d: want 100 to 100,000", c.requests))
	}
	if c.warmup < 0 || c.warmup > 100000 {
		errs = append(errs, fmt.Errorf("--warmup %d: want 0 to 100,000", c.warmup))
	}
	if c.block < 100 {
		errs = append(errs, fmt.Errorf("--block %d: want at least 100", c.block))
	}
	if c.rounds < 1 || c.rounds > 20 {
		errs = append(errs, fmt.Errorf("--rounds %d: want 1 to 20", c.rounds))
	}
	if c.redo < 0 || c.redo > 20 {
		errs = append(errs, fmt.Errorf("--redo %d: want 0 to 20", c.redo))
	}
	if len(fs.Args()) > 0 {
		errs = append(errs, fmt.Errorf("unexpected arguments %q", fs.Args()))
	}
	if err := errors.Join(errs...); err != nil {
		fmt.Fprintln(stderr, "gwload:", err)
		return nil, errUsage
	}
	if c.command == "" {
		c.command = loadgen.ShellJoin(append([]string{"gwload"}, args...))
	}
	return c, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c, err := parse(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		return 2
	}
	rep := &report{Info: gatherInfo(c), Config: reportConfig(c)}
	start := time.Now()
	rep.Info.BusyBefore = busyCores(ctx, time.Second)

	lctx, cancel := context.WithTimeout(ctx, c.timeout)
	err = runLoad(lctx, c, rep, stderr)
	cancel()
	if err != nil {
		rep.fail("load benchmark: %v", err)
		fmt.Fprintln(stderr, "gwload:", err)
	}
	rep.Decision = readDecision(c)
	rep.Info.Elapsed = time.Since(start)
	rep.Info.LoadEnd = loadAvg()
	rep.evaluate()

	renderSummary(stdout, rep)
	if ctx.Err() != nil {
		// Interrupted: a partial report must not replace a whole one.
		fmt.Fprintf(stderr, "gwload: interrupted; %s left as it was\n", c.out)
		return 1
	}
	if c.out != "" {
		if err := writeReport(c.out, rep); err != nil {
			fmt.Fprintln(stderr, "gwload:", err)
			return 1
		}
		fmt.Fprintf(stdout, "\nwrote %s\n", c.out)
	}
	if !rep.Pass() || ctx.Err() != nil {
		for _, f := range rep.Failures {
			fmt.Fprintln(stderr, "gwload: FAIL:", f)
		}
		return 1
	}
	return 0
}

// busyCores is how many CPUs the machine kept busy over d.
func busyCores(ctx context.Context, d time.Duration) float64 {
	m0, err := loadgen.MachineCPU()
	if err != nil {
		return -1
	}
	t0 := time.Now()
	select {
	case <-time.After(d):
	case <-ctx.Done():
	}
	m1, err := loadgen.MachineCPU()
	if err != nil {
		return -1
	}
	return (m1 - m0).Seconds() / time.Since(t0).Seconds()
}

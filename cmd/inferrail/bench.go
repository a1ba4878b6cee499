package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/inferrail/inferrail/bench/harness"
	"github.com/inferrail/inferrail/bench/sweep"
	"github.com/inferrail/inferrail/config"
	"github.com/inferrail/inferrail/model/sched"
	"github.com/inferrail/inferrail/sim"
	"github.com/inferrail/inferrail/sim/engine"
	"github.com/inferrail/inferrail/sim/workload"
	"github.com/inferrail/inferrail/transport/tokenize"
)

const benchUsage = `Usage: inferrail bench <command> [flags]

Commands:
  run      one open-loop run against an OpenAI endpoint, printed as a summary
  compare  every policy on the same requests, each on a cold in-process fleet
  sweep    a sweep file in real time, on cold in-process fleets (resumable)
  sim      the same sweep file in virtual time (sim/cluster)
  capacity  each contender's capacity within the SLO and its latencies near the knee, in virtual time (a sweep file with [capacity])
  report   the Markdown report and charts of result directories
  instances  1, 2 and 3 gateway instances on the same engines, in virtual time (--real: processes)
  messages   Claude Code sessions over /v1/messages: cost_model, round_robin and a router hashing the billing header
  calibration  cost_model: auto against engines 2× and 0.5× as slow as configured, and one changing speed, in virtual time

Run 'inferrail bench <command> --help' for a command's flags.
`

// benchCommands maps each bench subcommand to its runner.
func benchCommands() map[string]func(context.Context, []string, io.Writer, io.Writer) error {
	return map[string]func(context.Context, []string, io.Writer, io.Writer) error{
		"run": benchRun, "compare": benchCompare, "sweep": benchSweep, "sim": benchSim, "capacity": benchCapacity, "report": benchReport,
		"instances": benchInstances, "messages": benchMessages, "calibration": benchCalibration,
	}
}

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, benchUsage)
		if len(args) == 0 {
			return errUsage
		}
		return nil
	}
	sub := benchCommands()[args[0]]
	if sub == nil {
		fmt.Fprintf(stderr, "inferrail bench: unknown command %q\n\n%s", args[0], benchUsage)
		return errUsage
	}
	return sub(ctx, args[1:], stdout, stderr)
}

// workloadFlags are the flags naming a workload and its overrides, or a
// trace to replay (registerTrace).
type workloadFlags struct {
	kind, set, sharegpt string

	fs        *flag.FlagSet
	trace     string
	traceOpts workload.TraceOptions
	// tr is the trace workload loaded.
	tr *workload.Trace
}

// traceFlags are the flags of a trace's options, as [point.set] names them.
var traceFlags = []struct{ flag, key string }{
	{"trace-block-size", "block_size"}, {"speed", "speed"}, {"from", "from"}, {"to", "to"},
	{"sample-sessions", "sample_sessions"}, {"sample-requests", "sample_requests"},
}

// registerTrace adds --trace and its options.
func (w *workloadFlags) registerTrace(fs *flag.FlagSet) {
	o := &w.traceOpts
	fs.StringVar(&w.trace, "trace", "", "replay this trace instead of --workload: Mooncake's JSON lines or a request log (--set takes its options as in a sweep's [point.set], e.g. 'limit = 500')")
	fs.IntVar(&o.BlockSize, "trace-block-size", workload.DefaultTraceBlockSize, "--trace: tokens per hash id when the file does not say")
	fs.Float64Var(&o.Speed, "speed", 1, "--trace: time scaling; 2 replays twice as fast (a --rate given sets the rate instead)")
	fs.DurationVar(&o.From, "from", 0, "--trace: replay its requests from this time of its own clock")
	fs.DurationVar(&o.To, "to", 0, "--trace: and up to this time (0: its end)")
	fs.Float64Var(&o.SampleSessions, "sample-sessions", 1, "--trace: keep this share of its sessions, drawn by session")
	fs.Float64Var(&o.SampleRequests, "sample-requests", 1, "--trace: keep this share of its requests, drawn by request")
}

// given reports whether the flag was on the command line.
func (w *workloadFlags) given(name string) bool {
	found := false
	if w.fs != nil {
		w.fs.Visit(func(f *flag.Flag) { found = found || f.Name == name })
	}
	return found
}

// checkTrace reports flags that contradict --trace, or trace flags without it.
func (w *workloadFlags) checkTrace() error {
	if w.trace == "" {
		if w.kind == workload.KindTrace {
			return errors.New("--workload trace: name the file with --trace")
		}
		for _, f := range traceFlags {
			if w.given(f.flag) {
				return fmt.Errorf("--%s: only with --trace", f.flag)
			}
		}
		return nil
	}
	if w.given("workload") && w.kind != workload.KindTrace {
		return fmt.Errorf("--trace and --workload %s: replay a trace or make a workload, not both", w.kind)
	}
	if w.sharegpt != "" {
		return errors.New("--sharegpt: only W2 replays ShareGPT conversations, not --trace")
	}
	w.kind = workload.KindTrace
	return nil
}

// register adds the flags, --workload defaulting to w.kind ("" for W1).
func (w *workloadFlags) register(fs *flag.FlagSet) {
	w.fs = fs
	fs.StringVar(&w.kind, "workload", cmp.Or(w.kind, "W1"), "workload: "+strings.Join(workload.Kinds(), ", "))
	fs.StringVar(&w.set, "set", "", `workload overrides as TOML, e.g. 'prompts = 32' or 'arrivals = {process = "gamma", cv = 4}'`)
	fs.StringVar(&w.sharegpt, "sharegpt", "", "W2: replay conversations from this ShareGPT JSON file")
}

// traceSet is the trace's options as TOML, as a sweep's [point.set]
// holds them: the trace flags given, then --set.
func (w *workloadFlags) traceSet() string {
	var b strings.Builder
	for _, f := range traceFlags {
		if !w.given(f.flag) {
			continue
		}
		v := w.fs.Lookup(f.flag).Value.String()
		if f.key == "from" || f.key == "to" {
			v = strconv.Quote(v)
		}
		fmt.Fprintf(&b, "%s = %s\n", f.key, v)
	}
	b.WriteString(w.set)
	return b.String()
}

// loadTrace reads --trace with its options.
func (w *workloadFlags) loadTrace() (*workload.Trace, error) {
	var o workload.TraceOptions
	md, err := toml.Decode(w.traceSet(), &o)
	if err != nil {
		return nil, fmt.Errorf("--trace: options: %w", err)
	}
	if u := md.Undecoded(); len(u) > 0 {
		return nil, fmt.Errorf("--set: unknown key %s (a trace's options are a sweep's [point.set] keys)", u[0])
	}
	return workload.LoadTrace(w.trace, o)
}

// The --rate and --duration help of the commands that take --trace.
const (
	traceRate     = "with --trace, 0 or none replays at its own rate"
	traceDuration = "with --trace, at most the trace's end, and its end when not given"
)

func (w *workloadFlags) workload() (workload.Workload, error) {
	if err := w.checkTrace(); err != nil {
		return nil, err
	}
	if w.trace != "" {
		t, err := w.loadTrace()
		if err != nil {
			return nil, err
		}
		w.tr = t
		return t, nil
	}
	wl, err := workload.New(w.kind)
	if err != nil {
		return nil, err
	}
	if w.set != "" {
		md, err := toml.Decode(w.set, wl)
		if err != nil {
			return nil, fmt.Errorf("--set: %w", err)
		}
		if u := md.Undecoded(); len(u) > 0 {
			return nil, fmt.Errorf("--set: unknown key %s", u[0])
		}
	}
	if c, ok := wl.(*workload.Conversations); ok {
		if w.sharegpt != "" {
			c.ShareGPT = w.sharegpt
		}
		if err := c.Load(); err != nil {
			return nil, err
		}
	} else if w.sharegpt != "" {
		return nil, errors.New("--sharegpt: only W2 replays ShareGPT conversations")
	}
	return wl, wl.Validate()
}

func benchRun(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("inferrail bench run", flag.ContinueOnError)
	url := fs.String("url", "http://127.0.0.1:8080", "OpenAI-compatible base URL")
	model := fs.String("model", "sim", "model field of every request")
	metrics := fs.String("engine-metrics", "", "comma-separated /metrics URLs of the engines, for their prefix cache counters")
	rate := fs.Float64("rate", 5, "mean requests per second ("+traceRate+")")
	dur := fs.Duration("duration", time.Minute, "requests are due from 0 to this ("+traceDuration+")")
	warm := fs.Duration("warmup", 15*time.Second, "requests due before this are left out of the summary")
	seed := fs.Uint64("seed", 1, "seed of the requests")
	out := fs.String("out", "", "also write the summary as JSON to this file")
	var wf workloadFlags
	wf.register(fs)
	wf.registerTrace(fs)
	if err := parseFlags(fs, args, stderr, "inferrail bench run --url URL (--workload W | --trace FILE) --rate R [flags]"); err != nil {
		return err
	}
	wl, err := wf.workload()
	if err != nil {
		return err
	}
	if wf.tr != nil {
		if !wf.given("rate") || *rate == 0 {
			if *rate = wf.tr.Rate(); *rate == 0 {
				return errors.New("--trace: its requests all arrive at once, so it has no rate of its own: give --rate")
			}
		}
		if end := wf.tr.End(*rate); !wf.given("duration") || *dur > end {
			*dur = end
		}
		fmt.Fprintf(stderr, "%s; replayed at %.3g req/s for %v\n", wf.tr.Describe(), *rate, dur.Round(time.Millisecond))
	}
	t := harness.Target{URL: strings.TrimRight(*url, "/"), Model: *model}
	if *metrics != "" {
		t.Metrics = strings.Split(*metrics, ",")
	}
	run, err := harness.Measure(ctx, t, harness.Options{Workload: wl, Rate: *rate, Duration: *dur, WarmUp: *warm, Seed: *seed})
	if err != nil {
		return err
	}
	s := run.Summarize(harness.DefaultSLO())
	printSummary(stdout, fmt.Sprintf("%s at %v req/s against %s", wl.Name(), *rate, *url), &s)
	if *out != "" {
		b, err := json.MarshalIndent(s, "", "  ")
		if err != nil {
			return err
		}
		return os.WriteFile(*out, append(b, '\n'), 0o644)
	}
	return nil
}

func printSummary(w io.Writer, title string, s *harness.Summary) {
	fmt.Fprintf(w, "%s: %d requests, %d errors\n", title, s.Requests, s.Errors)
	for k, n := range s.ErrKinds {
		fmt.Fprintf(w, "  error %q: %d\n", k, n)
	}
	ms := func(x float64) string { return strconv.FormatFloat(x*1000, 'f', 1, 64) + "ms" }
	fmt.Fprintf(w, "  TTFT     mean %s  p50 %s  p90 %s  p99 %s  max %s\n", ms(s.TTFT.Mean), ms(s.TTFT.P50), ms(s.TTFT.P90), ms(s.TTFT.P99), ms(s.TTFT.Max))
	fmt.Fprintf(w, "  TPOT     mean %s  p99 %s;  ITL p50 %s  p99 %s;  E2E p50 %s  p99 %s\n", ms(s.TPOT.Mean), ms(s.TPOT.P99), ms(s.ITL.P50), ms(s.ITL.P99), ms(s.E2E.P50), ms(s.E2E.P99))
	fmt.Fprintf(w, "  send lag p50 %s  p99 %s  max %s\n", ms(s.SendLag.P50), ms(s.SendLag.P99), ms(s.SendLag.Max))
	fmt.Fprintf(w, "  offered %.2f req/s, throughput %.2f req/s (%.0f tokens/s), goodput %.2f req/s (%.1f%% within the SLO)\n",
		s.Offered, s.Throughput, s.OutputTokens, s.Goodput, s.GoodShare*100)
	fmt.Fprintf(w, "  hit rate %.3f", s.HitRate)
	if s.EngineHitRate != nil {
		fmt.Fprintf(w, ", engines' own %.3f", *s.EngineHitRate)
	}
	if s.OracleHitRate != nil {
		fmt.Fprintf(w, ", oracle %.3f", *s.OracleHitRate)
	}
	fmt.Fprintln(w)
	if p := s.Prediction; p != nil {
		fmt.Fprintf(w, "  predictions on %d requests: exact %.1f%%, over %.1f%%, under %.1f%%, mean error %.1f tokens, predicted hit %.3f\n",
			p.Requests, p.Exact*100, p.Over*100, p.Under*100, p.MeanError, p.HitRate)
	}
	var shares []string
	for _, sh := range s.Shares {
		shares = append(shares, fmt.Sprintf("%s %.3f", sh.Replica, sh.Share))
	}
	fmt.Fprintf(w, "  shares %s; busiest %.3f\n", strings.Join(shares, ", "), s.BusiestShare)
	for _, p := range s.Policies {
		fmt.Fprintf(w, "  arm %s: %d requests (%d errors), TTFT p50 %s p99 %s, hit rate %.3f, %.1f%% within the SLO\n",
			p.Policy, p.Requests, p.Errors, ms(p.TTFT.P50), ms(p.TTFT.P99), p.HitRate, p.GoodShare*100)
	}
}

// sweepFlags are the flags of the commands that execute sweeps.
type sweepFlags struct {
	out  string
	jobs int
	// requestLogs is --request-log: the directory of the real runs'
	// request logs; requestLogBlock is --request-log-block-size, the
	// log's tokens per hash id (0 keeps observability.request_log's).
	requestLogs     string
	requestLogBlock int
}

func (f *sweepFlags) register(fs *flag.FlagSet, jobs int) {
	fs.StringVar(&f.out, "out", "", "results directory (required); runs already there with the same specification are skipped")
	fs.IntVar(&f.jobs, "jobs", jobs, "runs at once")
}

// registerRequestLog adds --request-log, for the commands that run real
// fleets.
func (f *sweepFlags) registerRequestLog(fs *flag.FlagSet) {
	fs.StringVar(&f.requestLogs, "request-log", "", "write each real run's request log (observability.request_log) into this directory, "+
		"as POINT/RATE/POLICY-rN.requests.jsonl beside its result's name, for inferrail whatif to replay")
	fs.IntVar(&f.requestLogBlock, "request-log-block-size", 0, "tokens per hash id in those logs (observability.request_log.block_size; "+
		"0 keeps its default): the engines' block size keeps every shared block in a replay, 512 is Mooncake's granularity")
}

func benchSweep(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return executeSpec(ctx, "real", args, stdout, stderr)
}

func benchSim(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return executeSpec(ctx, "virtual", args, stdout, stderr)
}

func executeSpec(ctx context.Context, mode string, args []string, stdout, stderr io.Writer) error {
	name := map[string]string{"real": "sweep", "virtual": "sim"}[mode]
	fs := flag.NewFlagSet("inferrail bench "+name, flag.ContinueOnError)
	spec := fs.String("spec", "", "sweep file (TOML; required)")
	var sf sweepFlags
	sf.register(fs, 1)
	if mode == "real" {
		sf.registerRequestLog(fs)
	}
	if err := parseFlags(fs, args, stderr, "inferrail bench "+name+" --spec FILE --out DIR [--jobs N]"); err != nil {
		return err
	}
	sw, err := loadSpec(*spec, sf, stderr)
	if err != nil {
		return err
	}
	return execute(ctx, sw, mode, sf, stdout, stderr)
}

// loadSpec reads the sweep file of --spec, which like --out is required.
func loadSpec(spec string, sf sweepFlags, stderr io.Writer) (*sweep.Sweep, error) {
	if spec == "" || sf.out == "" {
		fmt.Fprintln(stderr, "--spec and --out are required")
		return nil, errUsage
	}
	return sweep.Load(spec)
}

// announce prints what a sweep replays and its warnings.
func announce(sw *sweep.Sweep, stderr io.Writer) {
	for _, n := range sw.Notes {
		fmt.Fprintln(stderr, n)
	}
	for _, w := range sw.Warnings {
		fmt.Fprintln(stderr, "warning:", w)
	}
}

func execute(ctx context.Context, sw *sweep.Sweep, mode string, sf sweepFlags, stdout, stderr io.Writer) error {
	var r sweep.Runner = sweep.Virtual{}
	switch {
	case mode == "real":
		r = inProcess{requestLogs: sf.requestLogs, requestLogBlock: sf.requestLogBlock}
	case sf.requestLogs != "":
		return errors.New("--request-log: only real-time runs have a gateway to log requests")
	}
	announce(sw, stderr)
	if err := sw.CheckMode(mode); err != nil {
		return err
	}
	runs := sw.Plan(mode)
	start := time.Now()
	ran, skipped, err := sweep.Execute(ctx, runs, r, sweep.Options{Dir: sf.out, Jobs: sf.jobs, Progress: stderr})
	fmt.Fprintf(stdout, "%s sweep %q: %d runs made, %d resumed, in %v; results in %s\n",
		mode, sw.Name, ran, skipped, time.Since(start).Round(time.Second), sf.out)
	return err
}

func benchCapacity(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("inferrail bench capacity", flag.ContinueOnError)
	spec := fs.String("spec", "", "sweep file (TOML, with a [capacity] table; required)")
	report := fs.String("report", "", "write the report (report.md) into this directory once every run is made")
	var sf sweepFlags
	sf.register(fs, 1)
	if err := parseFlags(fs, args, stderr, "inferrail bench capacity --spec FILE --out DIR [--jobs N] [--report DIR]"); err != nil {
		return err
	}
	sw, err := loadSpec(*spec, sf, stderr)
	if err != nil {
		return err
	}
	if sw.Capacity == nil {
		return fmt.Errorf("%s: no [capacity] table: run it with inferrail bench sim", *spec)
	}
	announce(sw, stderr)
	start := time.Now()
	ran, skipped, err := sweep.ExecuteCapacity(ctx, sw, "virtual", sweep.Virtual{}, sweep.Options{Dir: sf.out, Jobs: sf.jobs, Progress: stderr})
	fmt.Fprintf(stdout, "capacity sweep %q: %d runs made, %d resumed, in %v; results in %s\n",
		sw.Name, ran, skipped, time.Since(start).Round(time.Second), sf.out)
	if err != nil || *report == "" {
		return err
	}
	results, err := sweep.ReadResults(sf.out)
	if err != nil {
		return err
	}
	files, err := sweep.CapacityReport(results)
	if err != nil {
		return err
	}
	if err := sweep.WriteReport(*report, files); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "report: %s/report.md\n", *report)
	return nil
}

func benchCompare(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("inferrail bench compare", flag.ContinueOnError)
	policies := fs.String("policies", strings.Join(sched.Policies(), ","), "comma-separated policies")
	replicas := fs.Int("replicas", 3, "simulated engines per fleet")
	rate := fs.Float64("rate", 3, "mean requests per second ("+traceRate+")")
	dur := fs.Duration("duration", 2*time.Minute, "requests are due from 0 to this ("+traceDuration+")")
	warm := fs.Duration("warmup", 30*time.Second, "requests due before this are left out")
	reps := fs.Int("repetitions", 1, "repetitions, each on a new seed")
	seed := fs.Uint64("seed", 1, "seed of the first repetition")
	virtual := fs.Bool("virtual", false, "run in virtual time (sim/cluster) instead of real time")
	report := fs.String("report", "", "also write the report into this directory")
	var wf workloadFlags
	wf.register(fs)
	wf.registerTrace(fs)
	var sf sweepFlags
	sf.register(fs, 1)
	sf.registerRequestLog(fs)
	if err := parseFlags(fs, args, stderr, "inferrail bench compare (--workload W | --trace FILE) --rate R --out DIR [flags]"); err != nil {
		return err
	}
	if sf.out == "" {
		fmt.Fprintln(stderr, "--out is required")
		return errUsage
	}
	if err := wf.checkTrace(); err != nil {
		return err
	}
	if wf.trace != "" {
		// The sweep reads the trace: rate 0 is its own, duration 0 its end.
		if !wf.given("rate") {
			*rate = 0
		}
		if !wf.given("duration") {
			*dur = 0
		}
	}
	var text strings.Builder
	fmt.Fprintf(&text, "name = %q\nreplicas = %d\nduration = %q\nwarmup = %q\nrepetitions = %d\nseed = %d\npolicies = [",
		"compare-"+wf.kind, *replicas, dur.String(), warm.String(), *reps, *seed)
	for i, p := range strings.Split(*policies, ",") {
		if i > 0 {
			text.WriteString(", ")
		}
		fmt.Fprintf(&text, "%q", strings.TrimSpace(p))
	}
	fmt.Fprintf(&text, "]\n\n[[point]]\nname = %q\nworkload = %q\nrates = [%s]\n",
		wf.kind, wf.kind, strconv.FormatFloat(*rate, 'g', -1, 64))
	if wf.trace != "" {
		fmt.Fprintf(&text, "trace = %q\n[point.set]\n%s\n", wf.trace, wf.traceSet())
	} else if wf.set != "" || wf.sharegpt != "" {
		text.WriteString("[point.set]\n" + wf.set + "\n")
		if wf.sharegpt != "" {
			fmt.Fprintf(&text, "sharegpt = %q\n", wf.sharegpt)
		}
	}
	dir, _ := os.Getwd()
	sw, err := sweep.Parse(text.String(), dir)
	if err != nil {
		return err
	}
	mode := "real"
	if *virtual {
		mode = "virtual"
	}
	if err := execute(ctx, sw, mode, sf, stdout, stderr); err != nil {
		return err
	}
	results, err := sweep.ReadResults(sf.out)
	if err != nil {
		return err
	}
	files, err := sweep.Report(results)
	if err != nil {
		return err
	}
	if *report != "" {
		if err := sweep.WriteReport(*report, files); err != nil {
			return err
		}
	}
	_, err = stdout.Write(files["report.md"])
	return err
}

func benchReport(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("inferrail bench report", flag.ContinueOnError)
	var dirs stringList
	fs.Var(&dirs, "results", "results directory (repeatable: a real sweep and its virtual twin also get an agreement table)")
	out := fs.String("out", "", "report directory (required): report.md and its SVG charts")
	if err := parseFlags(fs, args, stderr, "inferrail bench report --results DIR [--results DIR] --out DIR"); err != nil {
		return err
	}
	if len(dirs) == 0 || *out == "" {
		fmt.Fprintln(stderr, "--results and --out are required")
		return errUsage
	}
	var results []*sweep.Result
	for _, d := range dirs {
		rs, err := sweep.ReadResults(d)
		if err != nil {
			return err
		}
		results = append(results, rs...)
	}
	files, err := sweep.Report(results)
	if err != nil {
		return err
	}
	if err := sweep.WriteReport(*out, files); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "report of %d results: %s/report.md and %d charts\n", len(results), *out, len(files)-1)
	return nil
}

// output is the file named by an --out flag, created, or stdout when the
// flag is empty, with what closes it.
func output(name string, stdout io.Writer) (io.Writer, func() error, error) {
	if name == "" {
		return stdout, func() error { return nil }, nil
	}
	f, err := os.Create(name)
	if err != nil {
		return nil, nil, err
	}
	return f, f.Close, nil
}

type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

// inProcess runs each real-time run on a cold fleet of its own: simulators
// and a gateway in this process, as inferrail launch starts them, torn down
// after the run. With requestLogs, each run's gateway writes its request
// log there, named as its result (RequestLogFile).
type inProcess struct {
	requestLogs     string
	requestLogBlock int
}

func (p inProcess) Run(ctx context.Context, spec *sweep.RunSpec) (*harness.Run, error) {
	f := fleetSpec{Replicas: spec.Replicas, Engine: spec.Engine, KVEvents: spec.KVEvents, Policy: spec.Policy, Fanout: spec.Fanout,
		SLO: spec.SLO}
	if p.requestLogs != "" {
		f.RequestLog, f.RequestLogBlock = filepath.Join(p.requestLogs, requestLogFile(spec)), p.requestLogBlock
		if err := os.MkdirAll(filepath.Dir(f.RequestLog), 0o755); err != nil {
			return nil, fmt.Errorf("--request-log: %w", err)
		}
		// A run made again logs afresh, not after its last attempt.
		if err := os.Remove(f.RequestLog); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("--request-log: %w", err)
		}
	}
	t, stop, err := startFleet(ctx, f)
	if err != nil {
		return nil, err
	}
	defer stop()
	return harness.Measure(ctx, t,
		harness.Options{Workload: spec.Workload(), Rate: spec.Rate, Duration: spec.Duration, WarmUp: spec.WarmUp, Seed: spec.Seed})
}

// fleetSpec is a cold in-process fleet: simulators of Engine (with their
// KV events when KVEvents), and a gateway routing by Policy over them.
type fleetSpec struct {
	Replicas int
	Engine   engine.Config
	KVEvents bool
	Policy   string
	Fanout   int
	// SessionAffinity is routing.session_affinity.
	SessionAffinity bool
	// SLO is the model's default objective (models[].slo), which every
	// request carries, as the fleet simulator gives every request the
	// sweep's; zero sets none.
	SLO harness.SLO
	// RequestLog is observability.request_log.path, "" none;
	// RequestLogBlock its block_size, 0 its default.
	RequestLog      string
	RequestLogBlock int
	Tweaks          benchTweaks
}

// requestLogFile is where a run's request log goes in --request-log's
// directory: its result's name (RunSpec.File), .requests.jsonl for .json.
func requestLogFile(spec *sweep.RunSpec) string {
	return strings.TrimSuffix(spec.File(), ".json") + ".requests.jsonl"
}

// startFleet starts f's simulators and gateway in this process, as
// inferrail launch starts them, waits until the gateway holds every
// engine's load report, and returns the gateway as a target (with the
// engines' metrics) and how to tear it all down.
func startFleet(ctx context.Context, f fleetSpec) (harness.Target, func(), error) {
	opts := sim.DefaultOptions()
	opts.Port, opts.Engine, opts.EnablePromptTokensDetails = 0, f.Engine, true
	sims, replicas, err := startSims(f.Replicas, opts, f.KVEvents)
	if err != nil {
		return harness.Target{}, nil, err
	}
	closeSims := func() {
		for _, s := range sims {
			s.Close()
		}
	}
	cfg := config.Default()
	cfg.Server.Listen, cfg.Server.AdminListen = "127.0.0.1:0", "127.0.0.1:0"
	cfg.Routing.DefaultPolicy, cfg.Routing.EstimateFanout = f.Policy, f.Fanout
	cfg.Routing.SessionAffinity = f.SessionAffinity
	m := config.NewModel(opts.Model, "sim")
	m.Tokenizer = tokenize.Sim
	m.SLO = config.SLO{TTFT: f.SLO.TTFT, TPOT: f.SLO.TPOT}
	cfg.Models = []config.Model{m}
	cfg.Replicas = replicas
	cfg.Observability.RequestLog.Path = f.RequestLog
	if f.RequestLogBlock != 0 {
		cfg.Observability.RequestLog.BlockSize = f.RequestLogBlock
	}
	var metrics []string
	for _, s := range sims {
		metrics = append(metrics, s.URL()+"/metrics")
	}
	if err := cfg.Validate(); err != nil {
		closeSims()
		return harness.Target{}, nil, err
	}
	gctx, cancel := context.WithCancel(ctx)
	type addrs struct{ gw, admin string }
	ready := make(chan addrs, 1)
	served := make(chan error, 1)
	go func() {
		served <- runGatewayWith(gctx, f.Tweaks, false, "", os.Environ(), cfg, io.Discard, func(gw, admin string) { ready <- addrs{gw, admin} })
	}()
	stop := func() {
		cancel()
		<-served
		closeSims()
	}
	var a addrs
	select {
	case a = <-ready:
	case err := <-served:
		cancel()
		closeSims()
		return harness.Target{}, nil, fmt.Errorf("gateway: %w", err)
	}
	if err := waitLoadReports(ctx, "http://"+a.admin+"/admin/replicas", len(sims)); err != nil {
		stop()
		return harness.Target{}, nil, err
	}
	return harness.Target{URL: "http://" + a.gw, Model: opts.Model, Metrics: metrics}, stop, nil
}

// waitLoadReports waits until the gateway holds a load report of every
// engine (their KV capacity sizes its index), so that the first requests
// are routed as the rest.
func waitLoadReports(ctx context.Context, url string, n int) error {
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		var page struct {
			Replicas []struct {
				Engine *struct {
					KVCapacityBlocks int `json:"kv_capacity_blocks"`
				} `json:"engine"`
			} `json:"replicas"`
		}
		if resp, err := http.Get(url); err == nil {
			err = json.NewDecoder(resp.Body).Decode(&page)
			resp.Body.Close()
			ok := 0
			for _, r := range page.Replicas {
				if r.Engine != nil && r.Engine.KVCapacityBlocks > 0 {
					ok++
				}
			}
			if err == nil && ok == n {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("gateway: no load report of every engine within 10s (%s)", url)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

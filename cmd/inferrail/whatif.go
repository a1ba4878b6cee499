package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/inferrail/inferrail/bench/harness"
	"github.com/inferrail/inferrail/config"
	"github.com/inferrail/inferrail/sim/whatif"
	"github.com/inferrail/inferrail/sim/workload"
)

// whatifFlags are inferrail whatif's flags, parsed.
type whatifFlags struct {
	trace, kind      string
	rate             float64
	requests         int
	topts            workload.TraceOptions
	policies         nameList
	replicas         countList
	scales           floatList
	engine, base     string
	blockSize        int
	fitContext       bool
	sloTTFT, sloTPOT time.Duration
	warmUp           time.Duration
	out              string
	jobs, knee       int
	all              bool
	seed             uint64
	findRate         string
	findRoute        string
	findReplicas     int
	set              map[string]bool // flags given on the command line
}

// defaultWorkloadRequests is how many requests a generated workload runs per
// point unless --requests says.
const defaultWorkloadRequests = 3000

func parseWhatifFlags(args []string, stderr io.Writer) (*whatifFlags, error) {
	slo := harness.DefaultSLO()
	f := &whatifFlags{
		policies: whatif.DefaultRoutes(),
		replicas: countList{2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},
		scales:   floatList{1, 1.5, 2},
	}
	fs := flag.NewFlagSet("inferrail whatif", flag.ContinueOnError)
	fs.StringVar(&f.trace, "trace", "", "replay this trace: Mooncake JSON lines or the gateway's request log")
	fs.StringVar(&f.kind, "workload", "", "instead of --trace, run this generated workload ("+strings.Join(workload.Kinds(), ", ")+"); needs --rate")
	fs.Float64Var(&f.rate, "rate", 0, "the workload's rate in req/s at scale 1 (with --workload; with --find-rate, where the search starts)")
	fs.IntVar(&f.requests, "requests", 0, "requests per point (default: the whole trace, or "+strconv.Itoa(defaultWorkloadRequests)+" of a workload)")
	fs.DurationVar(&f.warmUp, "warmup", 0, "leave out of the measures the requests arriving in each run's first stretch of virtual time: they warm the caches")
	fs.Float64Var(&f.topts.Speed, "speed", 0, "replay the trace this many times faster before scaling (0 is 1)")
	fs.DurationVar(&f.topts.From, "from", 0, "keep the trace's requests from this time on its clock")
	fs.DurationVar(&f.topts.To, "to", 0, "keep the trace's requests before this time on its clock (0: to the end)")
	fs.Float64Var(&f.topts.SampleSessions, "sample-sessions", 0, "keep this share of the trace's sessions (0 keeps all)")
	fs.Float64Var(&f.topts.SampleRequests, "sample-requests", 0, "keep this share of the trace's requests (0 keeps all)")
	fs.IntVar(&f.topts.Limit, "limit", 0, "keep at most this many of the trace's requests (0 keeps all)")
	fs.IntVar(&f.topts.BlockSize, "trace-block-size", 0, "tokens per hash id when the trace does not say (0 is Mooncake's 512)")
	fs.Var(&f.policies, "policies", "comma-separated policies and profiles to compare: built-in policies, llm-d profiles, or NAME=FILE of an EndpointPickerConfig")
	fs.Var(&f.replicas, "replicas", "replica counts to size over: a range 2..16, a list 2,4,8, or both")
	fs.Var(&f.scales, "scale", "load multiples of the traffic's rate, comma-separated")
	fs.StringVar(&f.engine, "engine", "sim", "engine model: a preset ("+presetNames()+"), a cost_model file from inferrail calibrate, or fit (from the request log's TTFTs)")
	fs.StringVar(&f.base, "engine-base", "sim", "preset that gives a calibrated or fitted engine its decode times, KV capacity and GPUs")
	fs.BoolVar(&f.fitContext, "fit-context", false, "give the engines a context long enough for the trace's longest request (max_model_len raised to a power of two, "+
		"the KV pool grown to hold it), as the bench sweeps do, instead of refusing the trace")
	fs.IntVar(&f.blockSize, "engine-block-size", 0, "run the engines with KV blocks of this many tokens, their capacity in tokens kept: coarser blocks simulate faster, and change little on a trace of 512-token hash ids (0 keeps the engine's)")
	fs.DurationVar(&f.sloTTFT, "slo-ttft-p99", slo.TTFT, "SLO on the p99 time to first token")
	fs.DurationVar(&f.sloTPOT, "slo-tpot-p99", slo.TPOT, "SLO on the p99 time per output token")
	fs.StringVar(&f.out, "out", "", "directory for the report, its charts and the points' results (required; a rerun resumes from it)")
	fs.IntVar(&f.jobs, "jobs", runtime.GOMAXPROCS(0), "points run at once")
	fs.IntVar(&f.knee, "knee", 2, "replica counts run above each policy's fewest, for the knee chart")
	fs.BoolVar(&f.all, "all", false, "run every replica count instead of searching for the fewest")
	fs.Uint64Var(&f.seed, "seed", 1, "seed of the workload's draws and the policies' randomness")
	fs.StringVar(&f.findRate, "find-rate", "", "POLICY:N: first find the highest rate at which N replicas of POLICY meet the SLO, then size every policy at that rate")
	if err := parseFlags(fs, args, stderr, "inferrail whatif (--trace FILE | --workload NAME --rate R) --out DIR [flags]"); err != nil {
		return nil, err
	}
	f.set = map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { f.set[fl.Name] = true })
	if err := f.validate(); err != nil {
		fmt.Fprintln(stderr, err)
		return nil, errUsage
	}
	return f, nil
}

func presetNames() string {
	var names []string
	for _, p := range whatif.Presets() {
		names = append(names, p[0])
	}
	return strings.Join(names, ", ")
}

// validate reports every problem with the flags at once.
func (f *whatifFlags) validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	switch {
	case f.trace == "" && f.kind == "":
		bad("--trace or --workload: set one")
	case f.trace != "" && f.kind != "":
		bad("--trace %s and --workload %s: set one", f.trace, f.kind)
	case f.kind != "" && !(f.rate > 0):
		bad("--workload %s: needs --rate above 0", f.kind)
	}
	if f.trace != "" && f.set["rate"] && f.findRate == "" {
		bad("--rate: a trace runs at its own rate; use --scale")
	}
	if f.kind != "" {
		for _, n := range []string{"speed", "from", "to", "sample-sessions", "sample-requests", "limit", "trace-block-size"} {
			if f.set[n] {
				bad("--%s: only with --trace", n)
			}
		}
	}
	if f.warmUp < 0 {
		bad("--warmup %v: want at least 0", f.warmUp)
	}
	if f.requests < 0 {
		bad("--requests %d: want at least 1", f.requests)
	}
	if f.out == "" {
		bad("--out: required")
	}
	if f.jobs < 1 {
		bad("--jobs %d: want at least 1", f.jobs)
	}
	if f.blockSize < 0 {
		bad("--engine-block-size %d: want at least 0", f.blockSize)
	}
	if f.knee < 0 {
		bad("--knee %d: want at least 0", f.knee)
	}
	if f.sloTTFT <= 0 || f.sloTPOT <= 0 {
		bad("--slo-ttft-p99 %v, --slo-tpot-p99 %v: want both above 0", f.sloTTFT, f.sloTPOT)
	}
	if f.engine == "fit" && f.trace == "" {
		bad("--engine fit: needs --trace with a request log")
	}
	if f.findRate != "" {
		route, n, ok := strings.Cut(f.findRate, ":")
		k, err := strconv.Atoi(n)
		if !ok || route == "" || err != nil || k < 1 {
			bad("--find-rate %q: want POLICY:N, such as round_robin:3", f.findRate)
		} else if !slices.Contains(f.policies, route) {
			bad("--find-rate %s: %s is not among --policies", f.findRate, route)
		}
		f.findRoute, f.findReplicas = route, k
		if f.set["scale"] {
			bad("--find-rate and --scale: the rate found is the one load swept; drop --scale")
		}
	}
	return errors.Join(errs...)
}

// runWhatif answers "how many GPUs does this policy save on my traffic?".
func runWhatif(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f, err := parseWhatifFlags(args, stderr)
	if err != nil {
		return err
	}
	plan, logged, err := f.plan(stderr)
	if err != nil {
		return err
	}
	opts := whatif.Options{Dir: f.out, Jobs: f.jobs, Progress: stderr}
	var found *whatif.FoundRate
	if f.findRate != "" {
		fmt.Fprintf(stderr, "finding the highest rate %d %s replicas sustain\n", f.findReplicas, f.findRoute)
		if found, err = whatif.FindRate(ctx, plan, f.findRoute, f.findReplicas, opts); err != nil {
			return err
		}
		plan.Scales = []float64{found.Rate / plan.Rate}
	}
	rep, err := whatif.Sweep(ctx, plan, opts)
	if err != nil {
		return err
	}
	rep.FoundRate = found
	if logged != nil {
		if rep.Fidelity, err = whatif.CheckFidelity(ctx, plan, logged, opts); err != nil {
			return fmt.Errorf("fidelity: %w", err)
		}
	}
	if err := rep.Write(f.out); err != nil {
		return err
	}
	rep.Summary(stdout)
	fmt.Fprintf(stdout, "report: %s/report.md\n", strings.TrimRight(f.out, "/"))
	return nil
}

// plan makes the sweep's plan from the flags, and returns the request log's
// records when the trace is one with measured TTFTs.
func (f *whatifFlags) plan(stderr io.Writer) (whatif.Plan, []whatif.Logged, error) {
	p := whatif.Plan{
		Requests: f.requests, WarmUp: f.warmUp, Replicas: f.replicas, Scales: f.scales, Seed: f.seed,
		SLO:    whatif.SLO{TTFT: f.sloTTFT, TPOT: f.sloTPOT},
		Fanout: config.Default().Routing.EstimateFanout,
		Knee:   f.knee, All: f.all,
	}
	var logged []whatif.Logged
	if f.trace != "" {
		t, err := workload.LoadTrace(f.trace, f.topts)
		if err != nil {
			return p, nil, err
		}
		if t.Rate() <= 0 {
			return p, nil, fmt.Errorf("trace %s: its requests span no time, so it has no rate to scale", f.trace)
		}
		digest, err := fileDigest(f.trace)
		if err != nil {
			return p, nil, err
		}
		t.Label = filepath.Base(f.trace)
		p.Workload, p.Rate, p.Input = t, t.Rate(), t.Describe()
		if p.Requests == 0 {
			p.Requests = t.Len()
		}
		o, _ := json.Marshal(f.topts) // a struct of numbers always marshals
		p.Key = "trace " + digest + " " + string(o)
		if t.Logged() {
			for _, r := range t.Records() {
				logged = append(logged, whatif.Logged{Policy: r.Policy, Replica: r.Replica, Input: r.InputLength,
					Cached: r.Cached, HasCached: r.HasCached, TTFT: r.TTFT, Measured: r.Measured})
			}
		}
	} else {
		w, err := workload.New(f.kind)
		if err != nil {
			return p, nil, err
		}
		if err := w.Validate(); err != nil {
			return p, nil, err
		}
		p.Workload, p.Rate = w, f.rate
		if p.Requests == 0 {
			p.Requests = defaultWorkloadRequests
		}
		params, err := json.Marshal(w)
		if err != nil {
			return p, nil, fmt.Errorf("workload %s: %w", f.kind, err)
		}
		p.Key = "workload " + f.kind + " " + string(params)
	}
	routes, err := whatif.ParseRoutes(f.policies, func(path string) ([]byte, error) {
		return workload.ReadFile(path, maxProfileBytes)
	})
	if err != nil {
		return p, nil, fmt.Errorf("--policies: %w", err)
	}
	p.Routes = routes
	if p.Engine, err = f.engineModel(logged, stderr); err != nil {
		return p, nil, err
	}
	if f.blockSize > 0 {
		if p.Engine, err = p.Engine.WithBlockSize(f.blockSize); err != nil {
			return p, nil, fmt.Errorf("--engine-block-size: %w", err)
		}
	}
	if t, ok := p.Workload.(*workload.Trace); ok {
		if c, raised := p.Engine.Config.WithContext(t.Longest()); raised && f.fitContext {
			fmt.Fprintf(stderr, "whatif: the trace's longest request needs %d tokens: engine %s gets max_model_len %d and %d KV blocks of %d tokens (--fit-context)\n",
				t.Longest(), p.Engine.Name, c.MaxModelLen, c.NumBlocks, c.BlockSize)
			p.Engine.Config = c
		}
		if err := fitsContext(t, p.Engine); err != nil {
			return p, nil, err
		}
	}
	return p, logged, p.Validate()
}

// fitsContext checks, before any point runs, that every request of the
// trace fits the engine's context: an engine refuses a longer one, and the
// sweep would stop at its first point.
func fitsContext(t *workload.Trace, e whatif.Engine) error {
	if n, limit := t.Longest(), e.Config.MaxModelLen; n > limit {
		return fmt.Errorf("trace %s: its longest request needs %d tokens (prompt and output), more than engine %s's max_model_len %d: choose an engine with a longer context (--fit-context), or leave the long requests out (--limit, --from, --to)",
			t.Name(), n, e.Name, limit)
	}
	return nil
}

// maxProfileBytes bounds an EndpointPickerConfig file and a cost_model
// fragment.
const maxProfileBytes = 1 << 20

// engineModel is the engine --engine names.
func (f *whatifFlags) engineModel(logged []whatif.Logged, stderr io.Writer) (whatif.Engine, error) {
	if e, err := whatif.Preset(f.engine); err == nil {
		return e, nil
	}
	base, err := whatif.Preset(f.base)
	if err != nil {
		return whatif.Engine{}, fmt.Errorf("--engine-base: %w", err)
	}
	if f.engine == "fit" {
		if logged == nil {
			return whatif.Engine{}, fmt.Errorf("--engine fit: %s is not a request log with measured TTFTs", f.trace)
		}
		m, rep, err := whatif.FitLog(logged, whatif.FitOptions{})
		if err != nil {
			return whatif.Engine{}, fmt.Errorf("--engine fit: %w", err)
		}
		src := fmt.Sprintf("prefill fitted to the fastest 10%% of each size bucket of %s (%d of %d requests, %d buckets, RMS error %.0f%%); decode and KV from preset %s",
			f.trace, rep.Kept, rep.Requests, rep.Buckets, 100*rep.RelError, f.base)
		fmt.Fprintln(stderr, "engine:", src)
		return whatif.WithPrefill(base, m, "fit", src), nil
	}
	b, err := workload.ReadFile(f.engine, maxProfileBytes)
	if err != nil {
		return whatif.Engine{}, fmt.Errorf("--engine %s: not a preset (%s), fit, or a readable cost_model file: %w", f.engine, presetNames(), err)
	}
	m, err := whatif.ParseFragment(b)
	if err != nil {
		return whatif.Engine{}, fmt.Errorf("--engine %s: %w", f.engine, err)
	}
	return whatif.WithPrefill(base, m, "calibrated", "prefill from "+f.engine+" (inferrail calibrate); decode and KV from preset "+f.base), nil
}

// fileDigest is the SHA-256 of a file's content, so that results made from
// one version of a trace are not reused for another.
func fileDigest(path string) (string, error) {
	fh, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer fh.Close()
	h := sha256.New()
	if _, err := io.Copy(h, fh); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// nameList is a comma-separated list of names, replacing its default.
type nameList []string

func (l *nameList) String() string {
	if l == nil {
		return ""
	}
	return strings.Join(*l, ",")
}

func (l *nameList) Set(v string) error {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return errors.New("want at least one name")
	}
	*l = out
	return nil
}

// countList is a list of positive counts: ranges A..B and single counts,
// comma-separated, kept sorted and distinct.
type countList []int

func (l *countList) String() string {
	if l == nil || len(*l) == 0 {
		return ""
	}
	// Write runs of consecutive counts as ranges.
	var parts []string
	s := *l
	for i := 0; i < len(s); {
		j := i
		for j+1 < len(s) && s[j+1] == s[j]+1 {
			j++
		}
		if j-i >= 2 {
			parts = append(parts, fmt.Sprintf("%d..%d", s[i], s[j]))
		} else {
			for k := i; k <= j; k++ {
				parts = append(parts, strconv.Itoa(s[k]))
			}
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}

// maxCounts bounds a count list, so that 1..1000000 is an error, not a plan.
const maxCounts = 256

func (l *countList) Set(v string) error {
	var out []int
	for _, part := range strings.Split(v, ",") {
		part = strings.TrimSpace(part)
		lo, hi, isRange := strings.Cut(part, "..")
		a, err := strconv.Atoi(strings.TrimSpace(lo))
		b := a
		if err == nil && isRange {
			b, err = strconv.Atoi(strings.TrimSpace(hi))
		}
		switch {
		case err != nil:
			return fmt.Errorf("want counts and ranges such as 2..16 or 2,4,8, got %q", part)
		case a < 1 || b < a:
			return fmt.Errorf("%q: want counts from 1, a range low to high", part)
		case b-a >= maxCounts:
			return fmt.Errorf("%q: more than %d counts", part, maxCounts)
		}
		for n := a; n <= b; n++ {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	out = slices.Compact(out)
	if len(out) > maxCounts {
		return fmt.Errorf("%d counts: want at most %d", len(out), maxCounts)
	}
	*l = out
	return nil
}

// floatList is a comma-separated list of positive numbers.
type floatList []float64

func (l *floatList) String() string {
	if l == nil {
		return ""
	}
	s := make([]string, len(*l))
	for i, v := range *l {
		s[i] = strconv.FormatFloat(v, 'g', -1, 64)
	}
	return strings.Join(s, ",")
}

func (l *floatList) Set(v string) error {
	var out []float64
	for _, part := range strings.Split(v, ",") {
		x, err := strconv.ParseFloat(strings.TrimSpace(part), 64)
		if err != nil || !(x > 0) || x > 1e6 {
			return fmt.Errorf("want positive numbers such as 1,1.5,2, got %q", part)
		}
		out = append(out, x)
	}
	*l = out
	return nil
}

// Package calib measures cost_model's online calibration (routing.
// cost_model: auto, issue 30) in the fleet simulator (sim/cluster with
// Config.AutoCalibrate): how fast each replica's fit of a, b and d reaches
// its engine's true parameters on ordinary traffic, what it does to
// cost_model's p99 TTFT against a hand calibration and against none, and
// how it follows an engine that changes speed mid-run.
//
// calib starts no goroutines of its own beyond Options.Jobs runs at once,
// does no I/O but writing the report the caller asks for, and keeps no
// globals.
package calib

import (
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/inferrail/inferrail/model/cost"
	"github.com/inferrail/inferrail/model/policy"
	"github.com/inferrail/inferrail/sim/cluster"
	"github.com/inferrail/inferrail/sim/engine"
	"github.com/inferrail/inferrail/sim/workload"
)

// Point is one workload at its rate.
type Point struct {
	Name     string
	Workload func() workload.Workload
	Rate     float64
}

// Points are W1 (32 system prompts, as bench/agree runs it) and mix (W1
// and W6 half and half), at rates three engines twice as slow as the
// default still serve.
func Points() []Point {
	return []Point{
		{"W1", func() workload.Workload { w := workload.W1(); w.Prompts = 32; return &w }, 2.5},
		{"mix", func() workload.Workload { w := workload.MixW1W6(); return &w }, 4},
	}
}

// Pool is how the engines' true prefill parameters relate to the
// configured ones (the defaults): each replica's factor.
type Pool struct {
	Name    string
	Factors []float64
}

// Pools are every engine 2× and 0.5× as slow as configured, and a pool
// mixing the two (2×, 0.5×, 2×).
func Pools() []Pool {
	return []Pool{{"2x", []float64{2, 2, 2}}, {"0.5x", []float64{0.5, 0.5, 0.5}}, {"mixed", []float64{2, 0.5, 2}}}
}

// Options describe the runs.
type Options struct {
	Points []Point
	Pools  []Pool
	Seeds  []uint64
	// Engine is every engine's config before its factor.
	Engine engine.Config
	// Requests per run.
	Requests int
	// Jobs is how many runs go at once.
	Jobs int
}

// scaled is l with its prefill parameters multiplied by f.
func scaled(l engine.Latency, f float64) engine.Latency {
	l.PrefillToken = time.Duration(float64(l.PrefillToken) * f)
	l.PrefillPair *= f
	l.PrefillFixed = time.Duration(float64(l.PrefillFixed) * f)
	return l
}

// truth is the cost model of latency l's prefill, with the configured
// decode interference.
func truth(l engine.Latency) cost.Model {
	m := cost.Default()
	m.PrefillTokenSecs, m.PrefillPairSecs, m.PrefillFixedSecs = l.PrefillToken.Seconds(), l.PrefillPair*1e-9, l.PrefillFixed.Seconds()
	return m
}

// Calibration is how a run prices its replicas.
type Calibration string

// The calibrations compared.
const (
	// Auto: routing.cost_model: auto from the defaults.
	Auto Calibration = "auto"
	// Hand: each replica priced with its engine's true parameters.
	Hand Calibration = "hand"
	// None: the defaults, whatever the engines run.
	None Calibration = "uncalibrated"
)

// config is one run's config.
func (o *Options) config(pt Point, pool Pool, c Calibration, seed uint64) cluster.Config {
	cm := policy.DefaultCostModelParams()
	cfg := cluster.Config{Replicas: len(pool.Factors), Engine: o.Engine, Policy: "cost_model", CostModel: &cm,
		Workload: pt.Workload(), Rate: pt.Rate, Requests: o.Requests, Seed: seed,
		EngineOverrides: map[int]engine.Latency{}}
	for i, f := range pool.Factors {
		l := scaled(o.Engine.Latency, f)
		cfg.EngineOverrides[i] = l
		if c == Hand {
			if cfg.ReplicaCostModels == nil {
				cfg.ReplicaCostModels = map[int]cost.Model{}
			}
			cfg.ReplicaCostModels[i] = truth(l)
		}
	}
	cfg.AutoCalibrate = c == Auto
	return cfg
}

// parallel runs f(i) for i < n, jobs at once, and returns the first error.
func parallel(n, jobs int, f func(i int) error) error {
	var wg sync.WaitGroup
	errs := make([]error, n)
	sem := make(chan struct{}, max(jobs, 1))
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			errs[i] = f(i)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// Checkpoints are the requests per replica at which a fit's error is
// reported.
var Checkpoints = []int{100, 250, 500, 1000}

// ErrorRow is one point and pool: each parameter's relative error after
// each checkpoint's requests on a replica, over every replica and seed.
type ErrorRow struct {
	Point, Pool string
	// Errs[p][k] are parameter p's (a, b, d) relative errors, fit over
	// truth less one, at Checkpoints[k], one per replica and seed.
	Errs [3][][]float64
	// Samples[k] are the samples the fits had taken by then.
	Samples [][]int
	// Ratio are the estimated over measured TTFT quantiles (p10, p50,
	// p90) of the requests after the first 500, and the share within 25%.
	Ratio  [3]float64
	Within float64
}

// Convergence runs every point and pool with auto on, every seed.
func Convergence(o Options) ([]ErrorRow, error) {
	type job struct {
		pt   Point
		pool Pool
		seed uint64
	}
	var jobs []job
	for _, pt := range o.Points {
		for _, pool := range o.Pools {
			for _, s := range o.Seeds {
				jobs = append(jobs, job{pt, pool, s})
			}
		}
	}
	res := make([]cluster.Result, len(jobs))
	err := parallel(len(jobs), o.Jobs, func(i int) error {
		j := jobs[i]
		r, err := cluster.Run(o.config(j.pt, j.pool, Auto, j.seed))
		res[i] = r
		return err
	})
	if err != nil {
		return nil, err
	}
	var rows []ErrorRow
	for i := 0; i < len(jobs); i += len(o.Seeds) {
		j := jobs[i]
		row := ErrorRow{Point: j.pt.Name, Pool: j.pool.Name, Samples: make([][]int, len(Checkpoints))}
		for p := range row.Errs {
			row.Errs[p] = make([][]float64, len(Checkpoints))
		}
		var ratios []float64
		for _, r := range res[i : i+len(o.Seeds)] {
			for rep, trace := range r.Fits {
				want := truth(scaled(o.Engine.Latency, j.pool.Factors[rep]))
				for k, n := range Checkpoints {
					pt, ok := at(trace, n)
					if !ok {
						continue
					}
					m := pt.Model
					row.Errs[0][k] = append(row.Errs[0][k], m.PrefillTokenSecs/want.PrefillTokenSecs-1)
					row.Errs[1][k] = append(row.Errs[1][k], m.PrefillPairSecs/want.PrefillPairSecs-1)
					row.Errs[2][k] = append(row.Errs[2][k], m.PrefillFixedSecs/want.PrefillFixedSecs-1)
					row.Samples[k] = append(row.Samples[k], pt.Stats.Samples)
				}
			}
			ratios = append(ratios, ttftRatios(&r, 500)...)
		}
		row.Ratio, row.Within = quantiles(ratios)
		rows = append(rows, row)
	}
	return rows, nil
}

// at returns the trace's point after n requests.
func at(trace []cluster.FitPoint, n int) (cluster.FitPoint, bool) {
	for _, p := range trace {
		if p.Requests == n {
			return p, true
		}
	}
	return cluster.FitPoint{}, false
}

// ttftRatios returns the estimated over measured TTFT of the priced
// requests of r from the skip-th on.
func ttftRatios(r *cluster.Result, skip int) []float64 {
	var out []float64
	for i := skip; i < len(r.Requests); i++ {
		rec := &r.Requests[i]
		if est := r.Estimates[i]; est > 0 && !rec.Rejected && rec.TTFT() > 0 {
			out = append(out, est.Seconds()/rec.TTFT().Seconds())
		}
	}
	return out
}

// quantiles returns p10, p50 and p90 of v, and the share within 25% of 1.
func quantiles(v []float64) ([3]float64, float64) {
	if len(v) == 0 {
		return [3]float64{}, 0
	}
	s := slices.Clone(v)
	sort.Float64s(s)
	q := func(p float64) float64 { return s[min(int(p*float64(len(s))), len(s)-1)] }
	within := 0
	for _, x := range s {
		if x >= 0.8 && x <= 1.25 {
			within++
		}
	}
	return [3]float64{q(0.1), q(0.5), q(0.9)}, float64(within) / float64(len(s))
}

// TTFTRow is one point and pool: cost_model's p99 TTFT per calibration,
// one per seed, over every request (P99) and over those after the first
// Settle (Settled), once the fits have settled.
type TTFTRow struct {
	Point, Pool string
	P99         map[Calibration][]time.Duration
	Settled     map[Calibration][]time.Duration
}

// Settle is how many requests of a run (a third on each of three replicas)
// TTFTRow.Settled leaves out.
const Settle = 1000

// p99From is the p99 TTFT of r's requests from the from-th on.
func p99From(r *cluster.Result, from int) time.Duration {
	var v []time.Duration
	for i := from; i < len(r.Requests); i++ {
		if rec := &r.Requests[i]; !rec.Rejected {
			v = append(v, rec.TTFT())
		}
	}
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	return v[min((99*len(v)+99)/100, len(v))-1]
}

// Calibrations are the calibrations TTFT compares, in report order.
var Calibrations = []Calibration{Auto, Hand, None}

// TTFT runs every point, pool, calibration and seed.
func TTFT(o Options) ([]TTFTRow, error) {
	type job struct {
		row  int
		c    Calibration
		seed uint64
	}
	var rows []TTFTRow
	var jobs []job
	var cfgs []cluster.Config
	for _, pt := range o.Points {
		for _, pool := range o.Pools {
			rows = append(rows, TTFTRow{Point: pt.Name, Pool: pool.Name, P99: map[Calibration][]time.Duration{},
				Settled: map[Calibration][]time.Duration{}})
			for _, c := range Calibrations {
				for _, s := range o.Seeds {
					jobs = append(jobs, job{len(rows) - 1, c, s})
					cfgs = append(cfgs, o.config(pt, pool, c, s))
				}
			}
		}
	}
	p99, settled := make([]time.Duration, len(jobs)), make([]time.Duration, len(jobs))
	err := parallel(len(jobs), o.Jobs, func(i int) error {
		r, err := cluster.Run(cfgs[i])
		p99[i], settled[i] = r.Summary.P99TTFT, p99From(&r, Settle)
		return err
	})
	if err != nil {
		return nil, err
	}
	for i, j := range jobs {
		rows[j.row].P99[j.c] = append(rows[j.row].P99[j.c], p99[i])
		rows[j.row].Settled[j.c] = append(rows[j.row].Settled[j.c], settled[i])
	}
	return rows, nil
}

// SpeedRow is one speed-change run: replica 0 of three default engines
// becomes Factor times as slow at At.
type SpeedRow struct {
	Point  string
	Seed   uint64
	Factor float64
	At     time.Duration
	// Refit is how many of replica 0's requests after the change went by
	// before its fit's a came within 10% of the new truth and stayed there
	// (-1: never), and A the fit's a over the new truth at the end.
	Refit int
	A     float64
	// Before and After are replica 0's share of the requests arriving in
	// the minute before the change and in the minute from one minute after
	// it, with auto and without (None).
	Before, After, BeforeNone, AfterNone float64
}

// SpeedChange runs, for every point and seed, replica 0 becoming factor
// times as slow at at, with auto and without.
func SpeedChange(o Options, factor float64, at time.Duration) ([]SpeedRow, error) {
	var rows []SpeedRow
	var cfgs []cluster.Config
	pool := Pool{"default", []float64{1, 1, 1}}
	for _, pt := range o.Points {
		for _, s := range o.Seeds {
			rows = append(rows, SpeedRow{Point: pt.Name, Seed: s, Factor: factor, At: at})
			for _, c := range []Calibration{Auto, None} {
				cfg := o.config(pt, pool, c, s)
				cfg.Faults.SpeedChange = []cluster.SpeedChange{{At: at, Replica: 0, Factor: factor}}
				cfgs = append(cfgs, cfg)
			}
		}
	}
	res := make([]cluster.Result, len(cfgs))
	err := parallel(len(cfgs), o.Jobs, func(i int) error {
		r, err := cluster.Run(cfgs[i])
		res[i] = r
		return err
	})
	if err != nil {
		return nil, err
	}
	want := truth(scaled(o.Engine.Latency, factor)).PrefillTokenSecs
	for i := range rows {
		auto, none := &res[2*i], &res[2*i+1]
		row := &rows[i]
		row.Before, row.After = share(auto, at-time.Minute, at), share(auto, at+time.Minute, at+2*time.Minute)
		row.BeforeNone, row.AfterNone = share(none, at-time.Minute, at), share(none, at+time.Minute, at+2*time.Minute)
		trace := auto.Fits[0]
		base := -1
		row.Refit = -1
		for _, p := range trace {
			if p.At < at {
				continue
			}
			if base < 0 {
				base = p.Requests
			}
			if math.Abs(p.Model.PrefillTokenSecs/want-1) <= 0.1 {
				if row.Refit < 0 {
					row.Refit = p.Requests - base
				}
			} else {
				row.Refit = -1
			}
		}
		row.A = trace[len(trace)-1].Model.PrefillTokenSecs / want
	}
	return rows, nil
}

// share is replica 0's share of the routed requests arriving in [from, to).
func share(r *cluster.Result, from, to time.Duration) float64 {
	n, k := 0, 0
	for i := range r.Requests {
		rec := &r.Requests[i]
		if rec.Arrival < from || rec.Arrival >= to || rec.Replica < 0 {
			continue
		}
		n++
		if rec.Replica == 0 {
			k++
		}
	}
	if n == 0 {
		return 0
	}
	return float64(k) / float64(n)
}

// WriteErrors writes the convergence table: per point, pool and
// parameter, the median and the largest absolute relative error over
// replicas and seeds at each checkpoint.
func WriteErrors(w io.Writer, rows []ErrorRow) {
	fmt.Fprint(w, "| point | pool | parameter |")
	for _, n := range Checkpoints {
		fmt.Fprintf(w, " after %d: median (worst) |", n)
	}
	fmt.Fprint(w, "\n|---|---|---|")
	for range Checkpoints {
		fmt.Fprint(w, "---:|")
	}
	fmt.Fprintln(w)
	for _, r := range rows {
		for p, name := range []string{"a", "b", "d"} {
			fmt.Fprintf(w, "| %s | %s | %s |", r.Point, r.Pool, name)
			for k := range Checkpoints {
				fmt.Fprintf(w, " %s |", medianWorst(r.Errs[p][k]))
			}
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "| %s | %s | samples |", r.Point, r.Pool)
		for k := range Checkpoints {
			s := r.Samples[k]
			if len(s) == 0 {
				fmt.Fprint(w, " – |")
				continue
			}
			ss := slices.Clone(s)
			slices.Sort(ss)
			fmt.Fprintf(w, " %d (%d–%d) |", ss[len(ss)/2], ss[0], ss[len(ss)-1])
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| point | pool | est/measured TTFT p10 | p50 | p90 | within 25% |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|")
	for _, r := range rows {
		fmt.Fprintf(w, "| %s | %s | %.2f | %.2f | %.2f | %.2f |\n", r.Point, r.Pool, r.Ratio[0], r.Ratio[1], r.Ratio[2], r.Within)
	}
}

// medianWorst formats the median and the largest absolute value of v as
// signed percents.
func medianWorst(v []float64) string {
	if len(v) == 0 {
		return "–"
	}
	s := slices.Clone(v)
	sort.Float64s(s)
	worst := s[0]
	if math.Abs(s[len(s)-1]) > math.Abs(worst) {
		worst = s[len(s)-1]
	}
	return fmt.Sprintf("%+.0f%% (%+.0f%%)", 100*s[len(s)/2], 100*worst)
}

// WriteTTFT writes the p99 TTFT tables, over every request and after the
// first Settle: per point and pool, each calibration's p99 over the seeds
// (median, and the range), and auto's and no calibration's median over
// hand's.
func WriteTTFT(w io.Writer, rows []TTFTRow) {
	fmt.Fprintln(w, "Every request:")
	fmt.Fprintln(w)
	writeTTFT(w, rows, func(r *TTFTRow) map[Calibration][]time.Duration { return r.P99 })
	fmt.Fprintf(w, "\nAfter the first %d requests of each run:\n\n", Settle)
	writeTTFT(w, rows, func(r *TTFTRow) map[Calibration][]time.Duration { return r.Settled })
}

func writeTTFT(w io.Writer, rows []TTFTRow, of func(*TTFTRow) map[Calibration][]time.Duration) {
	fmt.Fprint(w, "| point | pool |")
	for _, c := range Calibrations {
		fmt.Fprintf(w, " %s p99 TTFT: median [range] |", c)
	}
	fmt.Fprintln(w, " auto ÷ hand | uncalibrated ÷ hand |")
	fmt.Fprint(w, "|---|---|")
	for range Calibrations {
		fmt.Fprint(w, "---|")
	}
	fmt.Fprintln(w, "---:|---:|")
	for i := range rows {
		r := &rows[i]
		fmt.Fprintf(w, "| %s | %s |", r.Point, r.Pool)
		med := map[Calibration]time.Duration{}
		for _, c := range Calibrations {
			v := slices.Clone(of(r)[c])
			slices.Sort(v)
			med[c] = v[len(v)/2]
			fmt.Fprintf(w, " %v [%v–%v] |", med[c].Round(time.Millisecond), v[0].Round(time.Millisecond), v[len(v)-1].Round(time.Millisecond))
		}
		fmt.Fprintf(w, " %.3f | %.3f |\n", med[Auto].Seconds()/med[Hand].Seconds(), med[None].Seconds()/med[Hand].Seconds())
	}
}

// WriteSpeed writes the speed-change table.
func WriteSpeed(w io.Writer, rows []SpeedRow) {
	fmt.Fprintln(w, "| point | seed | change | requests to refit a within 10% | a ÷ new truth at the end | share before → after (auto) | share before → after (uncalibrated) |")
	fmt.Fprintln(w, "|---|---:|---|---:|---:|---|---|")
	for _, r := range rows {
		refit := "never"
		if r.Refit >= 0 {
			refit = fmt.Sprint(r.Refit)
		}
		fmt.Fprintf(w, "| %s | %d | replica 0 ×%g at %v | %s | %.2f | %.2f → %.2f | %.2f → %.2f |\n",
			r.Point, r.Seed, r.Factor, r.At, refit, r.A, r.Before, r.After, r.BeforeNone, r.AfterNone)
	}
}

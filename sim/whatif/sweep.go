package whatif

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/inferrail/inferrail/sim/cluster"
	"github.com/inferrail/inferrail/sim/progress"
	"github.com/inferrail/inferrail/sim/resume"
)

// Options control Sweep.
type Options struct {
	// Dir holds the points' result files (Dir/points/HASH.json).
	Dir string
	// Jobs is how many points run at once; below 1 takes GOMAXPROCS.
	Jobs int
	// Progress, when set, gets a progress bar with an ETA.
	Progress io.Writer
}

// runner makes a sweep's points, each once, Jobs at a time, resuming from
// the files in Dir.
type runner struct {
	plan *Plan
	dir  string
	sem  chan struct{}
	bar  *progress.Bar

	mu      sync.Mutex
	results map[string]*Result // by hash
	ran     int
	resumed int
}

func newRunner(p *Plan, o Options, total int) *runner {
	jobs := o.Jobs
	if jobs < 1 {
		jobs = runtime.GOMAXPROCS(0)
	}
	return &runner{
		plan:    p,
		dir:     filepath.Join(o.Dir, "points"),
		sem:     make(chan struct{}, jobs),
		bar:     progress.New(o.Progress, "points", total, 0),
		results: map[string]*Result{},
	}
}

// point returns point pt's result: from its file when that holds the same
// hash, else from a run, which writes the file.
func (rn *runner) point(ctx context.Context, r *Route, replicas int, scale float64) (*Result, error) {
	pt := Point{Route: r.Name, Replicas: replicas, Scale: scale, Rate: rn.plan.Rate * scale}
	h := rn.plan.hash(r, pt)
	path := filepath.Join(rn.dir, h[:24]+".json")
	rn.mu.Lock()
	if res, ok := rn.results[h]; ok {
		rn.mu.Unlock()
		return res, nil
	}
	rn.mu.Unlock()
	if old, err := resume.Read[Result](path); err == nil && old.Hash == h {
		rn.keep(old, &rn.resumed)
		rn.bar.Resumed()
		return old, nil
	}
	select {
	case rn.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-rn.sem }()
	start := time.Now()
	res, err := cluster.Run(rn.plan.config(r, pt))
	if err != nil {
		return nil, fmt.Errorf("%s, %d replicas, %.4g req/s: %w", r.Name, replicas, pt.Rate, err)
	}
	out := Measure(&res, rn.plan.SLO)
	out.Hash, out.Point = h, pt
	out.WallSeconds = time.Since(start).Round(time.Millisecond).Seconds()
	if err := resume.Write(path, &out); err != nil {
		return nil, err
	}
	rn.keep(&out, &rn.ran)
	rn.bar.Finished()
	return &out, nil
}

func (rn *runner) keep(res *Result, count *int) {
	rn.mu.Lock()
	defer rn.mu.Unlock()
	rn.results[res.Hash] = res
	*count++
}

// all returns every result, in order of policy, scale and replicas.
func (rn *runner) all(routes []Route) []Result {
	rn.mu.Lock()
	defer rn.mu.Unlock()
	order := map[string]int{}
	for i, r := range routes {
		order[r.Name] = i
	}
	out := make([]Result, 0, len(rn.results))
	for _, r := range rn.results {
		out = append(out, *r)
	}
	slices.SortFunc(out, func(a, b Result) int {
		if d := order[a.Route] - order[b.Route]; d != 0 {
			return d
		}
		if a.Scale != b.Scale {
			if a.Scale < b.Scale {
				return -1
			}
			return 1
		}
		return a.Replicas - b.Replicas
	})
	return out
}

// search finds the fewest of the sorted replica counts at which route r
// meets the SLO at scale (Bisect), or runs every count with all. It
// returns how many points it asked for, resumed ones included.
func (rn *runner) search(ctx context.Context, r *Route, scale float64, counts []int, knee int, all bool) (int, error) {
	if all {
		var wg sync.WaitGroup
		errs := make([]error, len(counts))
		for i := range counts {
			wg.Go(func() { _, errs[i] = rn.point(ctx, r, counts[i], scale) })
		}
		wg.Wait()
		return len(counts), errors.Join(errs...)
	}
	return Bisect(len(counts), knee, func(i int) (bool, error) {
		res, err := rn.point(ctx, r, counts[i], scale)
		if err != nil {
			return false, err
		}
		return res.Meets, nil
	})
}

// Bisect finds the first of n ordered candidates that meets, assuming
// that every candidate after one that meets meets too: it bisects, then
// asks for the candidate just before the answer and knee after it (the
// knee chart's points). meets is asked about each index at most once. It
// returns how many candidates it asked about.
func Bisect(n, knee int, meets func(i int) (bool, error)) (int, error) {
	asked := map[int]bool{}
	ask := func(i int) (bool, error) {
		asked[i] = true
		return meets(i)
	}
	// Invariant: candidate lo fails or lo = -1; hi meets or hi = n.
	lo, hi := -1, n
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		ok, err := ask(mid)
		if err != nil {
			return len(asked), err
		}
		if ok {
			hi = mid
		} else {
			lo = mid
		}
	}
	if hi == n {
		return len(asked), nil // none meets: nothing to add
	}
	for i := hi - 1; i <= hi+knee; i++ {
		if i < 0 || i >= n || i == hi || asked[i] {
			continue
		}
		if _, err := ask(i); err != nil {
			return len(asked), err
		}
	}
	return len(asked), nil
}

// searchBound is the most points search asks for over n counts: the
// bisection's ceil(log2(n+1)) and up to knee + 1 around the answer.
func searchBound(n, knee int, all bool) int {
	if all {
		return n
	}
	return min(int(math.Ceil(math.Log2(float64(n+1))))+knee+1, n)
}

// Sweep runs p's points and returns the report.
func Sweep(ctx context.Context, p Plan, o Options) (*Report, error) {
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("whatif: %w", err)
	}
	counts := slices.Clone(p.Replicas)
	slices.Sort(counts)
	counts = slices.Compact(counts)
	per := searchBound(len(counts), p.Knee, p.All)
	rn := newRunner(&p, o, per*len(p.Routes)*len(p.Scales))
	start := time.Now()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for i := range p.Routes {
		for _, s := range p.Scales {
			wg.Go(func() {
				asked, err := rn.search(ctx, &p.Routes[i], s, counts, p.Knee, p.All)
				rn.bar.AddTotal(asked - per)
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	rn.bar.End()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	rep := newReport(&p, rn.all(p.Routes))
	rep.Ran, rep.Resumed = rn.ran, rn.resumed
	rep.WallSeconds = time.Since(start).Round(time.Millisecond).Seconds()
	return rep, nil
}

// FoundRate is what FindRate found: the highest rate at which Route on
// Replicas replicas meets the SLO, within the bisection's precision.
type FoundRate struct {
	Route    string  `json:"policy"`
	Replicas int     `json:"replicas"`
	Rate     float64 `json:"rate"`
	// Fails is the lowest rate probed that failed: the answer lies in
	// [Rate, Fails).
	Fails  float64 `json:"fails"`
	Probes int     `json:"probes"`
}

// RateSearch bounds a search for the highest rate that meets an
// objective, assuming that a rate meets when a higher one does: from a
// starting rate it multiplies (or divides) by Grow until one probe meets
// and one fails, at most Bracket times, then bisects the bracket Steps
// times. The answer then lies in [Meets, Fails) with Fails/Meets at most
// 1 + (Grow − 1)/2^Steps: that is the search's precision. A RateSearch is
// a value.
type RateSearch struct {
	Grow           float64
	Bracket, Steps int
}

// Precision is the search's relative precision: the most Fails exceeds
// Meets by, as a share of Meets, once the search is done.
func (s RateSearch) Precision() float64 { return (s.Grow - 1) / math.Pow(2, float64(s.Steps)) }

// Probes is the most probes the search makes: the start, the bracket and
// the bisections.
func (s RateSearch) Probes() int { return 1 + s.Bracket + s.Steps }

// Validate reports a search that could not narrow or would not end.
func (s RateSearch) Validate() error {
	if !(s.Grow > 1) || math.IsInf(s.Grow, 0) || s.Bracket < 1 || s.Bracket > 64 || s.Steps < 0 || s.Steps > 64 {
		return fmt.Errorf("rate search: grow %v, bracket %d, steps %d: want a finite growth above 1, 1 to 64 bracket steps and 0 to 64 bisections",
			s.Grow, s.Bracket, s.Steps)
	}
	return nil
}

// Found is what a RateSearch found: the highest rate probed that met
// (Meets, 0 when none did), the lowest that failed (Fails, 0 when none
// did) and how many probes it made. Bracketed reports that it found both.
type Found struct {
	Meets, Fails float64
	Probes       int
}

// Bracketed reports that the search found a rate that meets and one that
// fails.
func (f Found) Bracketed() bool { return f.Meets > 0 && f.Fails > 0 }

// Find searches from start, asking meets about each rate once. It stops at
// meets' first error. Without a bracket after Bracket steps it returns
// what it found, Bracketed false.
func (s RateSearch) Find(start float64, meets func(rate float64) (bool, error)) (Found, error) {
	var f Found
	probe := func(r float64) error {
		f.Probes++
		ok, err := meets(r)
		if err != nil {
			return err
		}
		if ok {
			f.Meets = r
		} else {
			f.Fails = r
		}
		return nil
	}
	if err := probe(start); err != nil {
		return f, err
	}
	for range s.Bracket {
		if f.Bracketed() {
			break
		}
		r := f.Meets * s.Grow
		if f.Meets == 0 {
			r = f.Fails / s.Grow
		}
		if err := probe(r); err != nil {
			return f, err
		}
	}
	if !f.Bracketed() {
		return f, nil
	}
	for range s.Steps {
		if err := probe((f.Meets + f.Fails) / 2); err != nil {
			return f, err
		}
	}
	return f, nil
}

// findRate bounds FindRate: doublings or halvings to bracket the answer,
// then bisections (2^-6 of the bracket: within 1.6%).
var findRate = RateSearch{Grow: 2, Bracket: 12, Steps: 6}

// FindRate searches, in virtual time, for the highest multiple of p.Rate at
// which route meets the SLO on replicas replicas: it doubles or halves the
// rate from p.Rate until one probe meets and one fails, then bisects. The
// probes are points like any other, resumed from o.Dir.
func FindRate(ctx context.Context, p Plan, route string, replicas int, o Options) (*FoundRate, error) {
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("whatif: %w", err)
	}
	i := slices.IndexFunc(p.Routes, func(r Route) bool { return r.Name == route })
	if i < 0 {
		return nil, fmt.Errorf("whatif: find rate: policy %q is not among the policies swept", route)
	}
	r := &p.Routes[i]
	rn := newRunner(&p, o, findRate.Probes())
	defer rn.bar.End()
	f, err := findRate.Find(1, func(scale float64) (bool, error) {
		res, err := rn.point(ctx, r, replicas, scale)
		if err != nil {
			return false, err
		}
		return res.Meets, nil
	})
	if err != nil {
		return nil, err
	}
	if !f.Bracketed() {
		return nil, fmt.Errorf("whatif: find rate: %s on %d replicas: no bracket from %.4g req/s within %d doublings or halvings (met at %.4g, failed at %.4g)",
			route, replicas, p.Rate, findRate.Bracket, f.Meets*p.Rate, f.Fails*p.Rate)
	}
	rn.bar.AddTotal(f.Probes - findRate.Probes())
	return &FoundRate{Route: route, Replicas: replicas, Rate: f.Meets * p.Rate, Fails: f.Fails * p.Rate, Probes: f.Probes}, nil
}

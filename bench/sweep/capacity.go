package sweep

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/inferrail/inferrail/model/sched"
	"github.com/inferrail/inferrail/sim/progress"
	"github.com/inferrail/inferrail/sim/whatif"
)

// Capacity is a sweep's [capacity] table: it makes the sweep a capacity
// comparison (ExecuteCapacity). A rate is sustained while at least Share
// of its measured requests are within the SLO (TTFT and TPOT; a rejected
// request is not): harness.Summary.GoodShare.
type Capacity struct {
	// Share is the share of requests within the SLO; 0 takes 0.9.
	Share float64 `toml:"share"`
	// Scales multiply each point's knee for the latency comparison; none
	// takes 1, 1.25 and 1.5.
	Scales []float64 `toml:"scales"`
	// Grow, Bracket and Steps bound every search (whatif.RateSearch),
	// started at the point's main rate; 0 takes 1.5, 6 and 3: within
	// 6.25% of the answer.
	Grow    float64 `toml:"grow"`
	Bracket int     `toml:"bracket"`
	Steps   int     `toml:"steps"`
	// Blind are the cache-blind policies whose best capacity is the knee;
	// none takes every policy compared that routes on no cache signal
	// (Blind).
	Blind []string `toml:"blind"`
}

// Search is what a capacity run's specification records of its search,
// so that a report reads the search back from the result files alone.
type Search struct {
	Share   float64 `json:"share"`
	Grow    float64 `json:"grow"`
	Bracket int     `json:"bracket"`
	Steps   int     `json:"steps"`
	// Blind are the policies whose best capacity is the knee.
	Blind []string `json:"blind"`
}

// rate is the search as whatif runs it.
func (s *Search) rate() whatif.RateSearch {
	return whatif.RateSearch{Grow: s.Grow, Bracket: s.Bracket, Steps: s.Steps}
}

// meets reports whether a run sustains its rate.
func (s *Search) meets(r *Result) bool { return r.Summary.GoodShare >= s.Share }

// Blind reports whether a built-in policy is cache-blind: it routes on no
// estimate, token or KV-event signal (sched.Signal), only on counts and
// chance. The informed bound and profiles are not.
func Blind(policy string) bool {
	b, ok := sched.Lookup(policy)
	return ok && b.Signals()&(sched.SignalEstimates|sched.SignalTokens|sched.SignalKVEvents) == 0
}

func (c *Capacity) defaults(policies []string) {
	if c.Share == 0 {
		c.Share = 0.9
	}
	if len(c.Scales) == 0 {
		c.Scales = []float64{1, 1.25, 1.5}
	}
	if c.Grow == 0 {
		c.Grow = 1.5
	}
	if c.Bracket == 0 {
		c.Bracket = 6
	}
	if c.Steps == 0 {
		c.Steps = 3
	}
	if len(c.Blind) == 0 {
		for _, p := range policies {
			if Blind(p) {
				c.Blind = append(c.Blind, p)
			}
		}
	}
}

func (c *Capacity) validate(policies []string) error {
	var errs []error
	if !(c.Share > 0 && c.Share <= 1) {
		errs = append(errs, fmt.Errorf("share %v: want a share above 0, at most 1", c.Share))
	}
	if len(c.Scales) > maxRates {
		errs = append(errs, fmt.Errorf("%d scales: want at most %d", len(c.Scales), maxRates))
	}
	for i, x := range c.Scales {
		if !(x > 0) || math.IsInf(x, 0) || slices.Index(c.Scales, x) < i {
			errs = append(errs, fmt.Errorf("scale %v: want distinct finite numbers above 0", x))
		}
	}
	if err := c.search().rate().Validate(); err != nil {
		errs = append(errs, err)
	}
	if len(c.Blind) == 0 {
		errs = append(errs, errors.New("blind: no cache-blind policy among the policies to find the knee with"))
	}
	for _, b := range c.Blind {
		if !Blind(b) || !slices.Contains(policies, b) {
			errs = append(errs, fmt.Errorf("blind: %q: want a cache-blind policy among the policies", b))
		}
	}
	return errors.Join(errs...)
}

func (c *Capacity) search() *Search {
	return &Search{Share: c.Share, Grow: c.Grow, Bracket: c.Bracket, Steps: c.Steps, Blind: c.Blind}
}

// searchKey is one search: a point, a repetition and a contender.
type searchKey struct {
	point, rep int
	name       string
}

// ExecuteCapacity runs s's capacity comparison in mode with r, o.Jobs runs
// at once, writing every run's result file into o.Dir as Execute does,
// and resuming from those already there:
//
//  1. for every point, repetition and contender, a search (whatif's
//     RateSearch) from the point's main rate for the highest rate it
//     sustains, each probe one run;
//  2. each point's knee: the median over repetitions of the best
//     capacity among Capacity.Blind;
//  3. every contender at each of Capacity.Scales times the knee, on every
//     repetition, as soon as the point's knee is known.
//
// Every search goes at once, o.Jobs runs at a time; a failed run fails its
// search, and the errors are returned together once every other has
// ended. It returns how many runs it made and resumed.
func ExecuteCapacity(ctx context.Context, s *Sweep, mode string, r Runner, o Options) (ran, skipped int, err error) {
	c := s.Capacity
	if c == nil {
		return 0, 0, fmt.Errorf("sweep %s: no [capacity] table", s.Name)
	}
	if err := s.CheckMode(mode); err != nil {
		return 0, 0, err
	}
	search := c.search()
	by := s.contenders()
	searches := len(s.Points) * s.Repetitions * len(by)
	bar := progress.New(o.Progress, "runs", searches*search.rate().Probes()+len(s.Points)*len(c.Scales)*s.Repetitions*len(by), 0)
	defer bar.End()
	ex := &capacityRun{r: r, dir: o.Dir, bar: bar, sem: make(chan struct{}, max(o.Jobs, 1))}

	found := make(map[searchKey]whatif.Found, searches)
	var mu sync.Mutex
	var wg sync.WaitGroup
	// blind[i] counts point i's searches of the knee's policies: its runs
	// at the knee's multiples start once they end, while other searches
	// still run, so that no core idles between the steps.
	blind := make([]sync.WaitGroup, len(s.Points))
	for i := range s.Points {
		for rep := range s.Repetitions {
			for _, ct := range by {
				knee := slices.Contains(c.Blind, ct.name)
				if knee {
					blind[i].Add(1)
				}
				wg.Go(func() {
					if knee {
						defer blind[i].Done()
					}
					f, err := search.rate().Find(s.Points[i].Main, func(rate float64) (bool, error) {
						spec := s.run(mode, i, rate, rep, ct)
						spec.Search = search
						res, err := ex.result(ctx, spec)
						if err != nil {
							return false, err
						}
						return search.meets(res), nil
					})
					bar.AddTotal(f.Probes - search.rate().Probes())
					mu.Lock()
					defer mu.Unlock()
					found[searchKey{i, rep, ct.name}] = f
					if err != nil {
						ex.fail(err)
					}
				})
			}
		}
	}
	for i := range s.Points {
		wg.Go(func() {
			blind[i].Wait()
			mu.Lock()
			knee, _ := kneeOf(s.Repetitions, c.Blind, func(rep int, name string) (float64, bool) {
				f := found[searchKey{i, rep, name}]
				return f.Meets, f.Bracketed()
			})
			mu.Unlock()
			if !(knee > 0) {
				ex.fail(fmt.Errorf("point %s: no knee: on no seed did every search of %s close its bracket within %d steps of %v from %v req/s; start nearer or allow more steps",
					s.Points[i].Name, strings.Join(c.Blind, ", "), c.Bracket, c.Grow, s.Points[i].Main))
				return
			}
			for _, x := range c.Scales {
				for rep := range s.Repetitions {
					for _, ct := range by {
						spec := s.run(mode, i, knee*x, rep, ct)
						spec.Search, spec.Scale = search, x
						// Added while this goroutine is counted: wg.Wait
						// cannot have returned.
						wg.Go(func() {
							if _, err := ex.result(ctx, spec); err != nil {
								ex.fail(err)
							}
						})
					}
				}
			}
		})
	}
	wg.Wait()
	return ex.ran, ex.skipped, ex.err()
}

// kneeOf is the median over reps repetitions of the best capacity among
// blind, capacity(rep, policy) giving each and whether its search closed
// its bracket; a repetition counts only when every one of blind's did. It
// returns NaN when none counts, and how many did.
func kneeOf(reps int, blind []string, capacity func(rep int, policy string) (float64, bool)) (float64, int) {
	var best []float64
	for rep := range reps {
		b, all := 0.0, true
		for _, pol := range blind {
			x, ok := capacity(rep, pol)
			all = all && ok
			b = max(b, x)
		}
		if all {
			best = append(best, b)
		}
	}
	return medianOf(best), len(best)
}

// capacityRun makes the runs of ExecuteCapacity, resuming those whose
// file holds their specification's hash.
type capacityRun struct {
	r   Runner
	dir string
	bar *progress.Bar
	sem chan struct{}

	mu           sync.Mutex
	ran, skipped int
	errs         []error
}

// result returns spec's result, from its file or from a run, which
// writes the file. Two searches probing the same run each make it: the
// second finds the first's file only once it is written.
func (x *capacityRun) result(ctx context.Context, spec *RunSpec) (*Result, error) {
	path := filepath.Join(x.dir, spec.File())
	if old, err := ReadResult(path); err == nil && old.Hash == spec.Hash() {
		x.count(&x.skipped)
		x.bar.Resumed()
		return old, nil
	}
	select {
	case x.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-x.sem }()
	res, err := runOne(ctx, spec, x.r, x.dir)
	if err != nil {
		return nil, fmt.Errorf("%s %v req/s %s rep %d: %w", spec.Point, spec.Rate, spec.Policy, spec.Repetition, err)
	}
	x.count(&x.ran)
	x.bar.Finished()
	return res, nil
}

func (x *capacityRun) count(n *int) {
	x.mu.Lock()
	*n++
	x.mu.Unlock()
}

func (x *capacityRun) fail(err error) {
	x.mu.Lock()
	x.errs = append(x.errs, err)
	x.mu.Unlock()
}

func (x *capacityRun) err() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	return errors.Join(x.errs...)
}

package sweep

import (
	"context"
	"errors"
	"fmt"
	"github.com/inferrail/inferrail/model/policy"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/inferrail/inferrail/bench/harness"
	"github.com/inferrail/inferrail/sim/cluster"
	"github.com/inferrail/inferrail/sim/progress"
	"github.com/inferrail/inferrail/sim/resume"
)

// Result is one run's result file.
type Result struct {
	// Hash is Spec's hash: a resumed sweep skips the run when its file
	// holds the hash of its specification.
	Hash string  `json:"hash"`
	Spec RunSpec `json:"spec"`
	// Summary covers the measured requests; Classes each class's, for
	// workloads made of several (mix).
	Summary harness.Summary            `json:"summary"`
	Classes map[string]harness.Summary `json:"classes,omitempty"`
	// Requests counts every request the run sent, warm-up included.
	Requests int `json:"requests"`
	// WallSeconds is how long the run took; reports never show it.
	WallSeconds float64 `json:"wall_seconds"`
}

// Runner makes one run.
type Runner interface {
	Run(ctx context.Context, spec *RunSpec) (*harness.Run, error)
}

// Virtual runs in virtual time with sim/cluster.
type Virtual struct{}

// Run simulates spec.
func (Virtual) Run(_ context.Context, spec *RunSpec) (*harness.Run, error) {
	cfg := cluster.Config{
		Replicas: spec.Replicas, Engine: spec.Engine, Fanout: spec.Fanout,
		KVEvents: spec.KVEvents, SLO: policy.SLO{TTFT: spec.SLO.TTFT, TPOT: spec.SLO.TPOT},
		Workload: spec.wl, Rate: spec.Rate, Duration: spec.Duration, WarmUp: spec.WarmUp, Seed: spec.Seed,
	}
	sc, err := spec.Scheduler()
	if err != nil {
		return nil, err
	}
	if cfg.Scheduler = sc; sc == nil {
		cfg.Policy = spec.Policy
	}
	res, err := cluster.Run(cfg)
	if err != nil {
		return nil, err
	}
	return harness.Virtual(&res, spec.WarmUp, spec.Duration), nil
}

// Options control Execute.
type Options struct {
	// Dir is the results directory.
	Dir string
	// Jobs is how many runs go at once; below 1 takes 1.
	Jobs int
	// Progress, when set, gets a progress line with the ETA, redrawn in
	// place.
	Progress io.Writer
}

// Execute makes every run of runs that has no result in o.Dir matching its
// specification, o.Jobs at a time in the order given, and writes each
// result as it ends. It returns how many it ran and skipped; a failed run
// leaves no file (so a later Execute retries it), and its error is
// returned with the others once every run has been tried. ctx stops
// starting runs.
func Execute(ctx context.Context, runs []*RunSpec, r Runner, o Options) (ran, skipped int, err error) {
	var todo []*RunSpec
	for _, spec := range runs {
		if old, err := ReadResult(filepath.Join(o.Dir, spec.File())); err == nil && old.Hash == spec.Hash() {
			skipped++
			continue
		}
		todo = append(todo, spec)
	}
	jobs := max(o.Jobs, 1)
	pr := progress.New(o.Progress, "runs", len(runs), skipped)
	next := make(chan *RunSpec)
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for range jobs {
		wg.Go(func() {
			for spec := range next {
				_, err := runOne(ctx, spec, r, o.Dir)
				mu.Lock()
				if err != nil {
					errs = append(errs, fmt.Errorf("%s %v req/s %s rep %d: %w", spec.Point, spec.Rate, spec.Policy, spec.Repetition, err))
				} else {
					ran++
				}
				mu.Unlock()
				pr.Finished()
			}
		})
	}
	for _, spec := range todo {
		if ctx.Err() != nil {
			break
		}
		select {
		case next <- spec:
		case <-ctx.Done():
		}
	}
	close(next)
	wg.Wait()
	pr.End()
	if ctx.Err() != nil {
		errs = append(errs, ctx.Err())
	}
	return ran, skipped, errors.Join(errs...)
}

// runOne makes spec's run and writes its result file.
func runOne(ctx context.Context, spec *RunSpec, r Runner, dir string) (*Result, error) {
	start := time.Now()
	run, err := r.Run(ctx, spec)
	if err != nil {
		return nil, err
	}
	res := NewResult(spec, run)
	res.WallSeconds = time.Since(start).Round(time.Millisecond).Seconds()
	return res, WriteResult(filepath.Join(dir, spec.File()), res)
}

// NewResult condenses a run of spec.
func NewResult(spec *RunSpec, run *harness.Run) *Result {
	res := &Result{Hash: spec.Hash(), Spec: *spec, Requests: len(run.Records)}
	res.Summary = run.Summarize(spec.SLO)
	if cls := run.Classes(); len(cls) > 1 {
		res.Classes = make(map[string]harness.Summary, len(cls))
		for _, c := range cls {
			res.Classes[c] = run.SummarizeClass(spec.SLO, c)
		}
	}
	return res
}

// WriteResult writes res to path through a temporary file, so that a
// stopped sweep never leaves half a result.
func WriteResult(path string, res *Result) error { return resume.Write(path, res) }

// ReadResult reads one result file.
func ReadResult(path string) (*Result, error) { return resume.Read[Result](path) }

// ReadResults reads every result file under dir, in path order.
func ReadResults(dir string) ([]*Result, error) {
	var out []*Result
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(path) != ".json" {
			return err
		}
		res, err := ReadResult(path)
		if err != nil {
			return err
		}
		out = append(out, res)
		return nil
	})
	return out, err
}

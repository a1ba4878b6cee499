package fleet

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/VictoriaMetrics/metrics"

	"github.com/inferrail/inferrail/actors/routing"
	"github.com/inferrail/inferrail/model/cost"
	"github.com/inferrail/inferrail/model/policy"
	"github.com/inferrail/inferrail/model/shadow"
)

// The shadow policies (routing.shadow, /admin/shadow, the shadow log) are
// called trials in this package's code, so that they are not confused with
// the replicas' published shadow state (replica.Shadow): a trial is a
// policy run beside the routing policy on every decision, without routing,
// and a trial worker runs one model's trials.

// TrialLog is where the trial workers write the shadow log's lines
// (shadow.Line). Put waits for room until ctx ends; transport/jsonl
// satisfies it.
type TrialLog interface {
	Put(ctx context.Context, v any) error
}

// DefaultTrialQueue is how many decisions wait for a model's trial worker
// before new ones are dropped, when Options.TrialQueue is 0.
const DefaultTrialQueue = 1024

var _ routing.Trials = (*trialWorker)(nil)

// trialWorker runs one model's shadow policies on one goroutine, off the
// request path: the model's routing actors hand it every decision through
// a bounded queue, and a decision that finds the queue full is dropped and
// counted rather than waited for. Each shadow policy has its own state and
// random source, touched only by the worker's goroutine.
type trialWorker struct {
	model string
	cm    cost.Model
	log   *slog.Logger
	// gen is the config generation that built the worker, and specs how
	// it built each shadow: the shadow log's config line.
	gen   uint64
	specs []shadow.Shadow
	// shadowLog, when not nil, gets a line per decision replayed, numbered
	// by seq. The worker goroutine's.
	shadowLog TrialLog
	seq       uint64
	queue     chan *shadow.Decision
	trials    []*trialPolicy
	// stop ends run; set by Fleet.startTrials before run starts.
	stop context.CancelFunc

	dropped    atomic.Uint64
	droppedCnt *metrics.Counter
}

// trialPolicy is one shadow policy of a model with its tally.
type trialPolicy struct {
	name string
	p    policy.Policy // the worker goroutine's
	rng  *rand.Rand    // likewise
	// failed reports that Pick has failed or panicked before, so that the
	// log says so once. The worker goroutine's.
	failed bool

	mu    sync.Mutex
	tally shadow.Tally // under mu

	agreed, disagreed, faster, slower *metrics.Counter
	routedSecs, shadowSecs            *metrics.FloatCounter
}

// newTrialWorker returns the worker for model's shadow policies ps, each
// with the random source of the same index in rngs, with room for queue
// decisions, counting into set. Generation gen built them as specs say;
// each decision replayed is written to out when it is not nil.
func newTrialWorker(model string, gen uint64, ps []policy.Policy, rngs []*rand.Rand, specs []shadow.Shadow, cm cost.Model,
	queue int, out TrialLog, set *metrics.Set, log *slog.Logger) *trialWorker {
	if queue <= 0 {
		queue = DefaultTrialQueue
	}
	w := &trialWorker{model: model, cm: cm, log: log.With("model", model), gen: gen, specs: specs, shadowLog: out,
		queue:      make(chan *shadow.Decision, queue),
		droppedCnt: set.GetOrCreateCounter(`inferrail_shadow_dropped_total{model=` + strconv.Quote(model) + `}`)}
	for i, p := range ps {
		l := `{model=` + strconv.Quote(model) + `,policy=` + strconv.Quote(p.Name())
		w.trials = append(w.trials, &trialPolicy{name: p.Name(), p: p, rng: rngs[i],
			agreed:     set.GetOrCreateCounter(`inferrail_shadow_decisions_total` + l + `,agreed="true"}`),
			disagreed:  set.GetOrCreateCounter(`inferrail_shadow_decisions_total` + l + `,agreed="false"}`),
			faster:     set.GetOrCreateCounter(`inferrail_shadow_faster_total` + l + `}`),
			slower:     set.GetOrCreateCounter(`inferrail_shadow_slower_total` + l + `}`),
			routedSecs: set.GetOrCreateFloatCounter(`inferrail_shadow_estimated_ttft_seconds_total` + l + `,pick="active"}`),
			shadowSecs: set.GetOrCreateFloatCounter(`inferrail_shadow_estimated_ttft_seconds_total` + l + `,pick="shadow"}`),
		})
	}
	return w
}

// Offer queues d for the shadows, or drops and counts it when the queue is
// full. It never blocks; the routing actors call it.
func (w *trialWorker) Offer(d *shadow.Decision) {
	select {
	case w.queue <- d:
	default:
		w.dropped.Add(1)
		w.droppedCnt.Inc()
	}
}

// run replays queued decisions until ctx ends. Decisions still queued then
// are dropped uncounted: the fleet is stopping.
func (w *trialWorker) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case d := <-w.queue:
			var picks []shadow.Pick
			if w.shadowLog != nil {
				picks = make([]shadow.Pick, 0, len(w.trials))
			}
			for _, s := range w.trials {
				o, err := w.replay(s, d)
				if picks != nil {
					picks = append(picks, shadow.PickOf(s.name, o, err))
				}
			}
			if picks != nil {
				w.write(ctx, d, picks)
			}
		}
	}
}

// write puts d's line in the shadow log. It waits for room there: a line
// missing would break the replay of every later decision of a policy with
// state, while the decisions the worker is too slow for are dropped
// before any shadow sees them. A log that fails (closed) is given up.
func (w *trialWorker) write(ctx context.Context, d *shadow.Decision, picks []shadow.Pick) {
	w.seq++
	err := w.shadowLog.Put(ctx, &shadow.Line{Kind: shadow.KindDecision, Gen: w.gen, Model: w.model, Seq: w.seq,
		Decision: d, Picks: picks})
	if err != nil && ctx.Err() == nil {
		w.log.Error("fleet: shadow log failed; the model's shadow decisions are no longer logged", "err", err)
		w.shadowLog = nil
	}
}

// replay runs one shadow over d and counts the outcome. A shadow policy
// that fails or panics is logged once and skips the decision; the others
// and the routing are unaffected.
func (w *trialWorker) replay(s *trialPolicy, d *shadow.Decision) (shadow.Outcome, error) {
	o, err := shadow.SafeCompare(s.p, s.rng, w.cm, d)
	if err != nil {
		if !s.failed {
			s.failed = true
			w.log.Error("fleet: shadow policy failed; it skips such decisions", "policy", s.name, "err", err)
		}
		return o, err
	}
	s.mu.Lock()
	s.tally.Add(o)
	s.mu.Unlock()
	if o.Agreed {
		s.agreed.Inc()
	} else {
		s.disagreed.Inc()
	}
	switch {
	case o.Shadow < o.Routed:
		s.faster.Inc()
	case o.Shadow > o.Routed:
		s.slower.Inc()
	}
	s.routedSecs.Add(o.Routed.Seconds())
	s.shadowSecs.Add(o.Shadow.Seconds())
	return o, nil
}

// report summarizes the worker's shadows.
func (w *trialWorker) report() shadow.Report {
	r := shadow.Report{Model: w.model, Dropped: w.dropped.Load(), Shadows: make([]shadow.Summary, 0, len(w.trials))}
	for _, s := range w.trials {
		s.mu.Lock()
		t := s.tally
		s.mu.Unlock()
		r.Shadows = append(r.Shadows, t.Summary(s.name))
	}
	return r
}

// Shadows reports each model's shadow policies, in config order; models
// without shadows are left out. Replays are asynchronous: a decision Pick
// returned is counted here shortly after.
func (f *Fleet) Trials() []shadow.Report {
	var out []shadow.Report
	for _, m := range f.table.Load().models {
		if m.trials != nil {
			out = append(out, m.trials.report())
		}
	}
	return out
}

package sched

import (
	"cmp"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/inferrail/inferrail/model/policy"
)

// ErrFilteredOut is returned when a profile's filters leave no candidate.
// It is a policy.ErrNoCandidate, so a routing actor treats it as it treats
// a policy that has nothing to pick from.
var ErrFilteredOut = fmt.Errorf("%w: the filters set every candidate aside", policy.ErrNoCandidate)

// FilteredError names the profile and the filter that left no candidate.
// It is an ErrFilteredOut.
type FilteredError struct {
	Profile, Filter string
}

func (e *FilteredError) Error() string {
	return fmt.Sprintf("sched: profile %s: filter %s set every candidate aside", e.Profile, e.Filter)
}

// Unwrap returns ErrFilteredOut.
func (e *FilteredError) Unwrap() error { return ErrFilteredOut }

// Profile is one scheduling profile: filters in order, weighted scorers,
// a picker. It is built by a Config and owned by its Scheduler.
type Profile struct {
	name    string
	filters []namedFilter
	scorers []weightedScorer
	picker  namedPicker
	// observers are the profile's plugins with state, told of each pick.
	observers []Observer
}

type namedFilter struct {
	name string
	f    Filter
}

type namedPicker struct {
	name string
	p    Picker
}

type weightedScorer struct {
	name string
	s    Scorer
	// weight is the configured weight; norm is weight over the profile's
	// sum of weights, rounded to a multiple of 2^-32, so that a pick
	// depends only on the weights' ratios.
	weight, norm float64
}

// Name returns the profile's name.
func (p *Profile) Name() string { return p.name }

// Scheduler runs a Config's profiles under its profile handler. It
// satisfies policy.Policy, so a routing actor calls it where it calls a
// policy. A Scheduler is owned by one routing actor and is not safe for
// concurrent use.
type Scheduler struct {
	name     string
	signals  Signal
	handler  ProfileHandler
	profiles []*Profile
	cycle    Cycle
	done     []Result
	w        work
	last     policy.Decision
	// rank is the latest Pick's primary profile: the candidates its
	// filters kept and their totals, for Ranked.
	rank ranking
	// producers run first in every decision, then the admitters.
	producers []Producer
	admitters []namedAdmitter
}

// namedAdmitter is an admitter with the error its refusal returns, made
// once so that a refusal allocates nothing.
type namedAdmitter struct {
	a   Admitter
	err *AdmitError
}

// AdmitError names the admitter that refused a request (llm-d's
// latency-slo-admitter: no replica can serve it within its SLO). It is a
// policy.ErrNotAdmitted.
type AdmitError struct {
	Admitter string
}

func (e *AdmitError) Error() string {
	return "sched: admitter " + e.Admitter + " refused the request: " + policy.ErrNotAdmitted.Error()
}

// Unwrap returns policy.ErrNotAdmitted.
func (e *AdmitError) Unwrap() error { return policy.ErrNotAdmitted }

// ranking is what Ranked orders: positions in the latest Pick's candidates
// and their weighted totals, reused from one decision to the next.
type ranking struct {
	in     []int
	totals []float64
	winner int
}

var _ policy.Policy = (*Scheduler)(nil)

// work is a Scheduler's memory for the candidate sets and scores of a
// decision, reused from one to the next.
type work struct {
	sets           [2][]int
	scores, totals []float64
	// kept is the last profile run's candidate set after its filters.
	kept []int
}

// Name returns the name the Scheduler was built under: the policy's name
// for a built-in profile.
func (s *Scheduler) Name() string { return s.name }

// Signals returns what the Scheduler's plugins route on.
func (s *Scheduler) Signals() Signal { return s.signals }

// Profiles returns the Scheduler's profiles. The caller must not modify
// the slice.
func (s *Scheduler) Profiles() []*Profile { return s.profiles }

// Last returns the summary of the latest Pick's routing result, for the
// routing metrics: cost_model's guards and steering where its plugins ran.
func (s *Scheduler) Last() policy.Decision { return s.last }

// Pick runs the producers and admitters, then the profiles the handler
// chooses, over cands and returns the position in cands of the replica the
// primary result routes to. It returns policy.ErrNoCandidate when cands is
// empty, an AdmitError (a policy.ErrNotAdmitted) when an admitter refuses
// the request, and a FilteredError when the primary profile's filters
// leave nothing. cands is never modified.
func (s *Scheduler) Pick(req *policy.Request, cands []policy.Candidate, rng *rand.Rand) (int, error) {
	if len(cands) == 0 {
		s.last = policy.Decision{Winner: -1}
		s.rank.winner = -1
		return -1, policy.ErrNoCandidate
	}
	r := s.run(req, cands, rng, nil)
	s.last = r.Decision
	return r.Winner, r.Err
}

// Ranked appends to dst the positions in the latest Pick's candidates of
// every candidate its primary profile's filters kept, best first: the pick,
// then the others by their weighted total score, highest first, ties to
// the fewer requests in flight, then to the earlier candidate. It is the
// ordered fallback list an endpoint picker hands Envoy (GIE's
// x-gateway-destination-endpoint), so that a retry goes where the scorers
// would have sent the request next. A picker that decides on something
// other than the scores (cost_model's estimate, a hash ring) still leads
// with its pick; with no scorers every total is 0 and the load breaks the
// ties. After a Pick that failed it appends nothing. It changes no state.
func (s *Scheduler) Ranked(dst []int) []int {
	rk := &s.rank
	if rk.winner < 0 {
		return dst
	}
	dst = append(dst, rk.winner)
	start := len(dst)
	for k, i := range rk.in {
		if i != rk.winner {
			dst = append(dst, k) // positions in rk.in for now
		}
	}
	rest, cands := dst[start:], s.cycle.Cands
	slices.SortStableFunc(rest, func(a, b int) int {
		if c := cmp.Compare(rk.totals[b], rk.totals[a]); c != 0 {
			return c
		}
		return cmp.Compare(cands[rk.in[a]].InFlight, cands[rk.in[b]].InFlight)
	})
	for j, k := range rest {
		rest[j] = rk.in[k]
	}
	return dst
}

// Explain returns what Pick would decide, per profile and per candidate,
// changing no state: no plugin's Picked runs. It draws from rng as Pick
// does, so given a copy of the source Pick will draw from it names the
// replica Pick picks.
func (s *Scheduler) Explain(req *policy.Request, cands []policy.Candidate, rng *rand.Rand) (*Explanation, error) {
	ex := &Explanation{Scheduler: s.name, Primary: -1}
	if len(cands) == 0 {
		return ex, policy.ErrNoCandidate
	}
	r := s.run(req, cands, rng, ex)
	return ex, r.Err
}

// decided is one profile's result with its decision summary.
type decided struct {
	Result
	Decision policy.Decision
}

// run is one cycle: the handler's profiles until it has no more, then the
// primary result. With ex it explains and tells no observer.
func (s *Scheduler) run(req *policy.Request, cands []policy.Candidate, rng *rand.Rand, ex *Explanation) decided {
	c := &s.cycle
	*c = Cycle{Req: req, Cands: cands, Rng: rng}
	s.done = s.done[:0]
	var primary decided
	for _, p := range s.producers {
		p.Produce(c)
	}
	for _, a := range s.admitters {
		if !a.a.Admit(c) {
			s.rank.winner = -1
			if ex != nil {
				ex.Err = a.err
			}
			return decided{Result: Result{Winner: -1, Err: a.err}, Decision: policy.Decision{Winner: -1}}
		}
	}
	for {
		next := s.handler.Next(c, s.profiles, s.done)
		if len(next) == 0 {
			break
		}
		for _, p := range next {
			c.Decision = policy.Decision{Winner: -1}
			var pe *ProfileExplained
			if ex != nil {
				ex.Profiles = append(ex.Profiles, ProfileExplained{})
				pe = &ex.Profiles[len(ex.Profiles)-1]
			}
			w, err := p.run(c, &s.w, pe)
			if err == nil {
				c.Decision.Winner = w
				if ex == nil {
					for _, o := range p.observers {
						o.Picked(c, w)
					}
				}
			}
			s.done = append(s.done, Result{Profile: p.name, Winner: w, Err: err})
			if len(s.done) == 1 {
				primary.Decision = c.Decision
				if ex == nil {
					s.keepRanking(w, err)
				}
			}
		}
	}
	if len(s.done) == 0 {
		panic("BUG: sched: the profile handler ran no profile")
	}
	k := s.handler.Primary(s.done)
	if ex != nil {
		ex.Primary = k
	}
	primary.Result = s.done[k]
	if k != 0 {
		// Only single-profile-handler exists yet: its primary is the first
		// and only result. A handler of several profiles keeps each
		// profile's decision summary when it comes.
		primary.Decision = policy.Decision{Winner: primary.Winner}
	}
	return primary
}

// keepRanking keeps the primary profile's kept candidates and totals of the
// Pick that won w (or failed with err), for Ranked.
func (s *Scheduler) keepRanking(w int, err error) {
	rk := &s.rank
	rk.winner = w
	if err != nil {
		rk.winner = -1
		return
	}
	rk.in = append(rk.in[:0], s.w.kept...)
	rk.totals = append(rk.totals[:0], s.w.totals[:len(s.w.kept)]...)
}

// run is one profile over c: filters, scorers, picker. It returns the
// position in c.Cands of the winner.
func (p *Profile) run(c *Cycle, w *work, ex *ProfileExplained) (int, error) {
	in := w.sets[0][:0]
	for i := range c.Cands {
		in = append(in, i)
	}
	w.sets[0] = in
	if ex != nil {
		ex.start(p, c.Cands)
	}
	cur := 0
	for _, f := range p.filters {
		out := f.f.Filter(c, in, w.sets[1-cur][:0])
		w.sets[1-cur] = out
		cur = 1 - cur
		if ex != nil {
			ex.setAside(in, out, f)
		}
		in = out
		if len(in) == 0 {
			err := &FilteredError{Profile: p.name, Filter: f.name}
			if ex != nil {
				ex.Err = err
			}
			return -1, err
		}
	}
	w.kept = in
	totals := grow(&w.totals, len(in))
	clear(totals)
	if len(p.scorers) > 0 {
		scores := grow(&w.scores, len(in))
		for _, s := range p.scorers {
			clear(scores)
			s.s.Score(c, in, scores)
			for k, raw := range scores {
				v := s.norm * clamp01(raw)
				totals[k] += v
				if ex != nil {
					r := &ex.Replicas[in[k]]
					r.Scores = append(r.Scores, ScoreExplained{Scorer: s.name, Raw: raw, Weight: s.weight, Weighted: v})
				}
			}
		}
	}
	var (
		win int
		pex *policy.Explanation
	)
	if ep, ok := p.picker.p.(explainingPicker); ok && ex != nil {
		var e policy.Explanation
		win, e = ep.explainPick(c, in, totals)
		pex = &e
	} else {
		win = p.picker.p.Pick(c, in, totals)
	}
	if win < 0 || win >= len(c.Cands) {
		panic(fmt.Sprintf("BUG: sched: picker %s picked %d of %d candidates", p.picker.name, win, len(c.Cands)))
	}
	if ex != nil {
		ex.picked(c, in, totals, win, pex)
	}
	return win, nil
}

// grow returns (*b)[:n], reallocating *b when it is too small.
func grow(b *[]float64, n int) []float64 {
	if cap(*b) < n {
		*b = make([]float64, n)
	}
	return (*b)[:n]
}

// IsFilteredOut reports whether err says a profile's filters left nothing.
func IsFilteredOut(err error) bool { return errors.Is(err, ErrFilteredOut) }

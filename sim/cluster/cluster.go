package cluster

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/inferrail/inferrail/model/cost"
	"github.com/inferrail/inferrail/model/policy"
	"github.com/inferrail/inferrail/model/sched"
	"github.com/inferrail/inferrail/sim/engine"
	"github.com/inferrail/inferrail/sim/workload"
)

// Defaults the gateway uses for the load signals the policies see.
const (
	// DefaultScrapeInterval is load.scrape_interval: how often the engines'
	// running count and KV usage are sampled.
	DefaultScrapeInterval = 100 * time.Millisecond
	// DefaultMaxAge is load.max_age: an older sample is not Fresh.
	DefaultMaxAge = 250 * time.Millisecond
	// DefaultModel is the simulator's served model, the salt of every
	// prompt's block chain.
	DefaultModel = "inferrail/sim-8b"
)

// Config describes one run: a fleet, a policy or scheduling profile, a
// workload and how long to drive it. A Config is a value; Run does not keep
// it.
type Config struct {
	// Replicas is how many engines the fleet runs.
	Replicas int
	// Engine configures every engine (sim.DefaultOptions().Engine is the
	// simulator's default: an 8B model on one 24 GB GPU).
	Engine engine.Config
	// Model names the served model; "" takes DefaultModel.
	Model string

	// Policy is the routing policy's config name (sched.Policies), routed
	// by its built-in profile (sched.New), as the gateway routes it, or
	// Informed, the simulator's informed upper bound.
	Policy string
	// Scheduler, when not nil, routes the run instead of a policy: an
	// EndpointPickerConfig profile (sched.Parse), whose Name labels the
	// run. Set Policy or Scheduler, not both.
	Scheduler *sched.Config
	// CostModel configures cost_model; nil takes
	// policy.DefaultCostModelParams. Its Model also prices the prefill
	// every routed request adds to its replica's queue, whatever the
	// policy or profile, as the gateway does with routing.cost_model.
	CostModel *policy.CostModelParams
	// PrefixHash and KVAware configure those policies; nil takes their
	// defaults.
	PrefixHash *policy.PrefixHashParams
	KVAware    *policy.KVAwareParams
	// SLO is every request's latency objective (policy.Request.SLO), as
	// llm-d's x-llm-d-slo-ttft-ms and x-llm-d-slo-tpot-ms headers would
	// give it, for the plugins that route on one (the latency plugins);
	// zero fields set none.
	SLO policy.SLO
	// MaxConcurrency is the gateway's per-replica breaker
	// (max_concurrency): a replica with that many requests in flight is not
	// offered, and a request finding every replica full is rejected, as
	// the gateway answers 503. 0 means no cap, the gateway's default.
	MaxConcurrency int

	// ScrapeInterval is how often the engines' load is sampled; 0 takes
	// DefaultScrapeInterval. MaxAge is how old a sample may be and still be
	// Fresh; 0 takes DefaultMaxAge.
	ScrapeInterval, MaxAge time.Duration

	// Fanout is routing.estimate_fanout: with more candidates than that, a
	// cache-aware policy gets a cache prediction only for a shortlist
	// (route.Shortlist: the replicas that recently got the prompt's root
	// prefix, then the least loaded), as the routing actor asks only those
	// for an estimate; the rest are priced from their queues alone. 0 asks
	// every replica. The gateway's default is 16.
	Fanout int

	// KVEvents feeds each engine's KV events into its replica's shadow
	// index at the end of every step (estimate.Events), as the gateway does
	// with index.kv_events, on top of the routing decisions it records.
	KVEvents bool

	// Instances is how many gateway instances route the traffic, in front
	// of the same engines; 0 takes 1. Each has its own routing core, its
	// own shadow index of every engine and its own counts of what it
	// routed, and a load balancer gives each request to one of them
	// (Balance). With KVEvents every instance follows every engine's
	// events; without, an instance learns only from its own decisions.
	// The engines' load, scraped, is the same for all.
	Instances int
	// Balance is how the load balancer spreads the requests over the
	// instances.
	Balance Balance

	// Faults are what goes wrong during the run (issue 17's fault runs).
	Faults Faults

	// AutoCalibrate fits each replica's prefill parameters online, as the
	// gateway does with routing.cost_model: auto: every instance's shadow
	// of every engine keeps a cost.Online that starts from CostModel's
	// Model and learns from the prefills it measures
	// (estimate.Replica.Calibrate, the gateway's code), and prices the
	// replica with its fit. A sample counts when its cache prediction
	// held: with KVEvents always, as the gateway trusts an index that
	// follows its engine's events; without, when the engine's cached
	// tokens agree with it (estimate.Agrees).
	AutoCalibrate bool
	// EngineOverrides gives replicas, by position, their own latency model
	// (their true prefill parameters); the others run Engine's.
	EngineOverrides map[int]engine.Latency
	// ReplicaCostModels prices replicas, by position, with fixed cost
	// models of their own, as a hand calibration of each replica would if
	// the gateway had such a key (it has one per model): the benchmark's
	// reference for AutoCalibrate on a mixed pool. Not with AutoCalibrate.
	ReplicaCostModels map[int]cost.Model

	// KeepBillingHeader routes Anthropic Messages requests on their prompt
	// rendered with Claude Code's billing header kept, as a router that
	// hashes the text as it came does (prompt.Preparer.KeepBillingHeader),
	// while the engines drop it as vLLM does: the benchmark of what
	// dropping it is worth. The shadow indexes record those hashes; the
	// predictions, the oracle and the records are the engines' prompt's.
	KeepBillingHeader bool

	// Workload makes the requests, arriving at Rate per second on average.
	// Its text is tokenized as the simulator does.
	Workload workload.Workload
	Rate     float64
	// Arrivals stop at Duration of virtual time or after Requests requests,
	// whichever comes first; at least one must be set (0 is unbounded). The
	// run then goes on until every request has finished.
	Duration time.Duration
	Requests int
	// WarmUp excludes requests arriving before it from the Summary (they
	// still run, fill caches and count as earlier requests for the oracle).
	WarmUp time.Duration
	// Seed fixes the workload's draws and the policy's randomness: the same
	// Config gives the same Result.
	Seed uint64
}

// Balance is how a load balancer in front of several gateway instances
// spreads the requests.
type Balance int

const (
	// BalanceRoundRobin gives the instances the requests in turn.
	BalanceRoundRobin Balance = iota
	// BalanceRandom gives each request to an instance drawn at random.
	BalanceRandom
)

// balanceNames are the balances' names, as String writes and ParseBalance
// reads them.
var balanceNames = [...]string{BalanceRoundRobin: "round-robin", BalanceRandom: "random"}

// String is the balance's name, as ParseBalance reads it.
func (b Balance) String() string {
	if b >= 0 && int(b) < len(balanceNames) {
		return balanceNames[b]
	}
	return "Balance(" + strconv.Itoa(int(b)) + ")"
}

// ParseBalance reads a balance's name ("round-robin", "random"); "" is
// round-robin.
func ParseBalance(s string) (Balance, error) {
	if s == "" {
		return BalanceRoundRobin, nil
	}
	for b, n := range balanceNames {
		if n == s {
			return Balance(b), nil
		}
	}
	return 0, fmt.Errorf("balance %q: want round-robin or random", s)
}

// Faults are the faults a run injects. The zero value injects none.
type Faults struct {
	// KillAt, when positive, kills instance KillInstance at that virtual
	// time: the load balancer sends it nothing more, and the requests it
	// had in flight count as lost (Record.Lost), as a killed gateway cuts
	// their connections; the engines finish them unobserved.
	KillAt       time.Duration
	KillInstance int
	// WithholdFrom and WithholdFor, when WithholdFor is positive, hold back
	// every engine's KV events from WithholdFrom for WithholdFor, then
	// deliver them all in order, as a subscription that stalls and resumes
	// (the engines' replay covers the gap). Meanwhile the instances predict
	// from their decisions alone, the approximate index.
	WithholdFrom, WithholdFor time.Duration
	// SpeedChange changes engines' prefill speed during the run.
	SpeedChange []SpeedChange
}

// SpeedChange multiplies the prefill parameters (a, b and d) of engine
// Replica's latency model by Factor at virtual time At: 2 makes its
// prefills twice as slow. Steps already started keep their time.
type SpeedChange struct {
	At      time.Duration
	Replica int
	Factor  float64
}

func (f *Faults) validate(instances, replicas int) error {
	var errs []error
	for _, s := range f.SpeedChange {
		if s.At <= 0 || s.Replica < 0 || s.Replica >= replicas || !(s.Factor > 0) || math.IsInf(s.Factor, 0) {
			errs = append(errs, fmt.Errorf("faults: speed change %+v: want a positive time, one of %d replicas and a finite factor above 0",
				s, replicas))
		}
	}
	if f.KillAt < 0 || f.KillAt > 0 && (f.KillInstance < 0 || f.KillInstance >= instances || instances < 2) {
		errs = append(errs, fmt.Errorf("faults: kill instance %d at %v: want a positive time and one of %d instances, at least 2",
			f.KillInstance, f.KillAt, instances))
	}
	if f.WithholdFrom < 0 || f.WithholdFor < 0 {
		errs = append(errs, fmt.Errorf("faults: withhold events from %v for %v: want both at least 0", f.WithholdFrom, f.WithholdFor))
	}
	return errors.Join(errs...)
}

// withheld reports whether events published at at are held back.
func (f *Faults) withheld(at time.Duration) bool {
	return f.WithholdFor > 0 && at >= f.WithholdFrom && at < f.WithholdFrom+f.WithholdFor
}

// instances is how many gateway instances route the run.
func (c *Config) instances() int { return max(c.Instances, 1) }

func (c *Config) validate() error {
	var errs []error
	if c.Replicas < 1 {
		errs = append(errs, fmt.Errorf("replicas %d: want at least 1", c.Replicas))
	}
	if c.Workload == nil {
		errs = append(errs, errors.New("workload: not set"))
	} else if err := c.Workload.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("workload: %w", err))
	}
	if !(c.Rate > 0) || math.IsInf(c.Rate, 0) {
		errs = append(errs, fmt.Errorf("rate %v: want a finite number above 0", c.Rate))
	}
	if c.Duration < 0 || c.Requests < 0 || c.Duration == 0 && c.Requests == 0 {
		errs = append(errs, fmt.Errorf("duration %v, requests %d: want at least one positive, neither negative", c.Duration, c.Requests))
	}
	if c.WarmUp < 0 {
		errs = append(errs, fmt.Errorf("warm-up %v: want at least 0", c.WarmUp))
	}
	if c.SLO.TTFT < 0 || c.SLO.TPOT < 0 {
		errs = append(errs, fmt.Errorf("slo %+v: want each at least 0", c.SLO))
	}
	if c.Fanout < 0 {
		errs = append(errs, fmt.Errorf("fanout %d: want at least 0", c.Fanout))
	}
	if c.Instances < 0 {
		errs = append(errs, fmt.Errorf("instances %d: want at least 0", c.Instances))
	}
	if c.Balance != BalanceRoundRobin && c.Balance != BalanceRandom {
		errs = append(errs, fmt.Errorf("balance %v: want round-robin or random", c.Balance))
	}
	for i, l := range c.EngineOverrides {
		e := c.Engine
		e.Latency = l
		if _, err := engine.New(e); i < 0 || i >= c.Replicas || err != nil {
			errs = append(errs, fmt.Errorf("engine override %d: want one of %d replicas and a valid latency model (%v)", i, c.Replicas, err))
		}
	}
	for i := range c.ReplicaCostModels {
		if i < 0 || i >= c.Replicas || c.AutoCalibrate {
			errs = append(errs, fmt.Errorf("replica cost model %d: want one of %d replicas, without auto-calibration", i, c.Replicas))
		}
	}
	if err := c.Faults.validate(c.instances(), c.Replicas); err != nil {
		errs = append(errs, err)
	}
	if c.MaxConcurrency < 0 {
		errs = append(errs, fmt.Errorf("max concurrency %d: want at least 0", c.MaxConcurrency))
	}
	if c.ScrapeInterval < 0 || c.MaxAge < 0 {
		errs = append(errs, fmt.Errorf("scrape interval %v, max age %v: want at least 0", c.ScrapeInterval, c.MaxAge))
	}
	if _, err := engine.New(c.Engine); err != nil {
		errs = append(errs, err)
	}
	if c.Policy != "" && c.Scheduler != nil {
		errs = append(errs, fmt.Errorf("policy %q and scheduler %q: set one", c.Policy, c.Scheduler.Name()))
	} else if _, err := c.scheduler(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// costParams returns the cost_model params in effect.
func (c *Config) costParams() policy.CostModelParams {
	if c.CostModel != nil {
		return *c.CostModel
	}
	return policy.DefaultCostModelParams()
}

// Name is what the run is labelled with: the policy's name, or the
// scheduling profile's.
func (c *Config) Name() string {
	if c.Scheduler != nil {
		return c.Scheduler.Name()
	}
	return c.Policy
}

// scheduler returns a fresh scheduler for the run: the profile's, or the
// policy's built-in profile with the run's params for it.
func (c *Config) scheduler() (*sched.Scheduler, error) {
	if c.Scheduler != nil {
		return c.Scheduler.Build()
	}
	cm := c.costParams()
	name := c.Policy
	if name == Informed {
		name = informedBase // priced from the engines' truth (inform)
	}
	return sched.New(policy.Spec{Name: name, PrefixHash: c.PrefixHash, KVAware: c.KVAware, CostModel: &cm})
}

// Run simulates cfg and returns what every request did. It is a pure
// function of cfg: no goroutines, no wall clock, no shared state, so runs
// may go in parallel and the same cfg always gives the same Result.
func Run(cfg Config) (Result, error) {
	if err := cfg.validate(); err != nil {
		return Result{}, fmt.Errorf("cluster: invalid config: %w", err)
	}
	r, err := newRun(&cfg)
	if err != nil {
		return Result{}, fmt.Errorf("cluster: %w", err)
	}
	if err := r.loop(); err != nil {
		return Result{}, fmt.Errorf("cluster: %s on %s: %w", cfg.Name(), cfg.Workload.Name(), err)
	}
	return r.result(), nil
}

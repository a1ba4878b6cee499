package whatif

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/inferrail/inferrail/model/policy"
	"github.com/inferrail/inferrail/model/sched"
	"github.com/inferrail/inferrail/sim/cluster"
	"github.com/inferrail/inferrail/sim/workload"
)

// Baselines are the policies GPU savings are counted against.
var baselines = [...]string{"round_robin", "least_request"}

// Route is one way of routing a sweep compares: a built-in policy or an
// EndpointPickerConfig profile. A Route is immutable once made.
type Route struct {
	// Name labels it: the policy's name or the profile's.
	Name string
	// Policy is the built-in policy's name, "" for a profile.
	Policy string
	// Profile is the profile, nil for a policy; Document is its YAML text,
	// which its results' hash covers.
	Profile  *sched.Config
	Document string
}

// DefaultRoutes returns the routes a sweep compares unless told otherwise:
// the built-in policies and llm-d's profiles (sched.LLMDProfiles).
func DefaultRoutes() []string {
	out := sched.Policies()
	for _, p := range sched.LLMDProfiles() {
		out = append(out, p.Name)
	}
	return out
}

// ParseRoutes makes the routes named: a built-in policy's name, one of
// llm-d's profiles (sched.LLMDProfiles), or NAME=FILE for an
// EndpointPickerConfig document in FILE, which read returns.
func ParseRoutes(names []string, read func(path string) ([]byte, error)) ([]Route, error) {
	var out []Route
	var errs []error
	seen := map[string]bool{}
	for _, n := range names {
		r, err := parseRoute(strings.TrimSpace(n), read)
		switch {
		case err != nil:
			errs = append(errs, err)
			continue
		case seen[r.Name]:
			errs = append(errs, fmt.Errorf("policy %q: named twice", r.Name))
			continue
		}
		seen[r.Name] = true
		out = append(out, r)
	}
	if len(out) == 0 && len(errs) == 0 {
		errs = append(errs, errors.New("no policy named"))
	}
	return out, errors.Join(errs...)
}

func parseRoute(n string, read func(string) ([]byte, error)) (Route, error) {
	if _, ok := sched.Lookup(n); ok {
		return Route{Name: n, Policy: n}, nil
	}
	for _, p := range sched.LLMDProfiles() {
		if p.Name == n {
			return profileRoute(n, p.YAML)
		}
	}
	name, path, ok := strings.Cut(n, "=")
	if !ok || name == "" || path == "" {
		return Route{}, fmt.Errorf("policy %q: want a policy (%s), an llm-d profile (%s) or NAME=FILE of an EndpointPickerConfig",
			n, strings.Join(sched.Policies(), ", "), strings.Join(DefaultRoutes()[len(sched.Policies()):], ", "))
	}
	b, err := read(path)
	if err != nil {
		return Route{}, fmt.Errorf("policy %s: %w", name, err)
	}
	return profileRoute(name, string(b))
}

func profileRoute(name, text string) (Route, error) {
	var doc any
	if err := yaml.Unmarshal([]byte(text), &doc); err != nil {
		return Route{}, fmt.Errorf("policy %s: %w", name, err)
	}
	c, _, err := sched.Parse(name, doc)
	if err != nil {
		return Route{}, fmt.Errorf("policy %s: %w", name, err)
	}
	return Route{Name: name, Profile: c, Document: text}, nil
}

// SLO is the latency objective a point meets: its p99 TTFT and p99 TPOT
// within these, and no request rejected.
type SLO struct {
	TTFT, TPOT time.Duration
}

// Plan is one sweep. A Plan is a value; Sweep does not keep it.
type Plan struct {
	// Workload is the traffic, Rate its own rate in requests per second
	// (a trace's, or the rate asked of a generated workload), Requests how
	// many requests each point runs.
	Workload workload.Workload
	Rate     float64
	Requests int
	// WarmUp leaves out of every measure the requests arriving in each
	// run's first WarmUp of virtual time: they run and fill the caches, as
	// in a fleet that has been serving. Requests counts them.
	WarmUp time.Duration
	// Input describes the traffic in the report (Trace.Describe); ""
	// takes the workload's name, which labels the charts.
	Input string
	// Key identifies the workload's content for the results' hashes: a
	// trace file's digest and its options, or a workload's name and
	// parameters. Two plans with the same Key must make the same requests.
	Key string

	Routes   []Route
	Replicas []int
	// Scales multiply Rate: each is a load to size the fleet for.
	Scales []float64
	Engine Engine
	SLO    SLO
	Seed   uint64
	// Fanout is routing.estimate_fanout (cluster.Config.Fanout).
	Fanout int

	// Knee is how many replica counts above the fewest that meets the SLO
	// are run too, for the knee chart (the count just below is always
	// run). All runs every point instead of searching.
	Knee int
	All  bool
}

// Validate reports every problem with p at once.
func (p *Plan) Validate() error {
	var errs []error
	if p.Workload == nil {
		errs = append(errs, errors.New("workload: not set"))
	}
	if !(p.Rate > 0) || math.IsInf(p.Rate, 0) {
		errs = append(errs, fmt.Errorf("rate %v: want a finite number above 0", p.Rate))
	}
	if p.WarmUp < 0 {
		errs = append(errs, fmt.Errorf("warm-up %v: want at least 0", p.WarmUp))
	}
	if p.Requests < 1 {
		errs = append(errs, fmt.Errorf("requests %d: want at least 1", p.Requests))
	}
	if len(p.Routes) == 0 {
		errs = append(errs, errors.New("policies: none"))
	}
	if len(p.Replicas) == 0 {
		errs = append(errs, errors.New("replicas: none"))
	}
	for _, n := range p.Replicas {
		if n < 1 || n > maxReplicas {
			errs = append(errs, fmt.Errorf("replicas %d: want 1 to %d", n, maxReplicas))
		}
	}
	if len(p.Scales) == 0 {
		errs = append(errs, errors.New("scales: none"))
	}
	for _, s := range p.Scales {
		if !(s > 0) || math.IsInf(s, 0) {
			errs = append(errs, fmt.Errorf("scale %v: want a finite number above 0", s))
		}
	}
	if p.Engine.GPUs < 1 {
		errs = append(errs, fmt.Errorf("engine %s: %d GPUs per replica: want at least 1", p.Engine.Name, p.Engine.GPUs))
	}
	if p.SLO.TTFT <= 0 || p.SLO.TPOT <= 0 {
		errs = append(errs, fmt.Errorf("SLO TTFT %v, TPOT %v: want both above 0", p.SLO.TTFT, p.SLO.TPOT))
	}
	if p.Knee < 0 {
		errs = append(errs, fmt.Errorf("knee %d: want at least 0", p.Knee))
	}
	return errors.Join(errs...)
}

// maxReplicas bounds a replica count, so that a typo costs an error.
const maxReplicas = 1024

// Point is one run of a sweep.
type Point struct {
	Route    string  `json:"policy"`
	Replicas int     `json:"replicas"`
	Scale    float64 `json:"scale"`
	// Rate is the plan's rate times Scale.
	Rate float64 `json:"rate"`
}

// Result is what one point measured. Latencies are in seconds.
type Result struct {
	// Hash is the hash of everything that determined the point: a resumed
	// sweep skips a point whose file holds it.
	Hash string `json:"hash"`
	Point
	// Requests counts the requests run, Rejected those refused (every
	// replica full or filtered out).
	Requests int     `json:"requests"`
	Rejected int     `json:"rejected"`
	P50TTFT  float64 `json:"p50_ttft_s"`
	P99TTFT  float64 `json:"p99_ttft_s"`
	P50TPOT  float64 `json:"p50_tpot_s"`
	P99TPOT  float64 `json:"p99_tpot_s"`
	// Attainment is the share of the requests within both the TTFT and the
	// TPOT objective (goodput over throughput); a rejected request is not.
	Attainment float64 `json:"attainment"`
	// HitRate is the engines' cached prompt tokens over all prompt tokens;
	// OracleHitRate what an infinite cache with perfect placement would
	// have served: the trace's ceiling.
	HitRate       float64 `json:"hit_rate"`
	OracleHitRate float64 `json:"oracle_hit_rate"`
	// Meets reports p99 TTFT ≤ SLO.TTFT, p99 TPOT ≤ SLO.TPOT and nothing
	// rejected.
	Meets bool `json:"meets"`
	// WallSeconds is how long the point took to simulate; reports never
	// show it.
	WallSeconds float64 `json:"wall_seconds"`
}

// Measure condenses a run into a point's result under slo, leaving out the
// requests of the warm-up (cluster.Record.WarmUp).
func Measure(res *cluster.Result, slo SLO) Result {
	var ttft, tpot []time.Duration
	var prompt, cached, oracle int64
	var r Result
	within := 0
	for i := range res.Requests {
		rec := &res.Requests[i]
		if rec.WarmUp {
			continue
		}
		r.Requests++
		if rec.Rejected {
			r.Rejected++
			continue
		}
		t := rec.TTFT()
		ttft = append(ttft, t)
		ok := t <= slo.TTFT
		if rec.OutputTokens > 1 {
			p := (rec.Finished - rec.FirstToken) / time.Duration(rec.OutputTokens-1)
			tpot = append(tpot, p)
			ok = ok && p <= slo.TPOT
		}
		if ok {
			within++
		}
		prompt += int64(rec.PromptTokens)
		cached += int64(rec.CachedTokens)
		oracle += int64(rec.OracleTokens)
	}
	if r.Requests > 0 {
		r.Attainment = float64(within) / float64(r.Requests)
	}
	if prompt > 0 {
		r.HitRate = float64(cached) / float64(prompt)
		r.OracleHitRate = float64(oracle) / float64(prompt)
	}
	r.P50TTFT, r.P99TTFT = quantile(ttft, 50), quantile(ttft, 99)
	r.P50TPOT, r.P99TPOT = quantile(tpot, 50), quantile(tpot, 99)
	r.Meets = r.Rejected == 0 && len(ttft) > 0 &&
		r.P99TTFT <= slo.TTFT.Seconds() && r.P99TPOT <= slo.TPOT.Seconds()
	return r
}

// quantile returns the nearest-rank p-th percentile of d in seconds, 0 for
// none. d is sorted in place.
func quantile(d []time.Duration, p float64) float64 {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	k := int(math.Ceil(float64(len(d))*p/100)) - 1
	return d[min(max(k, 0), len(d)-1)].Seconds()
}

// format is the result files' format; a change of what a point computes
// bumps it, so that old files are rerun.
const format = 1

// hash is the hash of everything that determines point pt of p.
func (p *Plan) hash(r *Route, pt Point) string {
	cm := p.costParams()
	b, err := json.Marshal(struct {
		Format   int
		Key      string
		Rate     float64
		Requests int
		Route    Route
		Point    Point
		Engine   any
		Cost     policy.CostModelParams
		SLO      SLO
		Seed     uint64
		Fanout   int
		WarmUp   time.Duration `json:",omitempty"`
	}{format, p.Key, p.Rate, p.Requests, Route{Name: r.Name, Policy: r.Policy, Document: r.Document}, pt,
		p.Engine.Config, cm, p.SLO, p.Seed, p.Fanout, p.WarmUp})
	if err != nil {
		panic("BUG: whatif: hashing a point: " + err.Error())
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// costParams are cost_model's params in every point: the defaults with the
// engine's true prefill (CostModel), as an operator who calibrated has them.
func (p *Plan) costParams() policy.CostModelParams {
	cm := policy.DefaultCostModelParams()
	cm.Model = cluster.CostModel(p.Engine.Config)
	return cm
}

// config is the cluster run of point pt. A profile that reads the
// engines' KV events (llm-d's precise prefix composition) runs with them,
// as it is deployed; the others on the shadow index.
func (p *Plan) config(r *Route, pt Point) cluster.Config {
	cm := p.costParams()
	return cluster.Config{
		KVEvents:  r.Profile != nil && r.Profile.Signals()&sched.SignalKVEvents != 0,
		Replicas:  pt.Replicas,
		Engine:    p.Engine.Config,
		Policy:    r.Policy,
		Scheduler: r.Profile,
		CostModel: &cm,
		Fanout:    p.Fanout,
		Workload:  p.Workload,
		Rate:      pt.Rate,
		Requests:  p.Requests,
		WarmUp:    p.WarmUp,
		Seed:      p.Seed,
	}
}

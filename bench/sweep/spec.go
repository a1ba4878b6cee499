package sweep

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
	"go.yaml.in/yaml/v3"

	"github.com/inferrail/inferrail/bench/harness"
	"github.com/inferrail/inferrail/model/sched"
	"github.com/inferrail/inferrail/sim"
	"github.com/inferrail/inferrail/sim/cluster"
	"github.com/inferrail/inferrail/sim/engine"
	"github.com/inferrail/inferrail/sim/workload"
)

// Format is the version of the run specification and result files. A
// change to what a run measures bumps it, so that resuming reruns
// everything.
const Format = 1

// Sweep is a benchmark matrix, as read from its TOML file.
type Sweep struct {
	// Name names the sweep in reports and result files.
	Name string `toml:"name"`
	// Replicas is how many simulated engines each fleet runs.
	Replicas int `toml:"replicas"`
	// Requests due from zero to Duration are sent; those before WarmUp are
	// left out of the results.
	Duration time.Duration `toml:"duration"`
	WarmUp   time.Duration `toml:"warmup"`
	// Repetitions run every point again on a new seed: repetition k draws
	// its requests from Seed·1000 + k.
	Repetitions int    `toml:"repetitions"`
	Seed        uint64 `toml:"seed"`
	// Policies are the routing policies compared (sched.Policies), and in
	// virtual time the fleet simulator's informed upper bound
	// (cluster.Informed).
	Policies []string `toml:"policies"`
	// Profiles are the scheduling profiles compared beside them.
	Profiles []Profile `toml:"profile"`
	// LLMD adds every llm-d profile sched.LLMDProfiles holds that Profiles
	// does not name, under its own name.
	LLMD bool `toml:"llmd_profiles"`
	// Capacity, when set, makes the sweep a capacity comparison
	// (ExecuteCapacity): each point's rates are then the start of its
	// searches.
	Capacity *Capacity `toml:"capacity"`
	// Fanout is routing.estimate_fanout; 0 takes the gateway's 16.
	Fanout int `toml:"fanout"`
	// TTFT and TPOT are the SLO goodput counts against; 0 takes 2 s and
	// 100 ms.
	TTFT time.Duration `toml:"slo_ttft"`
	TPOT time.Duration `toml:"slo_tpot"`
	// Points are the workloads swept.
	Points []Point `toml:"point"`

	// Warnings are what the profiles ask for that Inferrail routes
	// without, and their deprecations (sched.Parse), each naming its
	// profile, and the engines a trace point sizes up to serve it.
	Warnings []string `toml:"-"`
	// Notes describe what the trace points replay (workload.Trace.Describe).
	Notes []string `toml:"-"`
}

// Profile is a scheduling profile a sweep compares: an EndpointPickerConfig
// document (YAML, or JSON), from a file or inline.
type Profile struct {
	// Name labels the profile in reports and result files, as
	// "llmd-helm-default"; not a policy's name.
	Name string `toml:"name"`
	// File is the document's path, relative to the sweep file; Document
	// is the document itself. Set one.
	File     string `toml:"file"`
	Document string `toml:"document"`
	// KVEvents runs the profile with the engines' KV events feeding the
	// gateway's shadow indexes (Point.KVEvents), on top of a point's. A
	// profile whose plugins read the KV-event index (sched.SignalKVEvents)
	// always does.
	KVEvents bool `toml:"kv_events"`

	cfg *sched.Config
}

// Point is one workload of a sweep at its rates.
type Point struct {
	// Name names the point in reports ("W1", "W8 CV 2"); unique.
	Name string `toml:"name"`
	// Workload is the workload's kind (workload.New, or "trace"), Set its
	// overrides (a trace's options, workload.TraceOptions).
	Workload string         `toml:"workload"`
	Set      toml.Primitive `toml:"set"`
	// Trace is the file a "trace" point replays (Mooncake's JSON lines or
	// a request log), relative to the sweep file.
	Trace string `toml:"trace"`
	// Rates are the mean request rates swept, per second; Main the one the
	// headline and verdicts read (about 70% of what a cache-blind fleet
	// sustains), one of Rates. A trace point's rate 0, or no rates, is
	// the trace's own.
	Rates []float64 `toml:"rates"`
	Main  float64   `toml:"main"`
	// Replicas, Duration and WarmUp override the sweep's when set. A
	// trace is replayed once: a trace point's run ends with its last
	// request, or at Duration when that comes first (0 for no bound).
	Replicas int           `toml:"replicas"`
	Duration time.Duration `toml:"duration"`
	WarmUp   time.Duration `toml:"warmup"`
	// KVEvents feeds the engines' KV events into the gateway's shadow
	// indexes (index.kv_events), on top of its routing decisions.
	KVEvents bool `toml:"kv_events"`
	// TTFT and TPOT override the sweep's SLO for this point when set.
	TTFT time.Duration `toml:"slo_ttft"`
	TPOT time.Duration `toml:"slo_tpot"`

	wl     workload.Workload
	trace  *workload.Trace // a trace point's
	engine engine.Config
}

// Load reads and validates a sweep file. A ShareGPT file or a trace a
// point names is read relative to the sweep file.
func Load(path string) (*Sweep, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(string(b), filepath.Dir(path))
}

// Parse reads a sweep from its TOML text, reporting every problem at once;
// relative file names in it are taken from dir.
func Parse(text, dir string) (*Sweep, error) {
	var s Sweep
	md, err := toml.Decode(text, &s)
	if err != nil {
		return nil, fmt.Errorf("sweep: %w", err)
	}
	var errs []error
	for i := range s.Points {
		p := &s.Points[i]
		p.engine = sim.DefaultOptions().Engine
		if p.Workload == workload.KindTrace || p.Trace != "" {
			if err := s.loadTrace(md, p, dir); err != nil {
				errs = append(errs, fmt.Errorf("point %q: %w", p.Name, err))
			}
			continue
		}
		w, err := workload.New(p.Workload)
		if err != nil {
			errs = append(errs, fmt.Errorf("point %q: %w", p.Name, err))
			continue
		}
		if err := md.PrimitiveDecode(p.Set, w); err != nil {
			errs = append(errs, fmt.Errorf("point %q: set: %w", p.Name, err))
			continue
		}
		if c, ok := w.(*workload.Conversations); ok {
			if err := c.LoadFrom(dir); err != nil {
				errs = append(errs, fmt.Errorf("point %q: %w", p.Name, err))
			}
		}
		p.wl = w
	}
	if s.LLMD {
		for _, l := range sched.LLMDProfiles() {
			if !slices.ContainsFunc(s.Profiles, func(p Profile) bool { return p.Name == l.Name }) {
				s.Profiles = append(s.Profiles, Profile{Name: l.Name, Document: l.YAML})
			}
		}
	}
	for i := range s.Profiles {
		p := &s.Profiles[i]
		cfg, warns, err := p.load(dir)
		if err != nil {
			errs = append(errs, fmt.Errorf("profile %q: %w", p.Name, err))
			continue
		}
		p.cfg = cfg
		for _, w := range warns {
			s.Warnings = append(s.Warnings, fmt.Sprintf("profile %q: %v", p.Name, w))
		}
	}
	for _, k := range md.Undecoded() {
		errs = append(errs, fmt.Errorf("unknown key %s", k))
	}
	s.defaults()
	errs = append(errs, s.validate())
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("sweep: %w", err)
	}
	return &s, nil
}

// loadTrace reads a trace point's file, its options from Set, and sizes
// its engines to serve the trace's longest request: vLLM refuses a prompt
// past max_model_len, and the virtual fleet stops at the first.
func (s *Sweep) loadTrace(md toml.MetaData, p *Point, dir string) error {
	if p.Workload != workload.KindTrace {
		return fmt.Errorf("trace %s: only a %q point replays a trace", p.Trace, workload.KindTrace)
	}
	if p.Trace == "" {
		return errors.New("trace: a trace point names its file")
	}
	var o workload.TraceOptions
	if err := md.PrimitiveDecode(p.Set, &o); err != nil {
		return fmt.Errorf("set: %w", err)
	}
	path := p.Trace
	if !filepath.IsAbs(path) {
		path = filepath.Join(dir, path)
	}
	t, err := workload.LoadTrace(path, o)
	if err != nil {
		return err
	}
	p.wl, p.trace = t, t
	s.Notes = append(s.Notes, fmt.Sprintf("point %q: %s", p.Name, t.Describe()))
	if e, raised := p.engine.WithContext(t.Longest()); raised {
		p.engine = e
		s.Warnings = append(s.Warnings, fmt.Sprintf("point %q: its longest request needs %d tokens: its engines get max_model_len %d and %d KV blocks of %d tokens",
			p.Name, t.Longest(), e.MaxModelLen, e.NumBlocks, e.BlockSize))
	}
	return nil
}

func (s *Sweep) defaults() {
	if s.Fanout == 0 {
		s.Fanout = 16
	}
	if s.TTFT == 0 {
		s.TTFT = harness.DefaultSLO().TTFT
	}
	if s.TPOT == 0 {
		s.TPOT = harness.DefaultSLO().TPOT
	}
	for i := range s.Points {
		p := &s.Points[i]
		if p.Replicas == 0 {
			p.Replicas = s.Replicas
		}
		if p.Duration == 0 {
			p.Duration = s.Duration
		}
		if p.WarmUp == 0 {
			p.WarmUp = s.WarmUp
		}
		if p.trace != nil {
			if len(p.Rates) == 0 {
				p.Rates = []float64{0}
			}
			for k, r := range p.Rates {
				if r == 0 {
					p.Rates[k] = p.trace.Rate()
				}
			}
			if p.Main == 0 {
				p.Main = p.trace.Rate()
			}
		}
		if p.Main == 0 && len(p.Rates) > 0 {
			p.Main = p.Rates[0]
		}
		if p.TTFT == 0 {
			p.TTFT = s.TTFT
		}
		if p.TPOT == 0 {
			p.TPOT = s.TPOT
		}
	}
	if s.Capacity != nil {
		s.Capacity.defaults(s.Policies)
	}
}

func (s *Sweep) validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if s.Name == "" || strings.ContainsAny(s.Name, `/\`) {
		bad("name %q: want a name without slashes", s.Name)
	}
	if s.Repetitions < 1 || s.Repetitions > maxRepetitions {
		bad("repetitions %d: want 1 to %d", s.Repetitions, maxRepetitions)
	}
	if len(s.Policies) == 0 && len(s.Profiles) == 0 {
		bad("policies: none, and no profile")
	}
	for i, p := range s.Policies {
		if _, ok := sched.Lookup(p); !ok && p != cluster.Informed {
			bad("policies: unknown policy %q; the policies are %s, and %s in virtual time", p, strings.Join(sched.Policies(), ", "), cluster.Informed)
		}
		if slices.Index(s.Policies, p) < i {
			bad("policies: %s listed twice", p)
		}
	}
	for i := range s.Profiles {
		p := &s.Profiles[i]
		switch {
		case p.Name == "" || strings.ContainsAny(p.Name, `/\`):
			bad("profile %d: name %q: want a name without slashes", i, p.Name)
		case slices.ContainsFunc(s.Profiles[:i], func(q Profile) bool { return q.Name == p.Name }):
			bad("profile %q: listed twice", p.Name)
		}
		if _, ok := sched.Lookup(p.Name); ok || p.Name == cluster.Informed {
			bad("profile %q: the name of a policy; name the profile otherwise", p.Name)
		}
	}
	if s.Fanout < 0 {
		bad("fanout %d: want at least 0", s.Fanout)
	}
	if len(s.Points) == 0 {
		bad("point: none")
	}
	names := map[string]bool{}
	runs := 0
	for i := range s.Points {
		p := &s.Points[i]
		if p.Name == "" || names[p.Name] {
			bad("point %d: name %q: want a unique name", i, p.Name)
		}
		names[p.Name] = true
		if p.TTFT < 0 || p.TPOT < 0 {
			bad("point %q: SLO TTFT %v, TPOT %v: want neither negative", p.Name, p.TTFT, p.TPOT)
		}
		if p.Replicas < 1 || p.Replicas > maxReplicas {
			bad("point %q: replicas %d: want 1 to %d", p.Name, p.Replicas, maxReplicas)
		}
		if p.trace != nil {
			for _, r := range p.Rates {
				if d := p.duration(r); p.Duration < 0 || p.WarmUp < 0 || p.WarmUp >= d {
					bad("point %q: duration %v, warmup %v: want 0 <= warmup < duration (at %v req/s the trace ends at %v)",
						p.Name, p.Duration, p.WarmUp, r, p.trace.End(r))
					break
				}
			}
		} else if p.Duration <= 0 || p.WarmUp < 0 || p.WarmUp >= p.Duration {
			bad("point %q: duration %v, warmup %v: want 0 <= warmup < duration", p.Name, p.Duration, p.WarmUp)
		}
		if len(p.Rates) == 0 || len(p.Rates) > maxRates {
			bad("point %q: %d rates: want 1 to %d", p.Name, len(p.Rates), maxRates)
		}
		runs += len(p.Rates) * max(s.Repetitions, 1) * max(len(s.Policies)+len(s.Profiles), 1)
		for _, r := range p.Rates {
			if !(r > 0) || math.IsInf(r, 0) {
				bad("point %q: rate %v: want a finite number above 0 (a trace point's 0 is the trace's own, but this one spans no time)", p.Name, r)
			}
		}
		if len(p.Rates) > 0 && !slices.Contains(p.Rates, p.Main) {
			bad("point %q: main %v: not one of its rates", p.Name, p.Main)
		}
		if p.wl != nil {
			if err := p.wl.Validate(); err != nil {
				bad("point %q: %v", p.Name, err)
			}
		}
	}
	if s.Capacity != nil {
		if err := s.Capacity.validate(s.Policies); err != nil {
			bad("capacity: %v", err)
		}
	}
	if runs > maxRuns {
		bad("%d runs: want at most %d in one sweep", runs, maxRuns)
	}
	return errors.Join(errs...)
}

// duration is how long p's runs at rate send requests: a trace's until
// its end, or Duration when that comes first.
func (p *Point) duration(rate float64) time.Duration {
	if p.trace == nil {
		return p.Duration
	}
	if end := p.trace.End(rate); p.Duration == 0 || p.Duration > end {
		return end
	}
	return p.Duration
}

// Bounds of a sweep file, so that a typo costs an error rather than a plan
// of billions of runs.
const (
	maxRepetitions = 1000
	maxRates       = 1000
	maxReplicas    = 4096
	maxRuns        = 100_000
	// maxProfileBytes bounds a profile's document file.
	maxProfileBytes = 1 << 20
)

// load reads and parses the profile's document; a relative File is taken
// from dir.
func (p *Profile) load(dir string) (*sched.Config, []sched.Warning, error) {
	text := p.Document
	switch {
	case p.File != "" && p.Document != "":
		return nil, nil, errors.New("file and document: set one")
	case p.File != "":
		path := p.File
		if !filepath.IsAbs(path) {
			path = filepath.Join(dir, path)
		}
		b, err := workload.ReadFile(path, maxProfileBytes)
		if err != nil {
			return nil, nil, err
		}
		text = string(b)
	case p.Document == "":
		return nil, nil, errors.New("file or document: set one")
	}
	var doc any
	if err := yaml.Unmarshal([]byte(text), &doc); err != nil {
		return nil, nil, err
	}
	return sched.Parse(p.Name, doc)
}

// RunSpec is everything that determines one run. Its hash names it in its
// result file, so that a sweep resumes past the runs already made.
type RunSpec struct {
	Format int    `json:"format"`
	Mode   string `json:"mode"` // "virtual" or "real"
	Sweep  string `json:"sweep"`
	// Point names the point; Order is its place in the sweep, for reports.
	Point string `json:"point"`
	Order int    `json:"order"`
	// Kind is the workload's kind, Params the workload with its
	// overrides.
	Kind     string          `json:"workload"`
	Params   json.RawMessage `json:"params"`
	Rate     float64         `json:"rate"`
	MainRate float64         `json:"main_rate"`
	// Policy is the policy's name, or the profile's.
	Policy string `json:"policy"`
	// Profile is the profile's document, its defaults injected
	// (sched.Config.Document), for a profile's run; left out of a
	// policy's.
	Profile    json.RawMessage `json:"profile,omitempty"`
	Repetition int             `json:"repetition"`
	Seed       uint64          `json:"seed"`
	Replicas   int             `json:"replicas"`
	Duration   time.Duration   `json:"duration"`
	WarmUp     time.Duration   `json:"warmup"`
	Fanout     int             `json:"fanout"`
	// KVEvents is left out of the file when false, so that specifications
	// written before it existed still match theirs.
	KVEvents bool        `json:"kv_events,omitempty"`
	SLO      harness.SLO `json:"slo"`
	// Search is the capacity search a run is part of (ExecuteCapacity):
	// a probe of it, or, with Scale, a run at Scale times the point's
	// knee. Left out of the file for a sweep's runs.
	Search *Search `json:"search,omitempty"`
	Scale  float64 `json:"scale,omitempty"`
	// Engine is every simulated engine's configuration.
	Engine engine.Config `json:"engine"`

	wl    workload.Workload
	sched *sched.Config
}

// Workload returns the run's workload.
func (r *RunSpec) Workload() workload.Workload { return r.wl }

// Scheduler returns the profile a profile's run routes with, nil for a
// policy's: the sweep's, or the one Profile holds.
func (r *RunSpec) Scheduler() (*sched.Config, error) {
	if r.sched != nil || len(r.Profile) == 0 {
		return r.sched, nil
	}
	var doc any
	if err := json.Unmarshal(r.Profile, &doc); err != nil {
		return nil, fmt.Errorf("profile %s: %w", r.Policy, err)
	}
	c, _, err := sched.Parse(r.Policy, doc)
	if err != nil {
		return nil, fmt.Errorf("profile %s: %w", r.Policy, err)
	}
	return c, nil
}

// Hash is the SHA-256 of the specification's JSON, in hex.
func (r *RunSpec) Hash() string {
	b, err := json.Marshal(r)
	if err != nil {
		panic("BUG: sweep: a run spec does not marshal: " + err.Error())
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// File is the run's result file, relative to the results directory:
// point/rate/policy-rN.json.
func (r *RunSpec) File() string {
	dir := strconv.FormatFloat(r.Rate, 'g', -1, 64)
	if r.Scale > 0 {
		// A knee multiple's rate is the knee's, known only once the
		// searches end.
		dir = "x" + strconv.FormatFloat(r.Scale, 'g', -1, 64)
	}
	return filepath.Join(slug(r.Point), dir, r.Policy+"-r"+strconv.Itoa(r.Repetition)+".json")
}

// slug makes a point name a directory name.
func slug(s string) string {
	var b strings.Builder
	for _, c := range s {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_', c == '.':
			b.WriteRune(c)
		default:
			b.WriteByte('-')
		}
	}
	return b.String()
}

// contender is one way of routing a sweep compares: a policy, or a
// profile with its document.
type contender struct {
	name   string
	doc    json.RawMessage
	cfg    *sched.Config
	events bool // the profile runs with the engines' KV events
}

// contenders lists the policies, then the profiles.
func (s *Sweep) contenders() []contender {
	var by []contender
	for _, p := range s.Policies {
		by = append(by, contender{name: p})
	}
	for i := range s.Profiles {
		p := &s.Profiles[i]
		doc, err := json.Marshal(p.cfg.Document())
		if err != nil {
			panic("BUG: sweep: a profile's document does not marshal: " + err.Error())
		}
		by = append(by, contender{p.Name, doc, p.cfg, p.KVEvents || p.cfg.Signals()&sched.SignalKVEvents != 0})
	}
	return by
}

// run is the specification of point i's run at rate, repetition rep,
// routed by c.
func (s *Sweep) run(mode string, i int, rate float64, rep int, c contender) *RunSpec {
	p := &s.Points[i]
	params, err := json.Marshal(p.wl)
	if err != nil {
		panic("BUG: sweep: a workload does not marshal: " + err.Error())
	}
	return &RunSpec{
		Format: Format, Mode: mode, Sweep: s.Name, Point: p.Name, Order: i,
		Kind: p.Workload, Params: params, Rate: rate, MainRate: p.Main,
		Policy: c.name, Profile: c.doc, Repetition: rep, Seed: s.Seed*1000 + uint64(rep),
		Replicas: p.Replicas, Duration: p.duration(rate), WarmUp: p.WarmUp, Fanout: s.Fanout,
		KVEvents: p.KVEvents || c.events,
		SLO:      harness.SLO{TTFT: p.TTFT, TPOT: p.TPOT}, Engine: p.engine, wl: p.wl, sched: c.cfg,
	}
}

// Plan lists the sweep's runs in the order they run: by point, rate and
// repetition, with the policies, then the profiles, innermost.
func (s *Sweep) Plan(mode string) []*RunSpec {
	by := s.contenders()
	var out []*RunSpec
	for i := range s.Points {
		for _, rate := range s.Points[i].Rates {
			for rep := range s.Repetitions {
				for _, c := range by {
					out = append(out, s.run(mode, i, rate, rep, c))
				}
			}
		}
	}
	return out
}

// CheckMode refuses a sweep that cannot run in mode: the informed upper
// bound reads the simulated engines' state, which no real fleet exposes.
func (s *Sweep) CheckMode(mode string) error {
	if mode != "virtual" && slices.Contains(s.Policies, cluster.Informed) {
		return fmt.Errorf("sweep %s: policy %s runs in virtual time only (inferrail bench sim or capacity)", s.Name, cluster.Informed)
	}
	return nil
}

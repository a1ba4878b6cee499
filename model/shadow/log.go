package shadow

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/inferrail/inferrail/model/cost"
	"github.com/inferrail/inferrail/model/policy"
	"github.com/inferrail/inferrail/model/sched"
)

// The shadow log (observability.shadow_log) is JSON lines of two kinds: a
// config line for each config generation that built shadow policies, with
// everything that determines their picks and prices, and a decision line
// for each decision a model's shadows replayed, in the order they replayed
// them, with every shadow's pick and both prices. Replay rebuilds the
// shadows from the config lines and replays the decisions through them: a
// log is evidence anyone can rerun.
//
// A model's shadows are named by the generation that built them and the
// model: a reload that leaves a model's shadow policies as they were keeps
// them, and their decisions keep that generation. A decision dropped
// because the shadows were behind was never replayed, so it is neither in
// the log nor missed by the stateful policies' replay.

// Line kinds.
const (
	KindConfig   = "config"
	KindDecision = "decision"
)

// Shadow is how one shadow policy was built: a policy's built-in profile
// from its spec, or a scheduling profile of the config (routing.schedulers,
// a scheduler) from its EndpointPickerConfig document, named Spec.Name; and
// its random source as rand.New(rand.NewPCG(Seed, Stream)).
type Shadow struct {
	policy.Spec
	// Scheduler is the profile's document, with llm-d's defaults
	// injected (sched.Config.Document); nil for a policy.
	Scheduler map[string]any `json:"scheduler,omitempty"`
	Seed      uint64         `json:"seed"`
	Stream    uint64         `json:"stream"`
}

// Build returns a fresh policy and random source for s: a Scheduler of its
// profile, as the gateway's shadows run it.
func (s *Shadow) Build() (policy.Policy, *rand.Rand, error) {
	var (
		p   policy.Policy
		err error
	)
	if s.Scheduler != nil {
		p, err = buildDocument(s.Name, s.Scheduler)
	} else if err = s.Spec.Check(); err == nil {
		p, err = sched.New(s.Spec)
	}
	if err != nil {
		return nil, nil, err
	}
	return p, s.Rand(), nil
}

// Rand returns a fresh copy of s's random source.
func (s *Shadow) Rand() *rand.Rand { return rand.New(rand.NewPCG(s.Seed, s.Stream)) }

// buildDocument builds the Scheduler of a profile's document.
func buildDocument(name string, doc map[string]any) (policy.Policy, error) {
	c, _, err := sched.Parse(name, doc)
	if err != nil {
		return nil, fmt.Errorf("scheduler %s: %w", name, err)
	}
	return c.Build()
}

// Shadows is one model's shadow policies as a generation built them, in
// config order, with the cost model that prices their picks.
type Shadows struct {
	Model     string     `json:"model"`
	CostModel cost.Model `json:"cost_model"`
	Shadows   []Shadow   `json:"shadows"`
}

// Pick is one shadow's outcome of a decision, or the error it failed with
// (its Pick failed or panicked, and the decision was skipped).
type Pick struct {
	Policy string `json:"policy"`
	Picked int    `json:"picked"`
	// Routed and Shadow are Outcome's, in nanoseconds.
	Routed time.Duration `json:"routed_ns"`
	Shadow time.Duration `json:"shadow_ns"`
	Err    string        `json:"error,omitempty"`
}

// PickOf returns the log's pick of policy name for Compare's o and err.
func PickOf(name string, o Outcome, err error) Pick {
	if err != nil {
		return Pick{Policy: name, Picked: -1, Err: err.Error()}
	}
	return Pick{Policy: name, Picked: o.Picked, Routed: o.Routed, Shadow: o.Shadow}
}

func (p Pick) String() string {
	if p.Err != "" {
		return p.Policy + " failed: " + p.Err
	}
	return fmt.Sprintf("%s picked %d (routed %v, shadow %v)", p.Policy, p.Picked, p.Routed, p.Shadow)
}

// Line is one line of the shadow log.
type Line struct {
	Kind string `json:"kind"`
	// Gen is the config generation: of the config, or of the shadows that
	// replayed the decision.
	Gen uint64 `json:"gen"`

	// Models are a config line's models whose shadows it built.
	Models []Shadows `json:"models,omitempty"`

	// Model, Seq, Decision and Picks are a decision line's. Seq counts the
	// decisions of the model's shadows from 1, so that a missing line is
	// seen; Picks are in the order of the shadows.
	Model    string    `json:"model,omitempty"`
	Seq      uint64    `json:"seq,omitempty"`
	Decision *Decision `json:"decision,omitempty"`
	Picks    []Pick    `json:"picks,omitempty"`
}

// ParseLine reads one line of the log. Unknown fields, trailing data and
// lines missing what their kind needs are errors.
func ParseLine(b []byte) (*Line, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var l Line
	if err := dec.Decode(&l); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err == nil {
		return nil, errors.New("data after the JSON object")
	}
	switch l.Kind {
	case KindConfig:
		if len(l.Models) == 0 {
			return nil, errors.New("config line without models")
		}
		for _, m := range l.Models {
			if m.Model == "" || len(m.Shadows) == 0 {
				return nil, errors.New("config line with a model without a name or shadows")
			}
		}
	case KindDecision:
		switch {
		case l.Model == "":
			return nil, errors.New("decision line without a model")
		case l.Seq == 0:
			return nil, errors.New("decision line without a seq")
		case l.Decision == nil:
			return nil, errors.New("decision line without a decision")
		case len(l.Picks) == 0:
			return nil, errors.New("decision line without picks")
		}
	default:
		return nil, fmt.Errorf("unknown kind %q", l.Kind)
	}
	return &l, nil
}

// Replay rebuilds shadows from a log's config lines and replays its
// decision lines through them, checking every pick and price. Add the
// lines in the log's order. The zero value is ready.
type Replay struct {
	// Decisions counts the decision lines replayed, Checked the picks
	// checked (agreeing or not) and Mismatched those that differed.
	Decisions, Checked, Mismatched int

	// Build, when not nil, builds each shadow in place of Shadow.Build:
	// replaying a log through another implementation of the same
	// policies (model/policy's, which the built-in profiles were proven
	// against) checks that the two decide alike.
	Build func(*Shadow) (policy.Policy, *rand.Rand, error)

	built map[replayKey]*replayed
}

type replayKey struct {
	gen   uint64
	model string
}

// replayed is one model's shadows of one generation, rebuilt.
type replayed struct {
	cm    cost.Model
	names []string
	ps    []policy.Policy
	rngs  []*rand.Rand
	seq   uint64 // of the last decision replayed
}

// Add replays l. It returns the picks that differ from the log, described,
// or an error for a line that cannot be replayed: a shadow that does not
// build, a decision of shadows no config line built, a decision out of
// sequence, or picks that do not match the shadows.
func (r *Replay) Add(l *Line) (mismatches []string, err error) {
	if r.built == nil {
		r.built = make(map[replayKey]*replayed)
	}
	if l.Kind == KindConfig {
		for _, m := range l.Models {
			b := &replayed{cm: m.CostModel}
			build := r.Build
			if build == nil {
				build = (*Shadow).Build
			}
			for i := range m.Shadows {
				p, rng, err := build(&m.Shadows[i])
				if err != nil {
					return nil, fmt.Errorf("model %s: %w", m.Model, err)
				}
				b.names, b.ps, b.rngs = append(b.names, m.Shadows[i].Name), append(b.ps, p), append(b.rngs, rng)
			}
			r.built[replayKey{l.Gen, m.Model}] = b
		}
		return nil, nil
	}
	b := r.built[replayKey{l.Gen, l.Model}]
	switch {
	case b == nil:
		return nil, fmt.Errorf("model %s: no config line built generation %d's shadows", l.Model, l.Gen)
	case l.Seq != b.seq+1:
		return nil, fmt.Errorf("model %s generation %d: seq %d follows %d: lines are missing or out of order", l.Model, l.Gen, l.Seq, b.seq)
	case len(l.Picks) != len(b.ps):
		return nil, fmt.Errorf("model %s generation %d: %d picks for %d shadows", l.Model, l.Gen, len(l.Picks), len(b.ps))
	}
	for k, p := range l.Picks {
		if p.Policy != b.names[k] {
			return nil, fmt.Errorf("model %s generation %d: pick %d is %s's, the shadow is %s", l.Model, l.Gen, k, p.Policy, b.names[k])
		}
	}
	b.seq = l.Seq
	r.Decisions++
	for k, want := range l.Picks {
		o, err := SafeCompare(b.ps[k], b.rngs[k], b.cm, l.Decision)
		got := PickOf(b.names[k], o, err)
		r.Checked++
		if got != want {
			r.Mismatched++
			mismatches = append(mismatches, "model "+l.Model+" seq "+strconv.FormatUint(l.Seq, 10)+": replayed "+got.String()+", logged "+want.String())
		}
	}
	return mismatches, nil
}

// SafeCompare is Compare with a panic of p turned into an error, as the
// gateway's shadows run it.
func SafeCompare(p policy.Policy, rng *rand.Rand, m cost.Model, d *Decision) (o Outcome, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return Compare(p, rng, m, d)
}

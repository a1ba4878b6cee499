package sched

import (
	"math"

	"github.com/inferrail/inferrail/model/cost"
	"github.com/inferrail/inferrail/model/policy"
)

// cost_model as plugins: its two load guards are filters, and its own
// decision among what they leave (hot-prefix credit, session affinity, the
// lowest estimate, its tie-breaks) is a picker. All three run
// model/policy's code (policy.BoundedLoad, policy.KVPressure,
// policy.CostModel.DecideAmong), so the built-in cost_model profile decides
// as the policy does.

// costDefaults are cost_model's parameters with policy.NewCostModel's
// defaults filled in: the one source of the defaults documented here.
var costDefaults = func() policy.CostModelParams {
	p, on := filled(policy.DefaultCostModelParams())
	p.HotPrefix.Enabled = on
	return p
}()

// filled returns p with policy.NewCostModel's defaults for what it leaves
// zero, and whether hot prefixes are on. It allocates no table (the sizes
// are not checked yet): the returned hot prefixes are off and session
// affinity is as in p.
func filled(p policy.CostModelParams) (policy.CostModelParams, bool) {
	on, sessions := p.HotPrefix.Enabled, p.SessionAffinity
	p.HotPrefix.Enabled, p.SessionAffinity = false, false
	p = policy.NewCostModel(p).Params()
	p.SessionAffinity = sessions
	return p, on
}

var boundedLoadFilter = Type{
	Name: "bounded-load-filter", Kind: KindFilter, Own: true,
	Doc: "cost_model's bounded load: sets aside the replicas that would hold more than " +
		"ceil((1 + epsilon) · (in flight + 1) / replicas) requests with this one (consistent hashing " +
		"with bounded loads). A replica's load is the gateway's requests in flight there, or its engine's " +
		"fresh running and waiting count when more (several gateway instances share it). The least " +
		"loaded replica is always kept.",
	Params: []Param{{Name: "epsilon", Default: costDefaults.Epsilon, Doc: "How far above the mean load a replica may go, at least 0 (routing.epsilon)."}},
	New: func(f *Fields) any {
		e := f.Float("epsilon")
		if e < 0 {
			f.Fail("epsilon", "want at least 0, got %v", e)
		}
		return boundedLoad{epsilon: e}
	},
}

type boundedLoad struct{ epsilon float64 }

func (boundedLoad) guard() policy.Guard { return policy.GuardBoundedLoad }

func (b boundedLoad) Filter(c *Cycle, in, out []int) []int {
	out, c.Decision.Cap = policy.BoundedLoad(out, c.Cands, in, b.epsilon)
	c.Decision.BoundedLoad = len(in) - len(out)
	return out
}

var kvPressureFilter = Type{
	Name: "kv-pressure-filter", Kind: KindFilter, Own: true, Signals: SignalEstimates | SignalLoad | SignalTokens,
	Doc: "cost_model's KV pressure guard: sets aside a replica whose fresh KV cache usage is over " +
		"kappa for a prompt with more than shortPromptTokens to compute there, when another replica not " +
		"under pressure holds all but at most shortPromptTokens of what it holds; keeps all when all " +
		"are under pressure.",
	Params: []Param{
		{Name: "kappa", Default: costDefaults.Kappa, Doc: "KV cache usage above which a replica is under pressure, 0 to 1 (routing.kappa)."},
		{Name: "shortPromptTokens", Default: costDefaults.ShortPromptTokens, Doc: "Tokens to compute up to which a prompt goes anywhere (routing.short_prompt_tokens)."},
	},
	New: func(f *Fields) any {
		k := kvPressure{kappa: f.Float("kappa"), short: f.Int("shortPromptTokens")}
		if !(k.kappa > 0 && k.kappa <= 1) {
			f.Fail("kappa", "want more than 0, at most 1, got %v", k.kappa)
		}
		if k.short < 0 {
			f.Fail("shortPromptTokens", "want at least 0, got %d", k.short)
		}
		return k
	},
}

type kvPressure struct {
	kappa float64
	short int
}

func (kvPressure) guard() policy.Guard { return policy.GuardKVPressure }

func (k kvPressure) Filter(c *Cycle, in, out []int) []int {
	out, c.Decision.KVWaived = policy.KVPressure(out, c.Cands, in, c.Req.PromptTokens, k.kappa, k.short)
	c.Decision.KVPressure = len(in) - len(out)
	return out
}

var costModelPicker = Type{
	Name: "cost-model-picker", Kind: KindPicker, Own: true, Signals: SignalEstimates | SignalTokens,
	Doc: "cost_model's decision among the replicas its guards (or any filters) leave: the lowest " +
		"estimated time to first token, a hot prefix's owners credited with the prefix, the " +
		"conversation's replica first with sessionAffinity; ties to fewer in flight, then to chance.",
	Params: append(append([]Param(nil), costModelParams...), decodeTokenParam,
		Param{Name: "sessionAffinity", Default: costDefaults.SessionAffinity, Doc: "Send a conversation back to its last replica while the filters allow (routing.session_affinity)."},
		Param{Name: "sessionSlots", Default: costDefaults.SessionSlots, Doc: "Size of the conversation table, rounded up to a power of two."},
		Param{Name: "coldRendezvous", Default: costDefaults.ColdRendezvous, Doc: "Place a prompt no replica holds on its first block's rendezvous owner among the near-best, so that several gateway instances agree (routing.cold_rendezvous)."},
		Param{Name: "coldWhenShared", Default: costDefaults.ColdWhenShared, Doc: "Turn the rendezvous on while a replica's engine is found shared with another router, the shared_engines warning (routing.shared_engines_rendezvous)."},
		Param{Name: "recomputeWeight", Default: costDefaults.RecomputeWeight, Doc: "Price each replica this many times the prefill it would compute beyond the replica that would compute the least, at least 0 (routing.recompute_weight)."},
		Param{Name: "hotPrefix", Doc: "Hot-prefix replication (routing.hot_prefix).", Fields: []Param{
			{Name: "enabled", Default: costDefaults.HotPrefix.Enabled, Doc: "Give a hot root prefix more owners."},
			{Name: "blocks", Default: costDefaults.HotPrefix.Blocks, Doc: "Leading blocks that make a root prefix."},
			{Name: "window", Default: costDefaults.HotPrefix.Window, Doc: "Decay window of the demand sketch."},
			{Name: "utilization", Default: costDefaults.HotPrefix.Utilization, Doc: "Share of one replica's time a root prefix may need before it gets another owner, above 0, at most 1."},
			{Name: "sketchDepth", Default: costDefaults.HotPrefix.SketchDepth, Doc: "Rows of the count-min sketch."},
			{Name: "sketchWidth", Default: costDefaults.HotPrefix.SketchWidth, Doc: "Counters per row."},
		}},
	),
	New: newCostModelPicker,
}

func newCostModelPicker(f *Fields) any {
	p := policy.CostModelParams{
		Model:           costModelWithDecode(f),
		SessionAffinity: f.Bool("sessionAffinity"),
		SessionSlots:    f.Int("sessionSlots"),
		ColdRendezvous:  f.Bool("coldRendezvous"),
		ColdWhenShared:  f.Bool("coldWhenShared"),
		RecomputeWeight: f.Float("recomputeWeight"),
	}
	if !(p.RecomputeWeight >= 0) || math.IsInf(p.RecomputeWeight, 0) {
		f.Fail("recomputeWeight", "want a finite number, at least 0, got %v", p.RecomputeWeight)
	}
	if p.SessionSlots < 1 || p.SessionSlots > policy.MaxSessionSlots {
		f.Fail("sessionSlots", "want 1 to %d, got %d", policy.MaxSessionSlots, p.SessionSlots)
	}
	h := f.Object("hotPrefix")
	hp := &p.HotPrefix
	hp.Enabled = h.Bool("enabled")
	hp.Blocks, hp.Window, hp.Utilization = h.Int("blocks"), h.Duration("window"), h.Float("utilization")
	hp.SketchDepth, hp.SketchWidth = h.Int("sketchDepth"), h.Int("sketchWidth")
	if hp.Blocks < 1 {
		h.Fail("blocks", "want at least 1, got %d", hp.Blocks)
	}
	if hp.Window <= 0 {
		h.Fail("window", "want more than 0, got %v", hp.Window)
	}
	if !(hp.Utilization > 0 && hp.Utilization <= 1) {
		h.Fail("utilization", "want more than 0, at most 1, got %v", hp.Utilization)
	}
	if hp.SketchDepth < 1 || hp.SketchDepth > policy.MaxSketchDepth {
		h.Fail("sketchDepth", "want 1 to %d, got %d", policy.MaxSketchDepth, hp.SketchDepth)
	}
	if hp.SketchWidth < 1 || hp.SketchWidth > policy.MaxSketchWidth {
		h.Fail("sketchWidth", "want 1 to %d, got %d", policy.MaxSketchWidth, hp.SketchWidth)
	}
	if len(f.d.errs) > 0 {
		return &costPicker{} // not built: the tables may be out of bounds
	}
	return &costPicker{m: policy.NewCostModel(p)}
}

// costPicker is cost_model's decision. d is Pick's, kept for Picked.
type costPicker struct {
	m *policy.CostModel
	d policy.Decision
}

// Pick draws the decision's one random number, as policy.CostModel.Pick.
func (p *costPicker) Pick(c *Cycle, in []int, _ []float64) int {
	p.d = p.m.DecideAmong(c.Req, c.Cands, in, c.Rng.Uint64())
	d := &c.Decision
	d.Steer, d.Term, d.Owners = p.d.Steer, p.d.Term, p.d.Owners
	return p.d.Winner
}

// explainPick is Pick explained, with cost_model's estimate of every
// candidate.
func (p *costPicker) explainPick(c *Cycle, in []int, _ []float64) (int, policy.Explanation) {
	e := p.m.ExplainAmong(c.Req, c.Cands, in, c.Rng.Uint64())
	d := &c.Decision
	d.Steer, d.Term, d.Owners = e.Steer, e.Term, e.Owners
	return e.Winner, e
}

// Picked records the decision in the hot-prefix sketch and the
// conversation table.
func (p *costPicker) Picked(c *Cycle, winner int) { p.m.Commit(c.Req, c.Cands, winner) }

// costModelWithDecode reads costModelParams and decodeTokenParam.
func costModelWithDecode(f *Fields) cost.Model {
	m := decodeCostModel(f)
	m.DecodeTokenSecs = decodeTokenSecs(f)
	return m
}

var costModelAdmitter = Type{
	Name: "cost-model-admitter", Kind: KindAdmitter, Own: true, Signals: SignalEstimates | SignalLoad | SignalTokens,
	Doc: "cost_model's SLO admission: refuses a request with an SLO (`x-llm-d-slo-ttft-ms`, " +
		"`x-llm-d-slo-tpot-ms`, or its model's default) that no replica is predicted to meet, its wait " +
		"judged cautiously: the larger of its queued prefill and the prefill of the uncached tokens of " +
		"its requests awaiting a first token, times waitFactor. The decision returns " +
		"policy.ErrNotAdmitted; the gateway answers 500, as llm-d's latency-slo-admitter. A request " +
		"without an SLO is always admitted.",
	Params: append(append([]Param(nil), costModelParams...), decodeTokenParam,
		Param{Name: "waitFactor", Default: costDefaults.AdmissionWaitFactor, Doc: "Factor on a replica's wait, at least 1 (routing.slo_admission_wait_factor)."}),
	New: func(f *Fields) any {
		a := costAdmitter{m: costModelWithDecode(f), factor: f.Float("waitFactor")}
		if !(a.factor >= 1) || math.IsInf(a.factor, 0) {
			f.Fail("waitFactor", "want a finite number, at least 1, got %v", a.factor)
		}
		return a
	},
}

// costAdmitter is cost_model's SLO admission (policy.Admits).
type costAdmitter struct {
	m      cost.Model
	factor float64
}

var _ Admitter = costAdmitter{}

func (a costAdmitter) Admit(c *Cycle) bool { return policy.Admits(c.Req, c.Cands, &a.m, a.factor) }

package sched

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/inferrail/inferrail/model/flow"
)

// FlowGate is llm-d's feature gate that turns flow control on; without
// it llm-d ignores the document's flowControl block.
const FlowGate = "flowControl"

// FlowPlugin is what one flow-control plugin instance configures: a
// fairness or ordering policy, or a saturation detector and its
// parameters. Policy types take no parameters. It is a value.
type FlowPlugin struct {
	// Type is the plugin type: one of flow.Fairness, flow.Orderings or
	// flow.Detectors.
	Type string
	// Utilization is the utilization-detector's parameters, Concurrency
	// the concurrency-detector's; Headroom is either's.
	Utilization flow.Utilization
	Concurrency flow.Concurrency
	Headroom    float64
}

// FlowControl is what a document's flow control asks for: its
// flowControl block, the deprecated top-level saturationDetector, and the
// flowControl feature gate. A field the document leaves out is unset, so
// that the caller keeps its own. It is a value.
type FlowControl struct {
	// Gate reports whether featureGates turns flow control on.
	Gate bool
	// MaxRequests is maxRequests, the most requests waiting; 0 when unset.
	MaxRequests int
	// RequestTTL is defaultRequestTTL, when HasTTL.
	RequestTTL time.Duration
	HasTTL     bool
	// Fairness and Ordering are the bands' policy types; "" when unset.
	Fairness, Ordering string
	// Detector is the saturation detector; nil when unset.
	Detector *FlowPlugin
	// Eviction is enableEviction, when HasEviction.
	Eviction, HasEviction bool
}

// FlowControl returns what the document asks of flow control; nil when
// it has no flowControl block, no saturationDetector and no flowControl
// gate.
func (c *Config) FlowControl() *FlowControl { return c.flow }

// flowPolicy is the Type of a fairness or ordering policy, named as
// model/flow names it.
func flowPolicy(name, doc string) Type {
	return Type{Name: name, Kind: KindFlow, Doc: doc,
		New: func(f *Fields) any { return &FlowPlugin{Type: name} }}
}

var (
	globalStrictFairness = flowPolicy(flow.FairnessGlobalStrict, "A band's flows as one queue, first come first "+
		"served across them (llm-d's default): `flow_control.fairness`.")
	roundRobinFairness = flowPolicy(flow.FairnessRoundRobin, "A band's flows take turns, so that one flow's "+
		"burst cannot starve the others: `flow_control.fairness`.")
	fcfsOrdering = flowPolicy(flow.OrderingFCFS, "A flow's requests leave in arrival order (llm-d's default): "+
		"`flow_control.ordering`.")
	edfOrdering = flowPolicy(flow.OrderingEDF, "A flow's requests leave earliest deadline first, the deadline "+
		"being when its wait would end: `flow_control.ordering`.")
	sloDeadlineOrdering = flowPolicy(flow.OrderingSLODeadline, "A flow's requests leave earliest first token due "+
		"first: when the gateway received it plus its `x-llm-d-slo-ttft-ms` (whole milliseconds); those without "+
		"a valid header after all others, ties by arrival: `flow_control.ordering`.")
)

// headroomParam is both detectors' headroom.
var headroomParam = Param{Name: "headroom", Default: 0.0, Doc: "The share over a mean score of 1 tolerated before the pool is saturated."}

var utilizationParams = []Param{
	{Name: "queueDepthThreshold", Default: flow.DefaultUtilization.QueueDepthThreshold, Doc: "The engine's waiting queue that scores 1."},
	{Name: "kvCacheUtilThreshold", Default: flow.DefaultUtilization.KVCacheUtilThreshold, Doc: "The KV cache use that scores 1, in (0, 1]."},
	{Name: "metricsStalenessThreshold", Default: flow.DefaultUtilization.MetricsStalenessThreshold, Doc: "The report age past which an engine scores 1."},
	headroomParam,
}

var utilizationDetector = Type{
	Name: flow.DetectorUtilization, Kind: KindFlow,
	Doc: "Saturation from the engines' own reports, waiting queue and KV cache use (llm-d's default): " +
		"`flow_control.saturation_detector`.",
	Params: utilizationParams,
	New: func(f *Fields) any {
		p := &FlowPlugin{Type: flow.DetectorUtilization, Utilization: flow.Utilization{
			QueueDepthThreshold: f.Int("queueDepthThreshold"), KVCacheUtilThreshold: f.Float("kvCacheUtilThreshold"),
			MetricsStalenessThreshold: f.Duration("metricsStalenessThreshold")}, Headroom: f.Float("headroom")}
		if p.Utilization.QueueDepthThreshold < 1 {
			f.Fail("queueDepthThreshold", "want at least 1, got %d", p.Utilization.QueueDepthThreshold)
		}
		if k := p.Utilization.KVCacheUtilThreshold; !(k > 0 && k <= 1) {
			f.Fail("kvCacheUtilThreshold", "want a number in (0, 1], got %v", k)
		}
		if p.Utilization.MetricsStalenessThreshold <= 0 {
			f.Fail("metricsStalenessThreshold", "want more than 0, got %s", p.Utilization.MetricsStalenessThreshold)
		}
		checkHeadroom(f, p.Headroom)
		return p
	},
}

// concurrencyRequests is the concurrency-detector's one mode Inferrail
// implements.
const concurrencyRequests = "requests"

var concurrencyParams = []Param{
	{Name: "concurrencyMode", Default: concurrencyRequests, Doc: "What is counted: requests (tokens and hybrid are not implemented)."},
	{Name: "maxConcurrency", Default: flow.DefaultConcurrency.MaxConcurrency, Doc: "The requests in flight per engine that score 1."},
	{Name: "maxTokenConcurrency", Default: 1000000, Doc: "The tokens in flight per engine that score 1, in the tokens modes; accepted and unused."},
	headroomParam,
}

var concurrencyDetector = Type{
	Name: flow.DetectorConcurrency, Kind: KindFlow,
	Doc: "Saturation from the gateway's own counts of requests in flight: " +
		"`flow_control.saturation_detector`.",
	Params: concurrencyParams,
	New: func(f *Fields) any {
		p := &FlowPlugin{Type: flow.DetectorConcurrency, Concurrency: flow.Concurrency{MaxConcurrency: f.Int("maxConcurrency")},
			Headroom: f.Float("headroom")}
		if m := f.String("concurrencyMode"); m != concurrencyRequests {
			f.Fail("concurrencyMode", "Inferrail counts requests; %q is not implemented", m)
		}
		if f.Int("maxTokenConcurrency") < 1 {
			f.Fail("maxTokenConcurrency", "want at least 1")
		}
		if p.Concurrency.MaxConcurrency < 1 {
			f.Fail("maxConcurrency", "want at least 1, got %d", p.Concurrency.MaxConcurrency)
		}
		checkHeadroom(f, p.Headroom)
		return p
	},
}

func checkHeadroom(f *Fields, h float64) {
	if h < 0 || math.IsNaN(h) {
		f.Fail("headroom", "want at least 0, got %v", h)
	}
}

// bandParams are the keys of a priority band and of the band templates.
var bandParams = []Param{
	{Name: "priority", Doc: "The band's priority; a template has none."},
	{Name: "maxBytes", Doc: "The band's byte bound; Inferrail has none."},
	{Name: "maxRequests", Doc: "The band's request bound; Inferrail bounds every band together."},
	{Name: "fairnessPolicyRef", Default: "", Doc: "The fairness policy: a plugin's name, or a policy type."},
	{Name: "orderingPolicyRef", Default: "", Doc: "The ordering policy: a plugin's name, or a policy type."},
}

// flowControlParams are the flowControl block's keys
// (llm-d-router apix/config/v1alpha1 FlowControlConfig).
var flowControlParams = []Param{
	{Name: "maxBytes", Doc: "The byte bound of every band together; Inferrail has none."},
	{Name: "maxRequests", Doc: "The most requests waiting: flow_control.max_queued."},
	{Name: "defaultRequestTTL", Doc: "The longest wait while the pool has endpoints: flow_control.max_wait."},
	{Name: "noEndpointRequestTTL", Doc: "The longest wait while it has none; Inferrail waits flow_control.max_wait."},
	{Name: "defaultPriorityBand", Doc: "The template of a band not listed.", Fields: bandParams},
	{Name: "defaultNegativePriorityBand", Doc: "The template of a negative band not listed.", Fields: bandParams},
	{Name: "priorityBands", Doc: "The bands.", Elem: bandParams},
	{Name: "usageLimitPolicyPluginRef", Default: "", Doc: "The usage limit policy; Inferrail has none."},
	{Name: "saturationDetector", Doc: "The saturation detector.", Fields: detectorRefParams},
	{Name: "enableEviction", Doc: "Eviction of sheddable requests: flow_control.eviction."},
}

var detectorRefParams = []Param{{Name: "pluginRef", Default: "", Doc: "A detector plugin's name, or a detector type."}}

// parseFlow decodes the document's flow control, after its plugins.
func (c *Config) parseFlow(f *Fields) {
	var fc FlowControl
	set := false
	for _, g := range f.Strings("featureGates") {
		name, val, hasVal := strings.Cut(g, "=")
		if name != FlowGate {
			f.Warn("featureGates", "%s has no effect: %s", g, elsewhere["featureGates"])
			continue
		}
		on, err := strconv.ParseBool(val)
		if !hasVal {
			on, err = true, nil
		}
		if err != nil {
			f.Fail("featureGates", "%s: want %s, %s=true or %s=false", g, FlowGate, FlowGate, FlowGate)
		}
		fc.Gate, set = on, true
	}
	b := f.Object("flowControl")
	legacy := f.Object("saturationDetector")
	if f.Set("flowControl") {
		set = true
		if !fc.Gate {
			f.Warn("flowControl", "llm-d applies this block only with featureGates: [%s]; here flow_control.enabled decides whether flow control is on", FlowGate)
		}
		c.parseFlowBlock(b, &fc)
	}
	if f.Set("saturationDetector") {
		set = true
		if b.Set("saturationDetector") {
			f.Warn("saturationDetector", "deprecated, and flowControl.saturationDetector is set, which is used")
		} else {
			f.Warn("saturationDetector", "deprecated: use flowControl.saturationDetector")
			fc.Detector = c.flowRef(legacy, "pluginRef", flow.Detectors, "saturation detector")
		}
	}
	if set {
		c.flow = &fc
	}
}

// parseFlowBlock decodes the flowControl block into fc.
func (c *Config) parseFlowBlock(b *Fields, fc *FlowControl) {
	if b.Set("maxBytes") {
		b.Warn("maxBytes", "has no effect: Inferrail bounds the queue by requests (maxRequests, flow_control.max_queued)")
	}
	if b.Set("maxRequests") {
		n, ok := Quantity(b.raw("maxRequests"))
		switch {
		case !ok || n < 0 || n > math.MaxInt32:
			b.Fail("maxRequests", "want a whole number of requests (as 100 or \"1k\"), got %s", Describe(b.raw("maxRequests")))
		case n == 0:
			b.Warn("maxRequests", "0 is no bound in llm-d; flow_control.max_queued keeps its own")
		default:
			fc.MaxRequests = int(n)
		}
	}
	if b.Set("defaultRequestTTL") {
		d := b.Duration("defaultRequestTTL")
		switch {
		case d < 0:
			b.Fail("defaultRequestTTL", "want at least 0, got %s", d)
		case d == 0:
			b.Warn("defaultRequestTTL", "0s (wait without end) has no equivalent; flow_control.max_wait keeps its own")
		default:
			fc.RequestTTL, fc.HasTTL = d, true
		}
	}
	if b.Set("noEndpointRequestTTL") {
		b.Duration("noEndpointRequestTTL")
		b.Warn("noEndpointRequestTTL", "has no effect: a request waits at most flow_control.max_wait, endpoints or not")
	}
	if b.String("usageLimitPolicyPluginRef") != "" {
		b.Warn("usageLimitPolicyPluginRef", "has no effect: Inferrail has no usage limit policy (llm-d's default, static-usage-limit-policy at 1.0, gates nothing)")
	}
	if b.Set("enableEviction") {
		fc.Eviction, fc.HasEviction = b.Bool("enableEviction"), true
	}
	if b.Set("saturationDetector") {
		fc.Detector = c.flowRef(b.Object("saturationDetector"), "pluginRef", flow.Detectors, "saturation detector")
	}
	// The templates first, then the bands: Inferrail has one fairness and
	// one ordering policy for every band, the first one the document names.
	var bands []*Fields
	for _, key := range []string{"defaultPriorityBand", "defaultNegativePriorityBand"} {
		if b.Set(key) {
			bands = append(bands, b.Object(key))
		}
	}
	bands = append(bands, b.List("priorityBands")...)
	var fairFrom, orderFrom string
	for i, band := range bands {
		if i >= len(bands)-len(b.List("priorityBands")) {
			band.Int("priority") // a template has none
		} else if band.Set("priority") {
			band.Warn("priority", "has no effect: a template's bands take their own")
		}
		for _, key := range []string{"maxBytes", "maxRequests"} {
			if band.Set(key) {
				band.Warn(key, "has no effect: Inferrail bounds every band together (maxRequests, flow_control.max_queued)")
			}
		}
		c.bandPolicy(band, "fairnessPolicyRef", flow.Fairness, "fairness policy", &fc.Fairness, &fairFrom)
		c.bandPolicy(band, "orderingPolicyRef", flow.Orderings, "ordering policy", &fc.Ordering, &orderFrom)
	}
}

// bandPolicy reads a band's policy reference into *got, the first band to
// name one setting it (from names where); a later band naming another is
// warned about.
func (c *Config) bandPolicy(band *Fields, key string, types []string, what string, got, from *string) {
	if band.String(key) == "" {
		return
	}
	p := c.flowRef(band, key, types, what)
	switch {
	case p == nil:
	case *got == "":
		*got, *from = p.Type, band.key(key)
	case p.Type != *got:
		band.Warn(key, "has no effect: Inferrail applies one %s to every band, %s from %s", what, *got, *from)
	}
}

// flowRef resolves the plugin reference at key: a flow-control plugin of
// one of types by its name, else one of types itself, with its defaults.
func (c *Config) flowRef(f *Fields, key string, types []string, what string) *FlowPlugin {
	ref := f.String(key)
	if i := c.find(ref); i >= 0 {
		p := c.plugins[i].flow
		if p == nil || !slices.Contains(types, p.Type) {
			f.Fail(key, "%q is a %s, not a %s (%s)", ref, c.plugins[i].typ.Name, what, strings.Join(types, ", "))
			return nil
		}
		return p
	}
	if slices.Contains(types, ref) {
		t, _ := LookupType(ref)
		p, _ := t.New(f.d.newFields(f.key(key), nil, t.Params)).(*FlowPlugin)
		return p
	}
	f.Fail(key, "no plugin is named %q, and it is not a %s (%s)", ref, what, strings.Join(types, ", "))
	return nil
}

// Quantity reads a Kubernetes resource quantity of whole units, as llm-d's
// maxRequests takes it: a number, or a string of digits with an optional
// decimal (k, M, G) or binary (Ki, Mi, Gi) suffix.
func Quantity(v any) (int64, bool) {
	if x, ok := Number(v); ok {
		return int64(x), x == math.Trunc(x) && math.Abs(x) <= 1<<53
	}
	s, ok := v.(string)
	if !ok {
		return 0, false
	}
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", 1 << 30}, {"k", 1e3}, {"M", 1e6}, {"G", 1e9}} {
		if rest, found := strings.CutSuffix(s, u.suffix); found {
			s, mult = rest, u.mult
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > math.MaxInt64/mult {
		return 0, false
	}
	return n * mult, true
}

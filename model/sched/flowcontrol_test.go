package sched

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/inferrail/inferrail/model/flow"
)

// llmdFlow is an EndpointPickerConfig whose flow control is written as
// llm-d's guide writes it: the gate, policy and detector plugins by name,
// bands referencing them, and the deprecated top-level detector beside the
// new one.
const llmdFlow = `
featureGates: [flowControl]
plugins:
- {type: queue-scorer}
- {name: fair, type: round-robin-fairness-policy}
- {name: deadline, type: edf-ordering-policy}
- {name: detector, type: utilization-detector, parameters: {queueDepthThreshold: 8, kvCacheUtilThreshold: 0.9, metricsStalenessThreshold: 500ms, headroom: 0.1}}
- {name: old-detector, type: concurrency-detector}
saturationDetector: {pluginRef: old-detector}
flowControl:
  maxRequests: 2k
  defaultRequestTTL: 30s
  noEndpointRequestTTL: 60s
  enableEviction: true
  saturationDetector: {pluginRef: detector}
  defaultPriorityBand: {fairnessPolicyRef: fair, orderingPolicyRef: deadline}
  priorityBands:
  - {priority: 10, fairnessPolicyRef: fair, orderingPolicyRef: deadline, maxRequests: 100}
  - {priority: -1, fairnessPolicyRef: global-strict-fairness-policy}
schedulingProfiles: [{name: default, plugins: [{pluginRef: queue-scorer}]}]`

// TestFlowControlBlock: an llm-d document's flow control reads as one
// FlowControl, each key where flow_control has one, and each key without
// an equivalent warned about by path.
func TestFlowControlBlock(t *testing.T) {
	c, warns := parse(t, document(llmdFlow))
	fc := c.FlowControl()
	want := FlowControl{Gate: true, MaxRequests: 2000, RequestTTL: 30 * time.Second, HasTTL: true,
		Fairness: flow.FairnessRoundRobin, Ordering: flow.OrderingEDF, Eviction: true, HasEviction: true,
		Detector: &FlowPlugin{Type: flow.DetectorUtilization, Headroom: 0.1, Utilization: flow.Utilization{
			QueueDepthThreshold: 8, KVCacheUtilThreshold: 0.9, MetricsStalenessThreshold: 500 * time.Millisecond}}}
	if fc == nil || fc.Detector == nil || *fc.Detector != *want.Detector {
		t.Fatalf("flow control %+v", fc)
	}
	got := *fc
	got.Detector, want.Detector = nil, nil
	if got != want {
		t.Errorf("flow control %+v, want %+v", got, want)
	}
	var paths []string
	for _, w := range warns {
		paths = append(paths, w.Path)
	}
	wantPaths := []string{"flowControl.noEndpointRequestTTL", "flowControl.priorityBands[0].maxRequests",
		"flowControl.priorityBands[1].fairnessPolicyRef", "saturationDetector"}
	if !slices.Equal(paths, wantPaths) {
		t.Errorf("warnings %v", warns)
	}
	if len(warns) == 4 && !strings.Contains(warns[2].Message, "one fairness policy to every band, round-robin-fairness-policy from flowControl.defaultPriorityBand.fairnessPolicyRef") {
		t.Errorf("the band policy warning: %s", warns[2])
	}
}

// TestFlowControlForms: the other forms llm-d accepts, and a document
// without flow control.
func TestFlowControlForms(t *testing.T) {
	f := func(body string, want FlowControl) {
		t.Helper()
		c, _ := parse(t, document(body))
		fc := c.FlowControl()
		if fc == nil {
			t.Fatalf("%s: no flow control", body)
		}
		got := *fc
		if (got.Detector == nil) != (want.Detector == nil) || got.Detector != nil && *got.Detector != *want.Detector {
			t.Errorf("%s: detector %+v, want %+v", body, got.Detector, want.Detector)
		}
		got.Detector, want.Detector = nil, nil
		if got != want {
			t.Errorf("%s: %+v, want %+v", body, got, want)
		}
	}
	concurrency := &FlowPlugin{Type: flow.DetectorConcurrency, Concurrency: flow.DefaultConcurrency}
	// The deprecated top-level detector, by type name with its defaults.
	f(`saturationDetector: {pluginRef: concurrency-detector}`, FlowControl{Detector: concurrency})
	// The gate alone, and switched off.
	f(`featureGates: ["flowControl=true"]`, FlowControl{Gate: true})
	f(`featureGates: ["flowControl=false"]`, FlowControl{})
	// Policies named by type, a quantity as a number.
	f(`flowControl: {maxRequests: 64, priorityBands: [{priority: 0, orderingPolicyRef: fcfs-ordering-policy}]}`,
		FlowControl{MaxRequests: 64, Ordering: flow.OrderingFCFS})
	if c, _ := parse(t, document(`plugins: [{type: queue-scorer}]`)); c.FlowControl() != nil {
		t.Errorf("flow control from a document without: %+v", c.FlowControl())
	}
}

// TestFlowControlErrors: bad references and values are refused with
// their paths.
func TestFlowControlErrors(t *testing.T) {
	bad := func(body string, wants ...string) {
		t.Helper()
		_, _, err := Parse("x", document(body))
		if err == nil {
			t.Fatalf("no error for %s", body)
		}
		for _, w := range wants {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q lacks %q", body, err, w)
			}
		}
		var pe *PathError
		if !errors.As(err, &pe) {
			t.Errorf("%s: not a PathError: %v", body, err)
		}
	}
	bad(`
plugins: [{type: queue-scorer}, {name: fair, type: round-robin-fairness-policy}]
flowControl:
  maxRequests: lots
  defaultRequestTTL: 30
  saturationDetector: {pluginRef: fair}
  priorityBands: [{priority: 1, fairnessPolicyRef: nope, orderingPolicyRef: queue-scorer}]
  bogus: 1`,
		`flowControl.maxRequests: want a whole number of requests`,
		`flowControl.defaultRequestTTL: want a duration`,
		`flowControl.saturationDetector.pluginRef: "fair" is a round-robin-fairness-policy, not a saturation detector`,
		`flowControl.priorityBands[0].fairnessPolicyRef: no plugin is named "nope"`,
		`flowControl.priorityBands[0].orderingPolicyRef: "queue-scorer" is a queue-scorer, not a ordering policy`,
		`flowControl.bogus: unknown key`)
	bad(`
plugins: [{type: utilization-detector, parameters: {queueDepthThreshold: 0, kvCacheUtilThreshold: 1.5, headroom: -1}}, {type: concurrency-detector, parameters: {concurrencyMode: tokens}}]`,
		"plugins[0].parameters.queueDepthThreshold: want at least 1",
		"plugins[0].parameters.kvCacheUtilThreshold: want a number in (0, 1]",
		"plugins[0].parameters.headroom: want at least 0",
		`plugins[1].parameters.concurrencyMode: Inferrail counts requests; "tokens" is not implemented`)
	bad(`
plugins: [{type: queue-scorer}, {type: fcfs-ordering-policy}]
schedulingProfiles: [{name: a, plugins: [{pluginRef: queue-scorer}, {pluginRef: fcfs-ordering-policy}]}]`,
		`schedulingProfiles[0].plugins[1].pluginRef: "fcfs-ordering-policy" is a flow-control plugin`)
	bad(`featureGates: ["flowControl=maybe"]`, "featureGates: flowControl=maybe: want flowControl")
}

func TestQuantity(t *testing.T) {
	f := func(v any, want int64, ok bool) {
		t.Helper()
		if got, gotOK := Quantity(v); got != want || gotOK != ok {
			t.Errorf("Quantity(%#v) = %d, %v; want %d, %v", v, got, gotOK, want, ok)
		}
	}
	f(100.0, 100, true)
	f("100", 100, true)
	f("1k", 1000, true)
	f("2Ki", 2048, true)
	f("3M", 3000000, true)
	f("1Gi", 1<<30, true)
	f(1.5, 1, false)
	f("1.5k", 0, false)
	f("-1", 0, false)
	f("k", 0, false)
	f("99999999999999999999", 0, false)
	f(true, 0, false)
}

// TestSLODeadlineOrderingRef: a band naming llm-d's
// slo-deadline-ordering-policy, by type or by an instance's name, sets
// flow_control's ordering to it.
func TestSLODeadlineOrderingRef(t *testing.T) {
	for _, doc := range []string{`
plugins: [{type: queue-scorer}, {name: slo, type: slo-deadline-ordering-policy}]
flowControl: {priorityBands: [{priority: 0, orderingPolicyRef: slo}]}`, `
plugins: [{type: queue-scorer}]
flowControl: {priorityBands: [{priority: 0, orderingPolicyRef: slo-deadline-ordering-policy}]}`} {
		c, _ := parse(t, document(doc))
		if fc := c.FlowControl(); fc == nil || fc.Ordering != flow.OrderingSLODeadline {
			t.Errorf("%s: flow control %+v", doc, fc)
		}
	}
}

package config

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/inferrail/inferrail/model/flow"
	"github.com/inferrail/inferrail/model/sched"
)

// helmDefault is llm-d's Helm default profile, as an inline flow mapping.
const helmDefault = `{apiVersion: llm-d.ai/v1alpha1, kind: EndpointPickerConfig,
  plugins: [{type: queue-scorer}, {type: kv-cache-utilization-scorer}, {type: prefix-cache-scorer}],
  schedulingProfiles: [{name: default, plugins: [{pluginRef: queue-scorer, weight: 2},
    {pluginRef: kv-cache-utilization-scorer, weight: 2}, {pluginRef: prefix-cache-scorer, weight: 3}]}]}`

// writeProfile writes a profile document to a file of the test's.
func writeProfile(t *testing.T, doc string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "epp.yaml")
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// A scheduling profile is given inline or as a file, routes in place of a
// policy where the docs say, and is named "scheduler" or by its
// routing.schedulers name; its document is decoded once, by Parse, with
// its signals.
func TestSchedulers(t *testing.T) {
	sticky := writeProfile(t, `apiVersion: llm-d.ai/v1alpha1
kind: EndpointPickerConfig
plugins:
- type: prefix-cache-affinity-filter
- type: token-load-scorer
`)
	c := mustParse(t, `
models:
  - {name: a}
  - {name: b, scheduler: `+sticky+`, shadow: [scheduler, helm]}
  - {name: c, policy: helm}
  - {name: d, split: {helm: 50, scheduler: 50}}
replicas:
  - {id: r0, url: http://127.0.0.1:8001, models: [a, b, c, d], labels: {llm-d.ai/role: decode, zone: a}}
routing:
  scheduler: {apiVersion: llm-d.ai/v1alpha1, kind: EndpointPickerConfig, plugins: [{type: decode-filter}, {type: random-picker}]}
  schedulers: {helm: `+helmDefault+`}
`)
	routed := func(i int) map[string]int { return c.RoutingFor(&c.Models[i]).Split }
	for i, want := range []map[string]int{{"scheduler": 100}, {"scheduler": 100}, {"helm": 100}, {"helm": 50, "scheduler": 50}} {
		if got := routed(i); !reflect.DeepEqual(got, want) {
			t.Errorf("model %s routes %v, want %v", c.Models[i].Name, got, want)
		}
	}
	profile := func(m int, name string) *sched.Config {
		t.Helper()
		p, err := c.Profile(&c.Models[m], name)
		if err != nil || p == nil {
			t.Fatalf("Profile(%s, %s) = %v, %v", c.Models[m].Name, name, p, err)
		}
		return p
	}
	if p := profile(0, "scheduler"); p.Signals() != 0 || p != c.Routing.profiles["scheduler"] {
		t.Errorf("routing.scheduler: signals %v, decoded once: %t", p.Signals(), p == c.Routing.profiles["scheduler"])
	}
	if p := profile(1, "scheduler"); p.Signals()&sched.SignalEstimates == 0 || p != c.Models[1].scheduler {
		t.Errorf("model b's own scheduler from its file: signals %v", p.Signals())
	}
	if p := profile(2, "helm"); p.Signals()&sched.SignalLoad == 0 || p.Name() != "helm" {
		t.Errorf("helm: signals %v, name %s", p.Signals(), p.Name())
	}
	if p, err := c.Profile(&c.Models[0], "cost_model"); p != nil || err != nil {
		t.Errorf("a policy's name: %v, %v", p, err)
	}
	if got := c.Replicas[0].Labels; !reflect.DeepEqual(got, map[string]string{"llm-d.ai/role": "decode", "zone": "a"}) {
		t.Errorf("labels %v", got)
	}

	// The YAML round trip keeps the path and the inline documents.
	y, err := c.YAML()
	if err != nil {
		t.Fatal(err)
	}
	back := mustParse(t, string(y))
	if d := Diff(c, back); len(d) > 0 {
		t.Errorf("round trip differs in %v:\n%s", d, y)
	}

	// An edit of the file is a change of the config read next, in the
	// model's section.
	if err := os.WriteFile(sticky, []byte(`apiVersion: llm-d.ai/v1alpha1
kind: EndpointPickerConfig
plugins: [{type: prefix-cache-affinity-filter}, {type: queue-scorer}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	if d := Diff(c, mustParse(t, string(y))); !slices.Equal(d, []string{"models"}) {
		t.Errorf("after the file's edit Diff = %v, want [models]", d)
	}
	if ro := RestartOnly(c, mustParse(t, string(y))); len(ro) > 0 {
		t.Errorf("a profile needs a restart: %v", ro)
	}

	// A Config built in code decodes its profiles when asked.
	code := Default()
	m := NewModel("m")
	m.Scheduler = map[string]any{"apiVersion": sched.APIVersion, "kind": sched.ConfigKind, "plugins": []any{map[string]any{"type": "queue-scorer"}}}
	code.Models = []Model{m}
	if p, err := code.Profile(&code.Models[0], SchedulerName); err != nil || p == nil || p.Signals() != sched.SignalLoad {
		t.Errorf("built in code: %v, %v", p, err)
	}
	m.Scheduler = map[string]any{"apiVersion": sched.APIVersion, "kind": sched.ConfigKind, "plugins": []any{map[string]any{"type": "nope"}}}
	code.Models = []Model{m}
	if _, err := code.Profile(&code.Models[0], SchedulerName); err == nil || !strings.Contains(err.Error(), `scheduler.plugins[0].type: plugin type "nope"`) {
		t.Errorf("built in code, invalid: %v", err)
	}
}

// The Gateway API Inference Extension's apiVersion is accepted with a
// deprecation warning naming the key, and so is what the gateway routes
// without.
func TestSchedulerWarnings(t *testing.T) {
	path := writeProfile(t, `apiVersion: inference.networking.x-k8s.io/v1alpha1
kind: EndpointPickerConfig
plugins: [{type: queue-scorer}, {type: max-score-picker, parameters: {maxNumOfEndpoints: 2}}]
`)
	c := mustParse(t, base+"routing: {scheduler: "+path+"}\n")
	w := c.Warnings()
	if len(w) != 2 || !strings.HasPrefix(w[0], "routing.scheduler.apiVersion: inference.networking.x-k8s.io/v1alpha1 is deprecated; use llm-d.ai/v1alpha1 (in "+path+")") ||
		!strings.HasPrefix(w[1], "routing.scheduler.plugins[1].parameters.maxNumOfEndpoints:") {
		t.Fatalf("warnings %q", w)
	}
	if w := mustParse(t, base).Warnings(); w != nil {
		t.Fatalf("no profile, warnings %q", w)
	}
}

func TestSchedulersInvalid(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "gone.yaml")
	bad := writeProfile(t, "apiVersion: llm-d.ai/v1alpha1\nkind: EndpointPickerConfig\nplugins: [{type: queue-scorer, parameters: {depth: 3}}]\n")
	model := func(extra string) string {
		return "models: [{name: m, " + extra + "}]\nreplicas: [{id: r, url: \"http://h\", models: [m]}]\n"
	}
	doc := func(plugins string) string {
		return "{apiVersion: llm-d.ai/v1alpha1, kind: EndpointPickerConfig, plugins: [" + plugins + "]}"
	}
	f := func(name, cfg string, want []string, msg string) {
		t.Helper()
		_, err := Parse([]byte(cfg), nil)
		if got := keys(t, err); !slices.Equal(got, want) {
			t.Errorf("%s: keys %q, want %q; error: %v", name, got, want, err)
			return
		}
		if !strings.Contains(err.Error(), msg) {
			t.Errorf("%s: %v, want %q in it", name, err, msg)
		}
	}
	f("unknown plugin type", base+"routing: {scheduler: "+doc("{type: queue-scorer}, {type: lora-affinity-scorer}")+"}",
		[]string{"routing.scheduler.plugins[1].type"},
		`plugin type "lora-affinity-scorer" is not implemented; Inferrail implements decode-filter, prefill-filter`)
	f("unknown parameter in a file", base+"routing: {scheduler: "+bad+"}",
		[]string{"routing.scheduler.plugins[0].parameters.depth"}, "unknown key (in "+bad+")")
	f("a model's bad parameter", model("scheduler: "+doc("{type: load-aware-scorer, parameters: {threshold: many}}")),
		[]string{"models[0].scheduler.plugins[0].parameters.threshold"}, "want a whole number")
	f("a named profile's", base+"routing: {schedulers: {helm: "+doc("{type: weighted-random-picker, parameters: {maxNumOfEndpoints: 0}}")+"}}",
		[]string{"routing.schedulers.helm.plugins[0].parameters.maxNumOfEndpoints"}, "want at least 1")
	f("no such file", base+"routing: {scheduler: "+missing+"}", []string{"routing.scheduler"}, "no such file")
	f("not a document", base+"routing: {scheduler: [queue-scorer]}", []string{"routing.scheduler"},
		"want an EndpointPickerConfig mapping or the path of a file holding one, got a list")
	f("wrong kind", base+"routing: {scheduler: {apiVersion: llm-d.ai/v1alpha1, kind: Pod}}", []string{"routing.scheduler.kind"}, "want EndpointPickerConfig")
	f("policy and scheduler", model("policy: p2c, scheduler: "+doc("{type: random-picker}")), []string{"models[0].scheduler"},
		`set scheduler or policy, not both (policy is "p2c")`)
	f("a split of an unknown profile", base+"routing: {split: {helm: 50, cost_model: 50}}", []string{"routing.split.helm"},
		`unknown policy "helm"; want one of round_robin, random, least_request, p2c, prefix_hash, kv_aware, cost_model`)
	// The fleet simulator's informed upper bound (sim/cluster.Informed)
	// reads the engines' true state, which no gateway has.
	f("the simulator's informed bound", base+"routing: {default_policy: cost_model_informed}", []string{"routing.default_policy"},
		`unknown policy "cost_model_informed"`)
	f("scheduler without one", base+"routing: {shadow: [scheduler]}", []string{"routing.shadow[0]"}, `unknown policy "scheduler"`)
	f("scheduler of another model", "models: [{name: m, scheduler: "+doc("{type: random-picker}")+"}, {name: n, shadow: [scheduler]}]\n"+
		"replicas: [{id: r, url: \"http://h\", models: [m, n]}]\n", []string{"models[1].shadow[0]"}, `unknown policy "scheduler"`)
	f("names listed", base+"routing: {schedulers: {helm: "+helmDefault+"}, default_policy: sticky}", []string{"routing.default_policy"},
		`unknown policy "sticky"; want one of round_robin, random, least_request, p2c, prefix_hash, kv_aware, cost_model, or a scheduler: helm`)
	f("a policy's name", base+"routing: {schedulers: {cost_model: "+helmDefault+"}}", []string{"routing.schedulers.cost_model"}, "a policy's name")
	f("the reserved name", base+"routing: {schedulers: {scheduler: "+helmDefault+"}}", []string{"routing.schedulers.scheduler"}, "names routing.scheduler")
	f("a name's characters", base+"routing: {schedulers: {a.b: "+helmDefault+"}}", []string{"routing.schedulers.a.b"}, "letters, digits")
	f("label name", "models: [{name: m}]\nreplicas: [{id: r, url: \"http://h\", models: [m], labels: {-x: a, ok: fine}}]\n",
		[]string{"replicas[0].labels.-x"}, "a label name")
	f("label prefix", "models: [{name: m}]\ndiscovery: {dns: [{name: g, url: \"http://h\", models: [m], labels: {Llm-D.ai/role: decode}}]}\n",
		[]string{"discovery.dns[0].labels.Llm-D.ai/role"}, "DNS subdomain")
	f("label value", "models: [{name: m}]\nreplicas: [{id: r, url: \"http://h\", models: [m], labels: {llm-d.ai/role: de code}}]\n",
		[]string{"replicas[0].labels.llm-d.ai/role"}, `value "de code"`)
	f("labels not strings", "models: [{name: m}]\nreplicas: [{id: r, url: \"http://h\", models: [m], labels: {role: [decode]}}]\n",
		[]string{"replicas[0].labels.role"}, "expected a string")
}

// The environment sets a profile as it sets any key: a path as it is, an
// inline document as YAML.
func TestSchedulerFromEnv(t *testing.T) {
	path := writeProfile(t, "apiVersion: llm-d.ai/v1alpha1\nkind: EndpointPickerConfig\nplugins: [{type: queue-scorer}]\n")
	c := mustParse(t, base, "INFERRAIL_ROUTING__SCHEDULER="+path,
		"INFERRAIL_ROUTING__SCHEDULERS={helm: "+strings.ReplaceAll(helmDefault, "\n", " ")+"}")
	if c.Routing.Scheduler != path || c.Routing.profiles["scheduler"] == nil || c.Routing.profiles["helm"] == nil {
		t.Fatalf("scheduler %v, profiles %v", c.Routing.Scheduler, c.Routing.profiles)
	}
}

// TestSchedulerFlowControl: an llm-d EndpointPickerConfig's flow control,
// in a file as llm-d's own, maps onto flow_control when it is
// routing.scheduler's; in another profile it is warned about and changes
// nothing; without one flow_control is as the section says.
func TestSchedulerFlowControl(t *testing.T) {
	epp := writeProfile(t, `apiVersion: llm-d.ai/v1alpha1
kind: EndpointPickerConfig
featureGates: [flowControl]
plugins:
- {type: queue-scorer}
- {name: fair, type: round-robin-fairness-policy}
- {name: detector, type: concurrency-detector, parameters: {maxConcurrency: 40, headroom: 0.2}}
flowControl:
  maxRequests: 1k
  defaultRequestTTL: 20s
  enableEviction: true
  saturationDetector: {pluginRef: detector}
  priorityBands:
  - {priority: 10, fairnessPolicyRef: fair, orderingPolicyRef: edf-ordering-policy}
  - {priority: -1, fairnessPolicyRef: fair}
schedulingProfiles: [{name: default, plugins: [{pluginRef: queue-scorer}]}]
`)
	base := `
replicas: [{id: r0, url: http://127.0.0.1:8001, models: [a]}]
flow_control: {max_queued: 7, saturation_detector: {queue_depth_threshold: 3}}
`
	c := mustParse(t, base+"models: [{name: a}]\nrouting: {scheduler: "+epp+"}\n")
	want := Default().FlowControl
	want.Enabled, want.MaxQueued, want.MaxWait, want.Eviction = true, 1000, 20*time.Second, true
	want.Fairness, want.Ordering = flow.FairnessRoundRobin, flow.OrderingEDF
	want.SaturationDetector.Type, want.SaturationDetector.MaxConcurrency, want.SaturationDetector.Headroom = flow.DetectorConcurrency, 40, 0.2
	want.SaturationDetector.QueueDepthThreshold = 3 // the section's, which the document leaves
	if !reflect.DeepEqual(c.FlowControl, want) {
		t.Errorf("flow_control\n%+v, want\n%+v", c.FlowControl, want)
	}

	c = mustParse(t, base+"routing: {schedulers: {llmd: "+epp+"}}\nmodels: [{name: a, policy: llmd}]\n")
	if c.FlowControl.Enabled || c.FlowControl.MaxQueued != 7 || c.FlowControl.Fairness != flow.FairnessGlobalStrict {
		t.Errorf("a named profile's flow control changed flow_control: %+v", c.FlowControl)
	}
	if !slices.ContainsFunc(c.Warnings(), func(w string) bool {
		return strings.HasPrefix(w, "routing.schedulers.llmd: its flow control") && strings.Contains(w, "only routing.scheduler's maps onto flow_control")
	}) {
		t.Errorf("no warning for a named profile's flow control: %q", c.Warnings())
	}

	c = mustParse(t, base+"models: [{name: a}]\nrouting: {scheduler: "+helmDefault+"}\n")
	if c.FlowControl.Enabled || c.FlowControl.MaxQueued != 7 || c.FlowControl.SaturationDetector.QueueDepthThreshold != 3 {
		t.Errorf("a profile without flow control changed flow_control: %+v", c.FlowControl)
	}
}

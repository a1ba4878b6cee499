package sched

import (
	"errors"
	"math/rand/v2"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/inferrail/inferrail/model/policy"
	"github.com/inferrail/inferrail/model/prefix"
)

// document parses a YAML document body, adding the apiVersion and kind
// when it has none.
func document(body string) map[string]any {
	var m map[string]any
	if err := yaml.Unmarshal([]byte(body), &m); err != nil {
		panic(err)
	}
	if m == nil {
		m = map[string]any{}
	}
	if _, ok := m["apiVersion"]; !ok {
		m["apiVersion"], m["kind"] = APIVersion, ConfigKind
	}
	return m
}

func readDocument(t testing.TB, path string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return document(string(b))
}

func parse(t testing.TB, doc map[string]any) (*Config, []Warning) {
	t.Helper()
	c, warns, err := Parse("test", doc)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return c, warns
}

func build(t testing.TB, doc map[string]any) *Scheduler {
	t.Helper()
	c, _ := parse(t, doc)
	s, err := c.Build()
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	return s
}

// shape describes a Scheduler's profiles as "name: filters | scorer×weight
// | picker".
func shape(s *Scheduler) string {
	var out []string
	for _, p := range s.profiles {
		var parts []string
		for _, f := range p.filters {
			parts = append(parts, f.name)
		}
		parts = append(parts, "|")
		for _, sc := range p.scorers {
			parts = append(parts, sc.name+"×"+strconv.FormatFloat(sc.weight, 'g', -1, 64))
		}
		parts = append(parts, "|", p.picker.name)
		out = append(out, p.name+": "+strings.Join(parts, " "))
	}
	return strings.Join(out, "; ")
}

// TestArchitectureExample loads the complete configuration of llm-d's
// architecture document unchanged, and routes with it: the best prefix
// match among the replicas decode-filter keeps.
func TestArchitectureExample(t *testing.T) {
	c, warns := parse(t, readDocument(t, "testdata/architecture-example.yaml"))
	if len(warns) != 1 || warns[0].Path != "plugins[0].parameters.indexerConfig" {
		t.Fatalf("warnings %v", warns)
	}
	if c.Signals() != SignalEstimates|SignalTokens|SignalKVEvents {
		t.Fatalf("signals %s", c.Signals())
	}
	s, _ := c.Build()
	if got := shape(s); got != "default: decode-filter | prefix-cache-scorer×50 | max-score-picker" {
		t.Fatalf("profiles %s", got)
	}
	tr := newTraffic(5)
	rng := rand.New(rand.NewPCG(5, 5))
	routed := 0
	for range 2000 {
		req, cands := tr.next()
		i, err := s.Pick(req, cands, rng)
		var decode []int
		for k := range cands {
			if role, ok := cands[k].Labels[RoleLabel]; !ok || slices.Contains(decodeRoles, role) {
				decode = append(decode, k)
			}
		}
		if len(decode) == 0 {
			if !IsFilteredOut(err) && !errors.Is(err, policy.ErrNoCandidate) {
				t.Fatalf("no decode replica: %d, %v", i, err)
			}
			continue
		}
		if err != nil || !slices.Contains(decode, i) {
			t.Fatalf("picked %d (%v) of decode replicas %v", i, err, decode)
		}
		for _, k := range decode {
			if matchRatio(&Cycle{Req: req, Cands: cands}, k) > matchRatio(&Cycle{Req: req, Cands: cands}, i) {
				t.Fatalf("picked %d, %d holds more of the prompt", i, k)
			}
		}
		tr.routed(i)
		routed++
	}
	if routed < 1000 {
		t.Fatalf("routed %d", routed)
	}
}

// TestHelmDefault loads llm-d's Helm default unchanged and routes with
// it: the pick has the best 2·queue + 2·KV + 3·prefix score, each score
// computed here by llm-d's formulas.
func TestHelmDefault(t *testing.T) {
	c, warns := parse(t, readDocument(t, "testdata/helm-default.yaml"))
	if len(warns) != 0 {
		t.Fatalf("warnings %v", warns)
	}
	s, _ := c.Build()
	if got := shape(s); got != "default: | queue-scorer×2 kv-cache-utilization-scorer×2 prefix-cache-scorer×3 | max-score-picker" {
		t.Fatalf("profiles %s", got)
	}
	if c.Signals() != SignalEstimates|SignalTokens|SignalLoad {
		t.Fatalf("signals %s", c.Signals())
	}
	rng := rand.New(rand.NewPCG(6, 6))
	for step := range 3000 {
		n := 1 + rng.IntN(8)
		req := &policy.Request{Blocks: make([]prefix.Hash, rng.IntN(20)), BlockSize: 16}
		cands := make([]policy.Candidate, n)
		lo, hi := 1<<30, -1
		for i := range cands {
			cands[i] = policy.Candidate{Replica: i, Waiting: rng.IntN(5), KVUsage: rng.Float64(), Fresh: true, CachedTokens: 16 * rng.IntN(len(req.Blocks)+1)}
			lo, hi = min(lo, cands[i].Waiting), max(hi, cands[i].Waiting)
		}
		total := func(i int) float64 {
			q := 1.0
			if hi > lo {
				q = float64(hi-cands[i].Waiting) / float64(hi-lo)
			}
			p := 0.0
			if len(req.Blocks) > 0 {
				p = float64(cands[i].CachedTokens/16) / float64(len(req.Blocks))
			}
			return 2*q + 2*(1-cands[i].KVUsage) + 3*p
		}
		i, err := s.Pick(req, cands, rng)
		if err != nil {
			t.Fatal(err)
		}
		for k := range cands {
			if total(k) > total(i)+1e-9 {
				t.Fatalf("step %d: picked %d (%.4f), %d scores %.4f", step, i, total(i), k, total(k))
			}
		}
	}
}

func TestStickyUntilSaturated(t *testing.T) {
	c, warns := parse(t, readDocument(t, "testdata/sticky-until-saturated.yaml"))
	if len(warns) != 0 {
		t.Fatalf("warnings %v", warns)
	}
	s, _ := c.Build()
	if got := shape(s); got != "default: prefix-cache-affinity-filter | token-load-scorer×1 | max-score-picker" {
		t.Fatalf("profiles %s", got)
	}
}

func TestPayloadAgnosticRefusedByName(t *testing.T) {
	_, _, err := Parse("x", readDocument(t, "testdata/payload-agnostic.yaml"))
	if err == nil || !strings.Contains(err.Error(), `plugins[0].type: plugin type "passthrough-parser" is not implemented; Inferrail implements decode-filter, `) ||
		!strings.Contains(err.Error(), "cost-model-picker") {
		t.Fatalf("got %v", err)
	}
}

// TestDefaultInjection checks llm-d's default injection, and what a
// document may not do.
func TestDefaultInjection(t *testing.T) {
	f := func(body, want string) {
		t.Helper()
		if got := shape(build(t, document(body))); got != want {
			t.Errorf("%s\ngot  %s\nwant %s", body, got, want)
		}
	}
	// No profiles: a default one of the listed filters, scorers and
	// pickers in order, a max-score-picker, single-profile-handler.
	f(`plugins: [{type: queue-scorer}, {type: metrics-data-source}, {type: decode-filter}, {type: prefix-cache-scorer, name: p}]`,
		"default: decode-filter | queue-scorer×1 p×1 | max-score-picker")
	f(``, "default: | | max-score-picker")
	f(`plugins: [{type: random-picker}]`, "default: | | random-picker")
	// A profile without a picker gets max-score-picker; a weight left out is 1.
	f(`
plugins: [{type: queue-scorer}, {type: kv-cache-utilization-scorer}]
schedulingProfiles: [{name: a, plugins: [{pluginRef: kv-cache-utilization-scorer}, {pluginRef: queue-scorer, weight: 0.5}]}]`,
		"a: | kv-cache-utilization-scorer×1 queue-scorer×0.5 | max-score-picker")

	bad := func(body string, want ...string) {
		t.Helper()
		_, _, err := Parse("x", document(body))
		for _, w := range want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%s\ngot %v\nwant %s", body, err, w)
			}
		}
	}
	bad(`
plugins: [{type: queue-scorer}]
schedulingProfiles: [{name: a, plugins: [{pluginRef: queue-scorer}]}, {name: b, plugins: [{pluginRef: queue-scorer}]}]`,
		"schedulingProfiles: 2 profiles need a profile handler; Inferrail implements single-profile-handler, which runs one")
	bad(`
plugins: [{type: queue-scorer}, {type: single-profile-handler}]
schedulingProfiles: [{name: a, plugins: [{pluginRef: queue-scorer}]}, {name: b, plugins: [{pluginRef: queue-scorer}]}]`,
		"single-profile-handler runs one profile; the document has 2")
	bad(`
plugins: [{type: queue-scorer}, {type: single-profile-handler}]
schedulingProfiles: [{name: a, plugins: [{pluginRef: single-profile-handler}, {pluginRef: nope}, {pluginRef: queue-scorer, weight: -1}]}]`,
		`schedulingProfiles[0].plugins[0].pluginRef: "single-profile-handler" is a profile handler`,
		`schedulingProfiles[0].plugins[1].pluginRef: no plugin is named "nope"`,
		"schedulingProfiles[0].plugins[2].weight: want at least 0, got -1")
	bad(`
plugins: [{type: random-picker}, {type: max-score-picker}, {type: queue-scorer, name: q}, {type: kv-cache-utilization-scorer, name: q}]
schedulingProfiles: [{name: a, plugins: [{pluginRef: random-picker}, {pluginRef: max-score-picker}, {pluginRef: q}, {pluginRef: q}]}]`,
		`plugins[3].name: "q" names two plugins`,
		`schedulingProfiles[0].plugins[1].pluginRef: a profile has one picker; "max-score-picker" is another`,
		`schedulingProfiles[0].plugins[3].pluginRef: "q" is in the profile twice`)
	bad(`
plugins: [{type: queue-scorer, name: max-score-picker}]`,
		`plugins[0].name: "max-score-picker" is llm-d's default picker, which Inferrail adds here`)
	bad(`{apiVersion: v1, kind: ConfigMap, plugin: []}`,
		`apiVersion: want llm-d.ai/v1alpha1, got "v1"`, `kind: want EndpointPickerConfig, got "ConfigMap"`, "plugin: unknown key")
	bad(`
plugins:
- {type: load-aware-scorer, parameters: {threshold: 1.5}}
- {type: prefix-cache-affinity-filter, parameters: {blockSize: 64}}
- {type: token-load-scorer, parameters: [1]}
- {type: by-label}
- {name: x}`,
		"plugins[0].parameters.threshold: want a whole number, got the number 1.5",
		"plugins[1].parameters.blockSize: unknown key",
		"plugins[2].parameters: want a mapping, got a list",
		`plugins[3].type: plugin type "by-label" is not implemented`,
		"plugins[4].type: required")
	if _, _, err := Parse("x", []any{}); err == nil {
		t.Error("a list as the document")
	}
}

func TestWarnings(t *testing.T) {
	_, warns := parse(t, document(`
apiVersion: inference.networking.x-k8s.io/v1alpha1
kind: EndpointPickerConfig
featureGates: [flowControl]
flowControl: {maxRequests: 10}
plugins:
- {type: queue-scorer}
- {type: max-score-picker, parameters: {maxNumOfEndpoints: 2}}
- {type: approx-prefix-cache-producer, parameters: {blockSizeTokens: 64, lruCapacityPerServer: 31250}}
schedulingProfiles: [{name: d, plugins: [{pluginRef: queue-scorer}, {pluginRef: max-score-picker, weight: 3}]}]`))
	var got []string
	for _, w := range warns {
		got = append(got, w.Path)
	}
	want := []string{"apiVersion", "plugins[1].parameters.maxNumOfEndpoints",
		"plugins[2].parameters.blockSizeTokens", "schedulingProfiles[0].plugins[1].weight"}
	if !slices.Equal(got, want) {
		t.Fatalf("warnings %v", warns)
	}
	if !strings.Contains(warns[0].String(), "deprecated; use llm-d.ai/v1alpha1") {
		t.Fatalf("the deprecation: %s", warns[0])
	}
}

// TestDocumentRoundTrip checks that a Config's Document parses to the
// same Config, for llm-d's documents and the built-in profiles.
func TestDocumentRoundTrip(t *testing.T) {
	docs := []map[string]any{readDocument(t, "testdata/helm-default.yaml"), readDocument(t, "testdata/architecture-example.yaml")}
	for _, name := range Policies() {
		b, _ := Lookup(name)
		docs = append(docs, b.Document(policy.Spec{}))
	}
	for _, doc := range docs {
		c, _ := parse(t, doc)
		again, _ := parse(t, c.Document())
		if !reflect.DeepEqual(c.Document(), again.Document()) || c.Signals() != again.Signals() {
			t.Fatalf("%v\nbecame %v", c.Document(), again.Document())
		}
	}
}

package sched

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/inferrail/inferrail/model/policy"
)

// FuzzParse checks that no document panics Parse or Build; that whatever
// Parse accepts builds, routes every request to one of its candidates
// (or reports no candidate), and survives a round trip through its
// Document unchanged; and that every error names a path.
func FuzzParse(f *testing.F) {
	paths, _ := filepath.Glob("testdata/*.yaml")
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, name := range Policies() {
		b, _ := Lookup(name)
		y, err := yaml.Marshal(b.Document(policy.Spec{}))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(y)
	}
	for _, s := range []string{
		"", "{}", "[]", "null", `{"apiVersion": "llm-d.ai/v1alpha1", "kind": "EndpointPickerConfig"}`,
		"apiVersion: llm-d.ai/v1alpha1\nkind: EndpointPickerConfig\nplugins: [{type: utilization-filter, parameters: {conditions: [{metric: waiting-queue, maxValue: 1e400}]}}]",
		"apiVersion: llm-d.ai/v1alpha1\nkind: EndpointPickerConfig\nplugins: [{type: cost-model-picker, parameters: {sessionSlots: 1e12, hotPrefix: {window: 1ns}}}]",
		"apiVersion: llm-d.ai/v1alpha1\nkind: EndpointPickerConfig\nplugins: [{type: label-selector-filter, parameters: {matchExpressions: [{key: a, operator: In, values: [1]}]}}]",
		"apiVersion: llm-d.ai/v1alpha1\nkind: EndpointPickerConfig\nplugins: [{type: queue-scorer}]\nschedulingProfiles: [{name: a, plugins: [{pluginRef: queue-scorer, weight: .nan}]}]",
		"a: &a [*a, *a, *a]",
		"apiVersion: llm-d.ai/v1alpha1\nkind: EndpointPickerConfig\nfeatureGates: [flowControl=false]\nsaturationDetector: {pluginRef: concurrency-detector}\nflowControl: {maxRequests: 9999999Gi, defaultRequestTTL: 0s, priorityBands: [{priority: 1, fairnessPolicyRef: x}]}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var doc any
		if json.Unmarshal(b, &doc) != nil {
			if len(b) > 1<<12 || yaml.Unmarshal(b, &doc) != nil {
				return
			}
		}
		c, _, err := Parse("fuzz", doc)
		if err != nil {
			for _, e := range unjoin(err) {
				if e.Error() == "" {
					t.Fatal("an empty error")
				}
			}
			return
		}
		s, err := c.Build()
		if err != nil {
			t.Fatalf("Parse accepted what Build refuses: %v", err)
		}
		again, _, err := Parse("fuzz", c.Document())
		if err != nil || !reflect.DeepEqual(again.Document(), c.Document()) {
			t.Fatalf("the Document does not parse back: %v", err)
		}
		tr := newTraffic(uint64(len(b)))
		rng := rand.New(rand.NewPCG(1, uint64(len(b))))
		for range 50 {
			req, cands := tr.next()
			i, err := s.Pick(req, cands, rng)
			switch {
			case err != nil && !errors.Is(err, policy.ErrNoCandidate):
				t.Fatalf("Pick: %v", err)
			case err == nil && (i < 0 || i >= len(cands)):
				t.Fatalf("Pick = %d of %d", i, len(cands))
			case err == nil:
				tr.routed(i)
			}
		}
	})
}

// unjoin returns the errors an errors.Join holds, or err alone.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

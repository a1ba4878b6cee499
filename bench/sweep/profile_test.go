package sweep

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/inferrail/inferrail/model/sched"
)

// withProfiles is small with llm-d's Helm default from its file and the
// sticky composition inline.
const withProfiles = small + `
[[profile]]
name = "llmd-helm-default"
file = "../../model/sched/testdata/helm-default.yaml"

[[profile]]
name = "llmd-sticky"
document = """
apiVersion: llm-d.ai/v1alpha1
kind: EndpointPickerConfig
plugins:
- type: prefix-cache-affinity-filter
- type: token-load-scorer
"""
`

// A sweep compares profiles beside policies: each profile, from its file or
// inline, runs after the policies on the same seed, named by its label, its
// document (defaults injected) in its run's specification; a policy's
// specification has none, so its hash is what it was.
func TestProfilesPlanned(t *testing.T) {
	s, err := Parse(withProfiles, ".")
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Warnings) != 0 {
		t.Fatalf("llm-d's configs warn: %q", s.Warnings)
	}
	runs := s.Plan("virtual")
	var got []string
	for _, r := range runs[:4] {
		got = append(got, r.Policy+" "+num(float64(r.Seed)))
	}
	if want := []string{"round_robin 4000", "cost_model 4000", "llmd-helm-default 4000", "llmd-sticky 4000"}; !slices.Equal(got, want) {
		t.Fatalf("order %q, want %q", got, want)
	}
	plain := mustParse(t, small).Plan("virtual")
	if runs[0].Hash() != plain[0].Hash() || len(runs[0].Profile) != 0 {
		t.Fatal("a policy's run specification changed beside profiles")
	}
	sticky := runs[3]
	if !strings.Contains(string(sticky.Profile), `"max-score-picker"`) || sticky.File() != filepath.Join("W1", "2", "llmd-sticky-r0.json") {
		t.Fatalf("the sticky profile's run: %s in %s", sticky.Profile, sticky.File())
	}
	// A specification read back from its file rebuilds the same profile.
	var back RunSpec
	b, _ := json.Marshal(sticky)
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	c, err := back.Scheduler()
	if err != nil || c.Name() != "llmd-sticky" || !reflect.DeepEqual(c.Document(), s.Profiles[1].cfg.Document()) {
		t.Fatalf("read back: %v %v", c, err)
	}
	if c, err := runs[0].Scheduler(); c != nil || err != nil {
		t.Fatalf("a policy's run has a profile: %v %v", c, err)
	}
}

// Every problem of a profile is reported with its name.
func TestProfileErrors(t *testing.T) {
	bad := small + `
[[profile]]
name = "both"
file = "x.yaml"
document = "kind: EndpointPickerConfig"

[[profile]]
name = "neither"

[[profile]]
name = "cost_model"
document = "{apiVersion: llm-d.ai/v1alpha1, kind: EndpointPickerConfig, plugins: [{type: queue-scorer}]}"

[[profile]]
name = "unknown-type"
document = "{apiVersion: llm-d.ai/v1alpha1, kind: EndpointPickerConfig, plugins: [{type: topology-affinity-scorer}]}"

[[profile]]
name = "missing"
file = "no-such.yaml"

[[profile]]
name = "dir"
file = "."

[[profile]]
name = "unknown-type"
document = "{apiVersion: llm-d.ai/v1alpha1, kind: EndpointPickerConfig, plugins: [{type: queue-scorer}]}"
`
	_, err := Parse(bad, ".")
	for _, want := range []string{`profile "both": file and document: set one`, `profile "neither": file or document: set one`,
		`profile "cost_model": the name of a policy`, `profile "unknown-type": plugins[0].type: plugin type "topology-affinity-scorer" is not implemented`,
		`profile "missing": open no-such.yaml`, `profile "dir": .: not a regular file`, `profile "unknown-type": listed twice`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q:\n%v", want, err)
		}
	}
	big := filepath.Join(t.TempDir(), "big.yaml")
	if err := os.WriteFile(big, make([]byte, maxProfileBytes+1), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Parse(small+"[[profile]]\nname = \"big\"\nfile = \""+big+"\"\n", ".")
	if err == nil || !strings.Contains(err.Error(), "1048577 bytes, over 1048576") {
		t.Errorf("a profile file over the bound: %v", err)
	}
	_, err = Parse(strings.Replace(small, `policies = ["round_robin", "cost_model"]`, `policies = ["round_robin", "round_robin"]`, 1), ".")
	if err == nil || !strings.Contains(err.Error(), "round_robin listed twice") {
		t.Errorf("a policy listed twice: %v", err)
	}
}

// What a profile asks for that Inferrail routes without is a warning naming
// the profile.
func TestProfileWarnings(t *testing.T) {
	s := mustParse(t, small+`
[[profile]]
name = "gie"
document = "{apiVersion: inference.networking.x-k8s.io/v1alpha1, kind: EndpointPickerConfig, plugins: [{type: queue-scorer}]}"
`)
	if len(s.Warnings) != 1 || !strings.Contains(s.Warnings[0], `profile "gie": apiVersion: inference.networking.x-k8s.io/v1alpha1 is deprecated`) {
		t.Fatalf("warnings %q", s.Warnings)
	}
}

// The verdicts name policies of the registry.
func TestVerdictPolicies(t *testing.T) {
	for _, p := range []string{ours, blind, fewest} {
		if _, ok := sched.Lookup(p); !ok {
			t.Errorf("the report judges %q, which is no policy", p)
		}
	}
	ps := append([]string{"llmd-sticky", "llmd-helm-default"}, sched.Policies()...)
	slices.Reverse(ps)
	sortPolicies(ps)
	if want := append(sched.Policies(), "llmd-helm-default", "llmd-sticky"); !slices.Equal(ps, want) {
		t.Fatalf("report order %q, want the registry's, then the profiles sorted: %q", ps, want)
	}
}

// A sweep of policies and profiles runs in virtual time, and its report
// compares them at every rate and says where cost_model loses.
func TestProfilesReported(t *testing.T) {
	s, err := Parse(withProfiles, ".")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if _, _, err := Execute(context.Background(), s.Plan("virtual"), Virtual{}, Options{Dir: dir, Jobs: 2}); err != nil {
		t.Fatal(err)
	}
	res, err := ReadResults(dir)
	if err != nil {
		t.Fatal(err)
	}
	files, err := Report(res)
	if err != nil {
		t.Fatal(err)
	}
	md := string(files["report.md"])
	for _, want := range []string{"### Every point and rate", "| point | req/s | of main | round_robin | cost_model | llmd-helm-default | llmd-sticky |",
		"| W1 | 3 | 1.00× |", "### Where cost_model loses", "Of 3 points and rates, cost_model has the best p99 TTFT in"} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	for _, r := range res {
		if r.Spec.Policy == "llmd-helm-default" && r.Summary.Requests == 0 {
			t.Fatalf("the Helm default's run measured nothing: %+v", r.Summary)
		}
	}
}

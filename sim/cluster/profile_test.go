package cluster

import (
	"os"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/inferrail/inferrail/model/policy"
	"github.com/inferrail/inferrail/model/sched"
)

// profile parses the EndpointPickerConfig document at path (llm-d's configs
// in model/sched's testdata, as they are), named name.
func profile(t testing.TB, name, path string) *sched.Config {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return profileText(t, name, string(b))
}

func profileText(t testing.TB, name, text string) *sched.Config {
	t.Helper()
	var doc any
	if err := yaml.Unmarshal([]byte(text), &doc); err != nil {
		t.Fatal(err)
	}
	c, _, err := sched.Parse(name, doc)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

const (
	helmDefault = "../../model/sched/testdata/helm-default.yaml"
	sticky      = "../../model/sched/testdata/sticky-until-saturated.yaml"
)

// A profile's plugins see what the gateway's routing actor gives them: the
// engine's waiting requests from the last fresh scrape, and each replica's
// pending tokens, the uncached prompt tokens (by the prediction each was
// routed on) of the requests there still without a first token. The run is
// labelled with the profile's name.
func TestProfileCandidates(t *testing.T) {
	for _, tc := range []struct{ name, path string }{{"llmd-helm-default", helmDefault}, {"llmd-sticky", sticky}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := Config{
				Replicas: 3, Engine: defaultEngine(), Scheduler: profile(t, tc.name, tc.path),
				Workload: mixW1W6(), Rate: 14, Duration: 15 * time.Second, Seed: 2,
			}
			if raceEnabled {
				cfg.Duration = 3 * time.Second
			}
			var picks, waiting, pendingTokens int
			res := runWith(t, cfg, func(r *run, _ *policy.Request, cs []policy.Candidate, _ int) {
				picks++
				tokens := make([]int, len(r.reps))
				for i := range r.recs {
					rec := &r.recs[i]
					if rec.Replica >= 0 && rec.FirstToken == 0 && !rec.Rejected {
						tokens[rec.Replica] += rec.PromptTokens - rec.PredictedTokens
					}
				}
				for _, c := range cs {
					p := r.reps[c.Replica]
					if c.Key != p.key {
						t.Fatalf("replica %s: key %#x", p.id, c.Key)
					}
					if c.PendingTokens != tokens[c.Replica] {
						t.Fatalf("replica %s at %v: %d pending tokens, the records say %d", p.id, r.now, c.PendingTokens, tokens[c.Replica])
					}
					if !c.Fresh || c.Waiting != p.seen.waiting || c.Running != p.seen.running {
						t.Fatalf("replica %s at %v: fresh %v waiting %d running %d, the last scrape read %+v",
							p.id, r.now, c.Fresh, c.Waiting, c.Running, p.seen)
					}
					waiting += c.Waiting
					pendingTokens += c.PendingTokens
				}
			})
			if res.Policy != tc.name || picks != len(res.Requests) {
				t.Fatalf("run labelled %q with %d picks for %d requests", res.Policy, picks, len(res.Requests))
			}
			if waiting == 0 || pendingTokens == 0 || res.Summary.PredictedHitRate == 0 {
				t.Fatalf("the profile never saw a queue (waiting %d, pending tokens %d) or a prediction: %v",
					waiting, pendingTokens, res.Summary)
			}
		})
	}
}

// A profile whose filters leave no replica gets every request refused, as
// the gateway answers 503, and no engine computes anything.
func TestProfileFilteredOutRejects(t *testing.T) {
	cfg := Config{
		Replicas: 2, Engine: defaultEngine(), Workload: w1(), Rate: 5, Requests: 40, Seed: 1,
		Scheduler: profileText(t, "gpu-only", `
apiVersion: llm-d.ai/v1alpha1
kind: EndpointPickerConfig
plugins:
- type: label-selector-filter
  parameters:
    matchLabels: {pool: gpu}
- type: queue-scorer
`),
	}
	res := mustRun(t, cfg)
	s := res.Summary
	if s.Requests != 40 || s.Rejected != 40 || res.Steps != 0 {
		t.Fatalf("%d of %d requests rejected, %d engine steps; want all rejected and none", s.Rejected, s.Requests, res.Steps)
	}
}

// A run takes a policy or a profile, not both.
func TestPolicyOrScheduler(t *testing.T) {
	cfg := Config{Replicas: 1, Engine: defaultEngine(), Workload: w1(), Rate: 1, Requests: 1,
		Policy: "cost_model", Scheduler: profile(t, "llmd-helm-default", helmDefault)}
	if _, err := Run(cfg); err == nil || !strings.Contains(err.Error(), `policy "cost_model" and scheduler "llmd-helm-default": set one`) {
		t.Fatalf("both set: %v", err)
	}
	cfg.Policy = ""
	if _, err := Run(cfg); err != nil {
		t.Fatalf("a profile alone: %v", err)
	}
}

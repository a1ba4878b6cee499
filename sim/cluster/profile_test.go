package cluster

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/inferrail/inferrail/model/policy"
	"github.com/inferrail/inferrail/model/sched"
	"github.com/inferrail/inferrail/sim/engine"
	"github.com/inferrail/inferrail/sim/workload"
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

// sameInstant groups the requests of res that arrived together (two or
// more at one instant) and returns, over them, the share that went to
// their group's most used replica, and how many groups there were.
func sameInstant(res *Result) (share float64, groups int) {
	at := map[time.Duration]map[int]int{}
	for _, r := range res.Requests {
		if at[r.Arrival] == nil {
			at[r.Arrival] = map[int]int{}
		}
		at[r.Arrival][r.Replica]++
	}
	top, n := 0, 0
	for _, g := range at {
		size, most := 0, 0
		for _, c := range g {
			size += c
			most = max(most, c)
		}
		if size > 1 {
			groups++
			top += most
			n += size
		}
	}
	if n == 0 {
		return 0, 0
	}
	return float64(top) / float64(n), groups
}

// h100Engine is the what-if's h100-8b preset with KV blocks of 256 tokens
// (sim/whatif, which imports this package): one H100 serving an 8B model,
// holding 431,872 tokens.
func h100Engine() engine.Config {
	eng := defaultEngine()
	eng.BlockSize, eng.NumBlocks = 256, 1687
	eng.MaxNumSeqs, eng.MaxBatchedTokens, eng.MaxModelLen = 1024, 8192, 128<<10
	eng.Latency = engine.Latency{
		PrefillToken: 32500 * time.Nanosecond, PrefillPair: 1.06, PrefillFixed: 6 * time.Millisecond,
		DecodeToken: 6 * time.Millisecond, DecodeSeq: 30 * time.Microsecond,
	}
	return eng
}

// spreadTicks returns the Mooncake trace at path with each group of
// requests sharing a timestamp spread evenly over the 3 seconds to the
// next tick, in their order.
func spreadTicks(t *testing.T, path string) *workload.Trace {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var lines []map[string]any
	group := map[float64]int{}
	for _, l := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		var m map[string]any
		if err := json.Unmarshal(l, &m); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, m)
		group[m["timestamp"].(float64)]++
	}
	var out bytes.Buffer
	seen := map[float64]int{}
	for _, m := range lines {
		ts := m["timestamp"].(float64)
		m["timestamp"] = ts + float64(3000*seen[ts]/group[ts])
		seen[ts]++
		l, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		out.Write(append(l, '\n'))
	}
	tr, err := workload.ReadTrace(&out, "spread", workload.TraceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// The Mooncake trace's timestamps are whole 3-second ticks, so its
// requests arrive in groups at one instant (300 requests in 35 groups
// here). llm-d's Helm default routes on the engines' scraped waiting
// queues and KV usage, which no decision of a group moves, and on the
// prefix match, which every replica that has served a request shares
// (every prompt starts with the same block): each group's scores stay
// those of its first decision but for the prefix bonus of what it has just
// routed, and max-score-picker sends nearly the whole group to one
// replica. cost_model and llm-d's sticky profile count what they have just
// routed, and spread the same groups.
func TestHelmDefaultHerdsSameInstantGroups(t *testing.T) {
	tr, err := workload.LoadTrace(mooncakeSlice, workload.TraceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		sch    *sched.Config
		lo, hi float64 // bounds on the share of a group on its most used replica
	}{
		{"llmd-helm-default", profile(t, "llmd-helm-default", helmDefault), 0.9, 1},
		{"cost_model", nil, 0, 0.6},
		{"llmd-sticky", profile(t, "llmd-sticky", sticky), 0, 0.6},
	} {
		cfg := traceConfig(tr)
		cfg.Engine = h100Engine()
		if tc.sch != nil {
			cfg.Policy, cfg.Scheduler = "", tc.sch
		}
		// The load each decision of a group sees, by replica: that of the
		// group's first decision.
		var at time.Duration = -1
		first := map[int]load{}
		moved := 0
		res := runWith(t, cfg, func(r *run, _ *policy.Request, cs []policy.Candidate, _ int) {
			if r.now != at {
				at = r.now
				clear(first)
			}
			for _, c := range cs {
				l := load{running: c.Running, waiting: c.Waiting, kvUsage: c.KVUsage}
				if f, ok := first[c.Replica]; !ok {
					first[c.Replica] = l
				} else if f != l {
					moved++
				}
			}
		})
		share, groups := sameInstant(&res)
		t.Logf("%s: %d groups, %.3f on the group's most used replica; p99 TTFT %v", tc.name, groups, share, res.Summary.P99TTFT)
		if moved != 0 {
			t.Errorf("%s: the scraped load moved %d times within a group", tc.name, moved)
		}
		if share < tc.lo || share > tc.hi {
			t.Errorf("%s: %.3f of a group on its most used replica, want %v to %v", tc.name, share, tc.lo, tc.hi)
		}
	}
	// The same requests arriving one by one over each tick are spread by
	// the scrapes between them: the Helm default's tail is the groups'.
	grouped := traceConfig(tr)
	grouped.Engine, grouped.Policy, grouped.Scheduler = h100Engine(), "", profile(t, "llmd-helm-default", helmDefault)
	spread := grouped
	spread.Workload = spreadTicks(t, mooncakeSlice)
	spread.Rate = spread.Workload.(*workload.Trace).Rate()
	g, s := mustRun(t, grouped).Summary, mustRun(t, spread).Summary
	t.Logf("grouped: p50 TTFT %v p99 %v; spread: p50 %v p99 %v", g.P50TTFT, g.P99TTFT, s.P50TTFT, s.P99TTFT)
	if 2*s.P50TTFT > g.P50TTFT || 3*s.P99TTFT > 2*g.P99TTFT {
		t.Errorf("spread over the ticks, p50 TTFT %v and p99 %v; grouped %v and %v: want less than half and two thirds",
			s.P50TTFT, s.P99TTFT, g.P50TTFT, g.P99TTFT)
	}
}

package cluster

import (
	"testing"
	"time"

	"github.com/inferrail/inferrail/model/policy"
	"github.com/inferrail/inferrail/model/sched"
)

// llmdProfile is llm-d's embedded profile named name, parsed.
func llmdProfile(t *testing.T, name string) *sched.Config {
	t.Helper()
	for _, p := range sched.LLMDProfiles() {
		if p.Name == name {
			return profileText(t, name, p.YAML)
		}
	}
	t.Fatalf("no llm-d profile %q", name)
	return nil
}

// Each of llm-d's profiles routes a small mixed workload to the end: every
// request is admitted and finishes. The precise composition runs on the
// engines' KV events, as it is deployed; the latency one with an SLO every
// replica can meet.
func TestLLMDProfilesRoute(t *testing.T) {
	for _, p := range sched.LLMDProfiles() {
		t.Run(p.Name, func(t *testing.T) {
			t.Parallel()
			cfg := Config{
				Replicas: 3, Engine: defaultEngine(), Scheduler: llmdProfile(t, p.Name),
				Workload: mixW1W6(), Rate: 10, Duration: 8 * time.Second, Seed: 5,
				KVEvents: p.Name == "llmd-precise",
				SLO:      policy.SLO{TTFT: time.Minute, TPOT: 10 * time.Second},
			}
			if raceEnabled {
				cfg.Duration = 2 * time.Second
			}
			res := mustRun(t, cfg)
			s := res.Summary
			if res.Policy != p.Name || s.Requests == 0 || s.Rejected != 0 || s.Lost != 0 {
				t.Fatalf("run %q: %d requests, %d rejected, %d lost", res.Policy, s.Requests, s.Rejected, s.Lost)
			}
			if p.Name == "llmd-precise" && s.Accuracy < 0.95 {
				t.Fatalf("the precise composition's predictions were exact for %.3f of requests; the KV-event index should make them so", s.Accuracy)
			}
			t.Logf("%s: %v", p.Name, s)
			for i := range res.Requests {
				if rec := &res.Requests[i]; rec.Finished == 0 {
					t.Fatalf("request %d never finished: %+v", i, *rec)
				}
			}
		})
	}
}

// llm-d's latency composition refuses requests whose SLO no busy replica
// can meet (a 1 ms first token), as its admitter does: the decision
// returns policy.ErrNotAdmitted and the request is refused before any
// engine sees it. The ones it admits found a replica idle or cold. With
// the generous SLO of TestLLMDProfilesRoute it refuses none.
func TestLLMDLatencyAdmission(t *testing.T) {
	cfg := Config{
		Replicas: 3, Engine: defaultEngine(), Scheduler: llmdProfile(t, "llmd-latency"),
		Workload: mixW1W6(), Rate: 10, Duration: 8 * time.Second, Seed: 5,
		SLO: policy.SLO{TTFT: time.Millisecond, TPOT: time.Millisecond},
	}
	if raceEnabled {
		cfg.Duration = 2 * time.Second
	}
	var refused, admitted int
	res := runWith(t, cfg, func(_ *run, _ *policy.Request, cs []policy.Candidate, _ int) { admitted++ })
	s := res.Summary
	refused = s.Rejected
	if refused == 0 || refused < s.Requests/2 || refused+admitted != s.Requests {
		t.Fatalf("%d of %d requests refused, %d admitted; want most refused", refused, s.Requests, admitted)
	}
	t.Logf("a 1 ms SLO: %d of %d requests refused", refused, s.Requests)
}

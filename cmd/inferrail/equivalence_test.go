package main

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/inferrail/inferrail/model/policy"
	"github.com/inferrail/inferrail/model/sched"
	"github.com/inferrail/inferrail/model/shadow"
)

// oldCode builds a shadow with model/policy's implementations, the code
// the policies were before they became built-in profiles.
func oldCode(s *shadow.Shadow) (policy.Policy, *rand.Rand, error) {
	if s.Scheduler != nil {
		return nil, nil, fmt.Errorf("%s is a profile of the config, which has no old code", s.Name)
	}
	p, err := s.Spec.Build()
	return p, s.Rand(), err
}

// Routed by the built-in profiles and replayed through the old policy
// code, the same seeded traffic gets the same picks, for all seven
// policies, through the gateway: each policy routes a run of its own with
// all seven as shadows and the shadow log on; the log's every decision is
// then replayed through model/policy's implementations, both the routing
// policy's pick (its random stream rebuilt from routing.seed, its state
// carried from decision to decision) and each shadow's (each from its
// stream), with the candidates exactly as the gateway offered them.
func TestProfilesRouteAsPolicies(t *testing.T) {
	sims, opts := zeroLatencySims(t, 3)
	const seed, requests = 42, 72
	for _, name := range sched.Policies() {
		path := filepath.Join(t.TempDir(), "shadow.jsonl")
		cfg := gatewayConfig(sims, opts)
		cfg.Routing.DefaultPolicy, cfg.Routing.Shadow, cfg.Routing.Seed = name, sched.Policies(), seed
		cfg.Routing.SessionAffinity = true
		cfg.Observability.ShadowLog = path
		addr, _, stop := startGatewayStoppable(t, cfg)
		rng := rand.New(rand.NewPCG(seed, 2))
		// Bursts of three at once, so that requests are in flight at
		// decisions; prompts share four prefixes, half of them name one
		// of six conversations.
		for burst := range requests / 3 {
			var wg sync.WaitGroup
			for k := range 3 {
				prompt := strings.Repeat(fmt.Sprintf("prefix %d ", rng.IntN(4)), 20+rng.IntN(60)) + fmt.Sprintf("question %d.%d", burst, k)
				session := ""
				if rng.IntN(2) == 0 {
					session = fmt.Sprint("conversation-", rng.IntN(6))
				}
				wg.Go(func() {
					status, _, pol, body := sendSession(t, addr, prompt, session)
					if status != 200 || pol != name {
						t.Errorf("%s: %d (%s): %s", name, status, pol, body)
					}
				})
			}
			wg.Wait()
		}
		stop() // the log is complete once serve returns
		lines := readShadowLog(t, path)

		// The profiles replay as they ran, and the old code picks alike.
		for what, build := range map[string]func(*shadow.Shadow) (policy.Policy, *rand.Rand, error){"the profiles": nil, "the old code": oldCode} {
			rp := shadow.Replay{Build: build}
			for i, l := range lines {
				mis, err := rp.Add(l)
				if err != nil || len(mis) > 0 {
					t.Fatalf("%s routing, replayed through %s: line %d: %v %v", name, what, i+1, err, mis)
				}
			}
			if rp.Decisions != requests || rp.Checked != requests*len(sched.Policies()) || rp.Mismatched != 0 {
				t.Fatalf("%s routing, replayed through %s: %d decisions, %d picks checked, %d mismatched; want %d decisions",
					name, what, rp.Decisions, rp.Checked, rp.Mismatched, requests)
			}
		}

		// The routing policy's own picks, through the old code.
		var routed policy.Policy
		for _, s := range lines[0].Models[0].Shadows {
			if s.Name == name {
				routed, _, _ = oldCode(&s)
			}
		}
		if routed == nil {
			t.Fatalf("%s: no spec of the routing policy in the config line", name)
		}
		draws := rand.New(rand.NewPCG(seed, 0)) // model 0's first arm
		picks := 0
		for _, l := range lines[1:] {
			d := l.Decision
			k, err := routed.Pick(&d.Request, d.Cands, draws)
			if err != nil || k != d.Routed || d.Policy != name {
				t.Fatalf("%s: decision %d: the gateway routed to candidate %d by %s, the old code picks %d (%v)", name, l.Seq, d.Routed, d.Policy, k, err)
			}
			picks++
		}
		t.Logf("%s: %d routed picks and %d shadow picks agree with the old code", name, picks, picks*len(sched.Policies()))
	}
}

// sendSession is complete with an x-session-id when session is not empty.
func sendSession(t *testing.T, addr, prompt, session string) (int, string, string, []byte) {
	if session == "" {
		return complete(t, addr, prompt)
	}
	return completeWith(t, addr, prompt, map[string]string{"X-Session-Id": session})
}

// readShadowLog parses every line of a shadow log; the first is its only
// config line.
func readShadowLog(t *testing.T, path string) []*shadow.Line {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []*shadow.Line
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, maxShadowLine)
	for sc.Scan() {
		l, err := shadow.ParseLine(sc.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, l)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(lines) == 0 || lines[0].Kind != shadow.KindConfig || len(lines[0].Models) != 1 {
		t.Fatalf("%d lines; the first is not the config line", len(lines))
	}
	for _, l := range lines[1:] {
		if l.Kind != shadow.KindDecision {
			t.Fatalf("a second config line: %+v", l)
		}
	}
	return lines
}

// A scheduling profile of the config runs as a shadow like a policy: the
// shadow log carries its document, and inferrail replay-shadow rebuilds it
// from there and replays every pick.
func TestReplayShadowOfAProfile(t *testing.T) {
	sims, opts := zeroLatencySims(t, 3)
	path := filepath.Join(t.TempDir(), "shadow.jsonl")
	cfg := gatewayConfig(sims, opts)
	cfg.Routing.Schedulers = map[string]any{
		"helm":   readYAML(t, llmdConfigs+"helm-default.yaml"),
		"sticky": readYAML(t, llmdConfigs+"sticky-until-saturated.yaml"),
	}
	cfg.Routing.DefaultPolicy, cfg.Routing.Shadow = "least_request", []string{"helm", "sticky", "cost_model"}
	cfg.Observability.ShadowLog = path
	addr, _, stop := startGatewayStoppable(t, parsed(t, cfg))
	for i := range 40 {
		if status, _, _, body := complete(t, addr, strings.Repeat(fmt.Sprint("doc ", i%4, " "), 80)); status != 200 {
			t.Fatalf("%d: %s", status, body)
		}
	}
	stop()
	lines := readShadowLog(t, path)
	if s := lines[0].Models[0].Shadows; len(s) != 3 || s[0].Scheduler == nil || s[1].Scheduler == nil || s[2].Scheduler != nil {
		t.Fatalf("config line %+v", lines[0].Models[0])
	}
	var out strings.Builder
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := replayShadow(f, &out); err != nil || !strings.Contains(out.String(), "40 decisions replayed, 120 picks checked, 0 mismatched") {
		t.Fatalf("replay-shadow: %v\n%s", err, out.String())
	}
}

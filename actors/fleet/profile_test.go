package fleet

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/inferrail/inferrail/config"
	"github.com/inferrail/inferrail/model/sched"
)

// lockedBuffer is a log destination safe for the fleet's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// epp is an EndpointPickerConfig of plugins of the types given.
func epp(types ...string) map[string]any {
	var plugins []any
	for _, t := range types {
		plugins = append(plugins, map[string]any{"type": t})
	}
	return map[string]any{"apiVersion": sched.APIVersion, "kind": sched.ConfigKind, "plugins": plugins}
}

// Each arm is built through the registry, and gathers what its profile
// routes on: a load profile the engines' reports, a prefix profile the
// estimate broadcast and the prompt's tokens, a baseline neither; the
// replicas carry their labels; a profile that reads KV events where no
// replica follows them is logged.
func TestArmsGatherWhatTheirProfilesNeed(t *testing.T) {
	var logs lockedBuffer
	cfg := testConfig(2, func(c *config.Config) {
		c.Routing.Schedulers = map[string]any{
			"load":    epp("queue-scorer"),
			"precise": epp("precise-prefix-cache-producer", "prefix-cache-scorer"),
		}
		c.Models[0].Split = map[string]int{"load": 40, "precise": 30, "round_robin": 30}
		c.Replicas[0].Labels = map[string]string{"llm-d.ai/role": "decode"}
	})
	f := start(t, cfg, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	m := f.table.Load().byName["m"]
	for _, want := range []struct {
		name            string
		estimates, load bool
	}{{"load", false, true}, {"precise", true, false}, {"round_robin", false, false}} {
		a, ok := m.armNamed(want.name)
		if !ok || a.estimates != want.estimates || a.load != want.load || a.ms.estimates != want.estimates || a.ms.load != want.load {
			t.Errorf("arm %s: %+v, want estimates %t load %t", want.name, a, want.estimates, want.load)
		}
		if _, isSched := a.ms.policy.(*sched.Scheduler); !isSched || a.ms.policy.Name() != want.name {
			t.Errorf("arm %s is routed by %T %s", want.name, a.ms.policy, a.ms.policy.Name())
		}
	}
	if !f.UsesEstimates("m") {
		t.Error("the prefix profile's prompts are not tokenized")
	}
	if s, _ := f.Snapshot("r0"); s.Labels["llm-d.ai/role"] != "decode" {
		t.Errorf("r0's labels %v", s.Labels)
	}
	if got := logs.String(); !strings.Contains(got, "the profile reads the engines' KV events") || !strings.Contains(got, "policy=precise") {
		t.Errorf("no warning of the KV events: %s", got)
	}

	// A replica that follows its engine's events: no warning.
	logs2 := &lockedBuffer{}
	cfg = testConfig(1, func(c *config.Config) {
		c.Routing.Scheduler = epp("precise-prefix-cache-producer", "prefix-cache-scorer")
		c.Replicas[0].KVEvents = "tcp://10.0.0.1:5557"
	})
	start(t, cfg, Options{Logger: slog.New(slog.NewTextHandler(logs2, nil))})
	if strings.Contains(logs2.String(), "KV events") {
		t.Errorf("warned with a replica following its events: %s", logs2.String())
	}
}

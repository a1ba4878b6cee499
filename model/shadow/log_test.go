package shadow

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/inferrail/inferrail/model/cost"
	"github.com/inferrail/inferrail/model/policy"
	"github.com/inferrail/inferrail/model/sched"
)

// logOf runs every policy in shadow over n random decisions, as the
// gateway's shadows do, and returns the log's lines.
func logOf(t *testing.T, n int) [][]byte {
	t.Helper()
	cfg := Shadows{Model: "m", CostModel: cost.Default()}
	for k, name := range names {
		cfg.Shadows = append(cfg.Shadows, Shadow{Spec: policy.Spec{Name: name}, Seed: 7, Stream: uint64(k)})
	}
	var ps []policy.Policy
	var rngs []*rand.Rand
	for i := range cfg.Shadows {
		p, rng, err := cfg.Shadows[i].Build()
		if err != nil {
			t.Fatal(err)
		}
		ps, rngs = append(ps, p), append(rngs, rng)
	}
	marshal := func(l *Line) []byte {
		b, err := json.Marshal(l)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	lines := [][]byte{marshal(&Line{Kind: KindConfig, Gen: 1, Models: []Shadows{cfg}})}
	data := rand.New(rand.NewPCG(1, 2))
	for i := range n {
		d := decision(data)
		l := &Line{Kind: KindDecision, Gen: 1, Model: "m", Seq: uint64(i + 1), Decision: d}
		for k, p := range ps {
			o, err := SafeCompare(p, rngs[k], cfg.CostModel, d)
			l.Picks = append(l.Picks, PickOf(names[k], o, err))
		}
		lines = append(lines, marshal(l))
	}
	return lines
}

// A log replays to every pick; a changed price is a mismatch, and a
// missing or unknown line an error.
func TestReplay(t *testing.T) {
	lines := logOf(t, 200)
	replay := func(lines [][]byte) (*Replay, []string, error) {
		var r Replay
		var mis []string
		for _, b := range lines {
			l, err := ParseLine(b)
			if err != nil {
				return &r, mis, err
			}
			m, err := r.Add(l)
			mis = append(mis, m...)
			if err != nil {
				return &r, mis, err
			}
		}
		return &r, mis, nil
	}
	r, mis, err := replay(lines)
	if err != nil || len(mis) > 0 || r.Decisions != 200 || r.Checked != 200*len(names) {
		t.Fatalf("replay: %v, %q, %d decisions, %d checked", err, mis, r.Decisions, r.Checked)
	}

	changed := append([][]byte(nil), lines...)
	changed[50] = []byte(strings.Replace(string(lines[50]), `"shadow_ns":`, `"shadow_ns":1`, 1))
	if _, mis, err := replay(changed); err != nil || len(mis) != 1 || !strings.Contains(mis[0], "seq 50") {
		t.Fatalf("changed price: %v, %q", err, mis)
	}
	missing := append(append([][]byte(nil), lines[:50]...), lines[51:]...)
	if _, _, err := replay(missing); err == nil || !strings.Contains(err.Error(), "seq 51 follows 49") {
		t.Fatalf("missing line: %v", err)
	}
	if _, _, err := replay(lines[1:]); err == nil || !strings.Contains(err.Error(), "no config line") {
		t.Fatalf("no config line: %v", err)
	}
}

func TestParseLineRejects(t *testing.T) {
	for _, s := range []string{
		``, `{}`, `[]`, `{"kind":"config","gen":1}`, `{"kind":"decision","gen":1,"model":"m","seq":1,"picks":[{}]}`,
		`{"kind":"other"}`, `{"kind":"config","gen":1,"models":[{"model":"m","shadows":[{"name":"p2c"}]}]} {}`,
		`{"kind":"config","gen":1,"extra":1,"models":[{"model":"m","shadows":[{"name":"p2c"}]}]}`,
	} {
		if _, err := ParseLine([]byte(s)); err == nil {
			t.Errorf("%s: accepted", s)
		}
	}
}

// Malformed lines never panic the parser, nor the replay of what parses.
func FuzzParseLine(f *testing.F) {
	for _, b := range logOf(&testing.T{}, 3) {
		f.Add(b)
	}
	f.Add([]byte(`{"kind":"decision","gen":1,"model":"m","seq":1,"decision":{"Routed":5},"picks":[{"policy":"p2c"}]}`))
	f.Add([]byte(`{"kind":"config","gen":1,"models":[{"model":"m","cost_model":{},"shadows":[{"name":"helm","seed":1,"stream":2,` +
		`"scheduler":{"apiVersion":"llm-d.ai/v1alpha1","kind":"EndpointPickerConfig","plugins":[{"type":"queue-scorer"}]}}]}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := ParseLine(b)
		if err != nil {
			return
		}
		if l.Kind == KindConfig {
			return // a config line may ask for sketches of any size
		}
		var r Replay
		r.built = map[replayKey]*replayed{{l.Gen, l.Model}: {names: []string{"p2c"}, ps: []policy.Policy{policy.P2C{}},
			rngs: []*rand.Rand{rand.New(rand.NewPCG(1, 1))}, cm: cost.Default()}}
		r.Add(l)
	})
}

// A shadow that is a scheduling profile of the config is written with its
// document, and builds again from the config line as it ran; one whose
// document does not decode fails to build, naming it.
func TestProfileShadowBuilds(t *testing.T) {
	doc := map[string]any{"apiVersion": "llm-d.ai/v1alpha1", "kind": "EndpointPickerConfig",
		"plugins": []any{map[string]any{"type": "queue-scorer"}, map[string]any{"type": "kv-cache-utilization-scorer"}}}
	cfg, _, err := sched.Parse("helm", doc)
	if err != nil {
		t.Fatal(err)
	}
	l := &Line{Kind: KindConfig, Gen: 1, Models: []Shadows{{Model: "m", CostModel: cost.Default(), Shadows: []Shadow{
		{Spec: policy.Spec{Name: "helm"}, Scheduler: cfg.Document(), Seed: 3, Stream: 4},
		{Spec: policy.Spec{Name: "p2c"}, Seed: 3, Stream: 5},
	}}}}
	b, err := json.Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseLine(b)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"helm", "p2c"} {
		p, _, err := back.Models[0].Shadows[i].Build()
		if s, ok := p.(*sched.Scheduler); err != nil || !ok || s.Name() != want {
			t.Fatalf("shadow %d built %T %v, %v", i, p, p, err)
		}
	}
	bad := Shadow{Spec: policy.Spec{Name: "helm"}, Scheduler: map[string]any{"apiVersion": "llm-d.ai/v1alpha1", "kind": "EndpointPickerConfig",
		"plugins": []any{map[string]any{"type": "nope"}}}}
	if _, _, err := bad.Build(); err == nil || !strings.Contains(err.Error(), "scheduler helm: plugins[0].type") {
		t.Fatalf("a bad document built: %v", err)
	}
}

package admin

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/inferrail/inferrail/actors/fleet"
	"github.com/inferrail/inferrail/actors/replica"
	"github.com/inferrail/inferrail/model/openai"
	"github.com/inferrail/inferrail/transport/telemetry"
)

type replicas []*replica.Snapshot

func (r replicas) Replicas() []*replica.Snapshot { return r }

// /admin/replicas shows how many prompts' counts were checked against the
// engine's, over every model and policy, and the share that agreed; null
// before the first.
func TestReplicasPromptAgreement(t *testing.T) {
	fleet := replicas{
		replica.NewHandle("a", "http://a", []string{"m", "n"}, replica.NewCounters(0, 0)).Snapshot(),
		replica.NewHandle("b", "http://b", []string{"m"}, replica.NewCounters(0, 0)).Snapshot(),
	}
	met := telemetry.New(fleet)
	for range 3 {
		met.Replica("a", "m", "cost_model").Prompt.Checked.Inc()
	}
	met.Replica("a", "m", "kv_aware").Prompt.Checked.Inc()
	met.Replica("a", "m", "kv_aware").Prompt.Mismatched.Inc()
	met.Replica("a", "n", "cost_model").Prompt.Checked.Inc()
	met.Replica("b", "m", "cost_model") // routed, nothing checked
	code, b := get(New(fleet, met), "/admin/replicas")
	var page struct {
		Replicas []struct {
			ID        string   `json:"id"`
			Checked   *uint64  `json:"prompt_tokens_checked"`
			Agreement *float64 `json:"prompt_tokens_agreement"`
		} `json:"replicas"`
	}
	if err := json.Unmarshal(b, &page); code != 200 || err != nil || len(page.Replicas) != 2 {
		t.Fatalf("%d %v %s", code, err, b)
	}
	a, bv := page.Replicas[0], page.Replicas[1]
	if a.Checked == nil || *a.Checked != 5 || a.Agreement == nil || *a.Agreement != 0.8 {
		t.Errorf("a: %s", b)
	}
	if bv.Checked == nil || *bv.Checked != 0 || bv.Agreement != nil {
		t.Errorf("b: %s", b)
	}
}

type sources []fleet.Source

func (s sources) Sources() []fleet.Source { return s }

// /admin/replicas lists the discovery sources with their members and,
// while one cannot refresh, why and since when; without sources the
// field is absent.
func TestReplicasDiscovery(t *testing.T) {
	since := time.Date(2026, 12, 1, 16, 0, 0, 0, time.UTC)
	srcs := sources{
		{Name: "file", Members: 2, Updated: since},
		{Name: "kubernetes", Failing: "RBAC forbids the gateway to list and watch pods in namespace x", Since: since},
	}
	met := telemetry.New(replicas{})
	code, b := get(New(replicas{}, met).WithSources(srcs), "/admin/replicas")
	var page struct {
		Discovery []map[string]any `json:"discovery"`
	}
	if err := json.Unmarshal(b, &page); code != 200 || err != nil || len(page.Discovery) != 2 {
		t.Fatalf("%d %v %s", code, err, b)
	}
	f, k := page.Discovery[0], page.Discovery[1]
	if f["name"] != "file" || f["members"] != 2.0 || f["updated"] != "2026-12-01T16:00:00Z" || f["failing"] != nil {
		t.Errorf("file: %v", f)
	}
	if k["failing"] != srcs[1].Failing || k["failing_since"] != "2026-12-01T16:00:00Z" || k["updated"] != nil {
		t.Errorf("kubernetes: %v", k)
	}
	if _, b := get(New(replicas{}, met), "/admin/replicas"); strings.Contains(string(b), "discovery") {
		t.Errorf("without sources: %s", b)
	}
}

// /admin/replicas shows each replica's predictions by result, summed over
// its models, with the exact share and the predicted and delivered hit
// rates of the compared ones; null before the first.
func TestReplicasPrediction(t *testing.T) {
	fleet := replicas{
		replica.NewHandle("a", "http://a", []string{"m", "n"}, replica.NewCounters(0, 0)).Snapshot(),
		replica.NewHandle("b", "http://b", []string{"m"}, replica.NewCounters(0, 0)).Snapshot(),
	}
	met := telemetry.New(fleet)
	u := func(c int) openai.Usage { return openai.Usage{CachedTokens: c, Details: true} }
	met.Replica("a", "m", "cost_model").Prediction.Compare(met.Model("m"), 100, 64, u(64), true)
	met.Replica("a", "n", "cost_model").Prediction.Compare(met.Model("n"), 100, 32, u(0), true)
	met.Replica("a", "n", "cost_model").Prediction.Compare(met.Model("n"), 100, 32, openai.Usage{}, false)
	met.Replica("b", "m", "cost_model")
	code, b := get(New(fleet, met), "/admin/replicas")
	var page struct {
		Replicas []struct {
			Prediction struct {
				Exact, Over, Under, Unknown uint64
				Exactness                   *float64 `json:"exactness"`
				Predicted                   *float64 `json:"predicted_hit_rate"`
				Delivered                   *float64 `json:"delivered_hit_rate"`
			} `json:"prediction"`
		} `json:"replicas"`
	}
	if err := json.Unmarshal(b, &page); code != 200 || err != nil || len(page.Replicas) != 2 {
		t.Fatalf("%d %v %s", code, err, b)
	}
	a, bv := page.Replicas[0].Prediction, page.Replicas[1].Prediction
	if a.Exact != 1 || a.Over != 1 || a.Unknown != 1 || a.Exactness == nil || *a.Exactness != 0.5 ||
		a.Predicted == nil || *a.Predicted != 0.48 || a.Delivered == nil || *a.Delivered != 0.32 {
		t.Errorf("a: %s", b)
	}
	if bv.Exactness != nil || bv.Predicted != nil || bv.Delivered != nil {
		t.Errorf("b: %s", b)
	}
}

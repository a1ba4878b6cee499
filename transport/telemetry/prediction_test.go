package telemetry

import (
	"strings"
	"testing"
	"time"

	"github.com/inferrail/inferrail/model/openai"
)

// Each comparison lands in one result, the error histogram and the
// delivered counter take only the compared ones, and /admin/replicas'
// sums agree with the page.
func TestPredictionCompare(t *testing.T) {
	f := &fakeFleet{}
	f.set("r0")
	r := New(f)
	m := r.Model("m")
	p := r.Replica("r0", "m", "cost_model").Prediction
	if p != r.Replica("r0", "m", "least_request").Prediction {
		t.Fatal("two policies of one (replica, model) have two predictions")
	}
	details := func(c int) openai.Usage { return openai.Usage{PromptTokens: 64, CachedTokens: c, Details: true} }
	p.Compare(m, 64, 32, details(32), true)                    // exact
	p.Compare(m, 64, 48, details(32), true)                    // over by 16
	p.Compare(m, 64, 0, details(16), true)                     // under by 16
	p.Compare(m, 64, 16, openai.Usage{PromptTokens: 64}, true) // no details: unknown
	p.Compare(m, 64, 16, openai.Usage{}, false)                // no usage: unknown
	a := r.Accuracy("r0")
	want := Accuracy{Exact: 1, Over: 1, Under: 1, Unknown: 2, PromptTokens: 192, PredictedCached: 80, DeliveredCached: 80}
	if a != want {
		t.Fatalf("accuracy %+v, want %+v", a, want)
	}
	if got := m.DeliveredCached.Get(); got != 80 {
		t.Fatalf("delivered %d", got)
	}
	pg := page(r)
	for _, line := range []string{
		`inferrail_prediction_total{model="m",replica="r0",result="exact"} 1`,
		`inferrail_prediction_total{model="m",replica="r0",result="unknown"} 2`,
		`inferrail_prediction_error_tokens_bucket{model="m",replica="r0",le="-16"} 1`,
		`inferrail_prediction_error_tokens_bucket{model="m",replica="r0",le="-1"} 1`,
		`inferrail_prediction_error_tokens_bucket{model="m",replica="r0",le="0"} 2`,
		`inferrail_prediction_error_tokens_bucket{model="m",replica="r0",le="16"} 3`,
		`inferrail_prediction_error_tokens_count{model="m",replica="r0"} 3`,
		`inferrail_delivered_cached_tokens_total{model="m"} 80`,
	} {
		if !strings.Contains(pg, line+"\n") {
			t.Errorf("the page lacks %s", line)
		}
	}
	if r.Accuracy("gone") != (Accuracy{}) {
		t.Fatal("an unknown replica has predictions")
	}
}

// inferrail_model_healthy_replicas counts, per model, the replicas that are
// healthy and not ejected; a model whose every replica is down reads 0.
func TestModelHealthyReplicas(t *testing.T) {
	f := &fakeFleet{}
	f.set("a", "b", "c")
	f.snaps[0].Models = []string{"m", "n"}
	f.snaps[1].Models = []string{"m"}
	f.snaps[2].Models = []string{"n"}
	f.snaps[2].Healthy = false
	f.snaps[0].EjectedUntil = time.Now().Add(time.Hour)
	pg := page(New(f))
	for _, line := range []string{`inferrail_model_healthy_replicas{model="m"} 1`, `inferrail_model_healthy_replicas{model="n"} 0`} {
		if !strings.Contains(pg, line+"\n") {
			t.Errorf("the page lacks %s", line)
		}
	}
}

package agree

import (
	"strings"
	"testing"
	"time"

	"github.com/inferrail/inferrail/sim"
)

// The matrix has a row per point, variant, events and instance count, in
// that order; the control's ratio is 1 and its disagreement 0, and a
// second instance is asked about every request.
func TestRun(t *testing.T) {
	pts, err := Points()
	if err != nil {
		t.Fatal(err)
	}
	rows, err := Run(Options{Points: pts[:1], Variants: Variants([]string{"cost_model"}, []string{"cost_model"}),
		Instances: []int{1, 2}, Replicas: 3, Engine: sim.DefaultOptions().Engine,
		Duration: 20 * time.Second, WarmUp: 5 * time.Second, Seeds: []uint64{1}, Jobs: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2*2*2 {
		t.Fatalf("%d rows, want 8", len(rows))
	}
	for i, r := range rows {
		wantN := []int{1, 2}[i%2]
		wantPolicy := []string{"cost_model", "cost_model+cold_rendezvous"}[i/4]
		if r.Instances != wantN || r.Policy != wantPolicy || r.Events != (i/2%2 == 1) || r.Requests == 0 {
			t.Fatalf("row %d: %+v", i, r)
		}
		if r.Instances == 1 && (r.Ratio != 1 || r.Disagreement != 0) {
			t.Fatalf("control row %d: %+v", i, r)
		}
	}
	var b strings.Builder
	if err := Write(&b, rows); err != nil || strings.Count(b.String(), "\n") != 2+len(rows) {
		t.Fatalf("table: %v\n%s", err, b.String())
	}
}

package policy

import "testing"

// A Spec read from a file cannot make Build allocate without bound.
func TestSpecBounds(t *testing.T) {
	p := DefaultCostModelParams()
	p.HotPrefix.SketchWidth = 1 << 40
	if _, err := (Spec{Name: "cost_model", CostModel: &p}).Build(); err == nil {
		t.Fatal("a sketch of 2^40 counters was built")
	}
	p = DefaultCostModelParams()
	p.SessionSlots = 1 << 40
	if _, err := (Spec{Name: "cost_model", CostModel: &p}).Build(); err == nil {
		t.Fatal("a session table of 2^40 slots was built")
	}
	p = DefaultCostModelParams()
	if _, err := (Spec{Name: "cost_model", CostModel: &p}).Build(); err != nil {
		t.Fatalf("the defaults: %v", err)
	}
}

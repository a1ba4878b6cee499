package flow

import (
	"testing"
	"time"
)

// TestSLODeadlineOrder: Bands under EDF given SLODeadline leave as llm-d's
// slo-deadline-ordering-policy orders: earliest due first, requests
// without an objective after every other, ties by arrival.
func TestSLODeadlineOrder(t *testing.T) {
	q := NewBands[string](Options{Max: 10, EDF: true})
	t0 := time.Unix(1000, 0)
	for _, r := range []struct {
		name string
		slo  int // milliseconds; 0 for none
		at   time.Duration
	}{
		{"none-1", 0, 0},
		{"loose", 5000, 0},
		{"tight-late", 100, 50 * time.Millisecond}, // due at 150ms
		{"none-2", 0, 1 * time.Millisecond},
		{"tight", 200, 0}, // due at 200ms
		{"tie", 150, 0},   // due at 150ms, after tight-late in arrival
		{"none-3", 0, 2 * time.Millisecond},
	} {
		if _, _, ok := q.Push(0, 1, r.name, SLODeadline(t0.Add(r.at), time.Duration(r.slo)*time.Millisecond)); !ok {
			t.Fatal("push refused")
		}
	}
	var got []string
	for {
		v, ok := q.Pop()
		if !ok {
			break
		}
		got = append(got, v)
	}
	want := []string{"tight-late", "tie", "tight", "loose", "none-1", "none-2", "none-3"}
	for i := range want {
		if i >= len(got) || got[i] != want[i] {
			t.Fatalf("order %v, want %v", got, want)
		}
	}
}

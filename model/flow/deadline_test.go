package flow

import (
	"testing"
	"time"
)

func TestParseSLOMillis(t *testing.T) {
	f := func(in string, want time.Duration, wantOK bool) {
		t.Helper()
		got, ok := ParseSLOMillis([]byte(in))
		if got != want || ok != wantOK {
			t.Errorf("ParseSLOMillis(%q) = %v, %v; want %v, %v", in, got, ok, want, wantOK)
		}
	}
	f("250", 250*time.Millisecond, true)
	f(" 0\t", 0, true)
	f("", 0, false)
	f("  ", 0, false)
	f("-1", 0, false)
	f("1.5", 0, false) // llm-d's ordering reads whole milliseconds
	f("1e3", 0, false)
	f("abc", 0, false)
	f("9223372036854775807", 0, false) // no Duration holds it
	f("9223372036854", 9223372036854*time.Millisecond, true)
}

// TestSLODeadlineOrder: Bands under EDF given SLODeadline leave as llm-d's
// slo-deadline-ordering-policy orders: earliest due first, requests
// without a valid objective after every other, ties by arrival.
func TestSLODeadlineOrder(t *testing.T) {
	q := NewBands[string](Options{Max: 10, EDF: true})
	t0 := time.Unix(1000, 0)
	for _, r := range []struct {
		name, slo string
		at        time.Duration
	}{
		{"none-1", "", 0},
		{"loose", "5000", 0},
		{"tight-late", "100", 50 * time.Millisecond}, // due at 150ms
		{"bad", "x", 1 * time.Millisecond},
		{"tight", "200", 0}, // due at 200ms
		{"tie", "150", 0},   // due at 150ms, after tight-late in arrival
		{"none-2", "", 2 * time.Millisecond},
	} {
		if _, _, ok := q.Push(0, 1, r.name, SLODeadline(t0.Add(r.at), []byte(r.slo))); !ok {
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
	want := []string{"tight-late", "tie", "tight", "loose", "none-1", "bad", "none-2"}
	for i := range want {
		if i >= len(got) || got[i] != want[i] {
			t.Fatalf("order %v, want %v", got, want)
		}
	}
}

func FuzzParseSLOMillis(f *testing.F) {
	for _, s := range []string{"250", " 0 ", "-1", "", "1.5", "99999999999999999999", "+5", "0x10"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		d, ok := ParseSLOMillis(b)
		if !ok && d != 0 || d < 0 || ok && d%time.Millisecond != 0 {
			t.Fatalf("ParseSLOMillis(%q) = %v, %v", b, d, ok)
		}
		if at := SLODeadline(time.Unix(0, 0), b); ok != !at.Equal(NoDeadline) && d < time.Duration(1<<62) {
			t.Fatalf("SLODeadline(%q) = %v with ok %v", b, at, ok)
		}
	})
}

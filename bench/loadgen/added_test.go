package loadgen

import (
	"testing"
	"time"
)

func TestMedian(t *testing.T) {
	f := func(want time.Duration, xs ...time.Duration) {
		t.Helper()
		if got := Median(xs); got != want {
			t.Errorf("Median(%v) = %v, want %v", xs, got, want)
		}
	}
	f(0)
	f(5, 5)
	f(2, 3, 1, 2)
	f(2, 1, 3)            // mean of the middle two of 1, 3
	f(25, 40, 10, 20, 30) // mean of 20 and 30
	f(-2, -1, -5, -2)
	xs := []time.Duration{3, 1, 2}
	Median(xs)
	if xs[0] != 3 {
		t.Fatal("Median sorted its input")
	}
}

func TestAddedPerRound(t *testing.T) {
	us := time.Microsecond
	got, err := AddedPerRound([]time.Duration{300 * us, 250 * us, 180 * us}, []time.Duration{200 * us, 210 * us, 190 * us})
	if err != nil {
		t.Fatal(err)
	}
	want := []time.Duration{100 * us, 40 * us, -10 * us}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("AddedPerRound = %v, want %v", got, want)
		}
	}
	if m := Median(got); m != 40*us {
		t.Fatalf("median added = %v", m)
	}
	if _, err := AddedPerRound(make([]time.Duration, 2), make([]time.Duration, 3)); err == nil {
		t.Fatal("mismatched rounds: no error")
	}
}

func TestRatio(t *testing.T) {
	f := func(a, b time.Duration, want float64, wantOK bool) {
		t.Helper()
		got, ok := Ratio(a, b)
		if got != want || ok != wantOK {
			t.Errorf("Ratio(%v, %v) = %v, %v; want %v, %v", a, b, got, ok, want, wantOK)
		}
	}
	f(120, 100, 1.2, true)
	f(50, 100, 0.5, true)
	f(-10, 100, -0.1, true)
	f(100, 0, 0, false)
	f(100, -5, 0, false)
}

package loadgen

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

func TestScheduleAt(t *testing.T) {
	f := func(s Schedule, i int, want time.Duration) {
		t.Helper()
		if got := s.At(i); got != want {
			t.Errorf("%+v.At(%d) = %v, want %v", s, i, got, want)
		}
	}
	s := Schedule{Rate: 2000, N: 10000}
	f(s, 0, 0)
	f(s, 1, 500*time.Microsecond)
	f(s, 3, 1500*time.Microsecond)
	f(s, 9999, 4999500*time.Microsecond)
	f(s, 2_000_000, 1000*time.Second) // no drift however far
	// A rate that does not divide a second: each offset is rounded on its
	// own, so every third one is exact.
	s = Schedule{Rate: 3, N: 4}
	f(s, 1, 333333333)
	f(s, 2, 666666666)
	f(s, 3, time.Second)
	f(s, 300, 100*time.Second)
	if got := (Schedule{Rate: 2000, N: 10000}).Span(); got != 4999500*time.Microsecond {
		t.Errorf("Span = %v", got)
	}
	if got := (Schedule{Rate: 2000}).Interval(); got != 500*time.Microsecond {
		t.Errorf("Interval = %v", got)
	}
	// Due times never go backwards.
	s = Schedule{Rate: 7919, N: 100000}
	for i := 1; i < s.N; i++ {
		if s.At(i) < s.At(i-1) {
			t.Fatalf("At(%d) = %v before At(%d) = %v", i, s.At(i), i-1, s.At(i-1))
		}
	}
}

func TestScheduleValidate(t *testing.T) {
	for _, s := range []Schedule{{Rate: 0, N: 1}, {Rate: -1, N: 1}, {Rate: 100, N: 0}, {Rate: 1e9, N: 1}} {
		if s.Validate() == nil {
			t.Errorf("%+v: no error", s)
		}
	}
	if err := (Schedule{Rate: 2000, N: 1}).Validate(); err != nil {
		t.Error(err)
	}
}

// TestRunOpenLoop: every request is sent once, never before it is due,
// latency counts from the due time, and a request that takes long delays
// no later one (the loop is open).
func TestRunOpenLoop(t *testing.T) {
	s := Schedule{Rate: 1000, N: 200}
	var calls atomic.Int64
	seen := make([]atomic.Bool, s.N)
	var start time.Time
	boom := errors.New("boom")
	r, err := RunOpenLoop(context.Background(), s, func(_ context.Context, i int) error {
		calls.Add(1)
		if seen[i].Swap(true) {
			t.Errorf("request %d sent twice", i)
		}
		switch i {
		case 0:
			start = time.Now()
			time.Sleep(300 * time.Millisecond) // longer than the whole schedule
		case 7, 9:
			return boom
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if calls.Load() != int64(s.N) {
		t.Fatalf("%d calls, want %d", calls.Load(), s.N)
	}
	if r.Errors() != 2 || len(r.OK()) != s.N-2 || r.ErrorKinds()["boom"] != 2 {
		t.Fatalf("errors %d, ok %d, kinds %v", r.Errors(), len(r.OK()), r.ErrorKinds())
	}
	for i := range s.N {
		if r.Lag[i] < 0 {
			t.Fatalf("request %d sent %v before it was due", i, -r.Lag[i])
		}
		if r.Latency[i] < r.Lag[i] {
			t.Fatalf("request %d: latency %v below its lag %v", i, r.Latency[i], r.Lag[i])
		}
	}
	if r.Latency[0] < 300*time.Millisecond {
		t.Fatalf("request 0 took 300ms but measured %v", r.Latency[0])
	}
	if !start.After(r.Start.Add(-time.Millisecond)) {
		t.Fatalf("request 0 ran at %v, before the start %v", start, r.Start)
	}
	// Request 50 is due 50ms in, while request 0 still runs: a closed loop
	// would have held it back 250ms. Allow a loaded machine 150ms of lag.
	if r.Lag[50] > 150*time.Millisecond {
		t.Fatalf("request 50 waited %v for request 0", r.Lag[50])
	}
	// Sends never come early, so the rate cannot exceed 1000/s by more than
	// rounding; a closed loop would have sent at well under 1000/s too, so
	// the lower bound only catches a schedule that fell far behind.
	if rate := r.AchievedRate(); rate < 300 || rate > 1010 {
		t.Fatalf("achieved rate %.0f/s, want about 1000/s", rate)
	}
}

func TestRunOpenLoopCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	s := Schedule{Rate: 1000, N: 1000}
	var calls atomic.Int64
	r, err := RunOpenLoop(ctx, s, func(ctx context.Context, i int) error {
		if calls.Add(1) == 10 {
			cancel()
		}
		return ctx.Err()
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
	if n := calls.Load(); n >= int64(s.N) {
		t.Fatalf("%d of %d sent after the cancel", n, s.N)
	}
	if r.Errors() < s.N-int(calls.Load()) {
		t.Fatalf("%d errors, want at least the %d requests not sent", r.Errors(), s.N-int(calls.Load()))
	}
}

func TestRunOpenLoopRejects(t *testing.T) {
	if _, err := RunOpenLoop(context.Background(), Schedule{}, nil); err == nil {
		t.Fatal("a zero schedule ran")
	}
}

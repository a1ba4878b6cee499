package cost

import (
	"testing"
	"time"
)

func TestPrefillQueueDrainsInRealTime(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var q PrefillQueue
	if got := q.Queued(t0); got != 0 {
		t.Fatalf("empty queue: %v", got)
	}
	q.Add(t0, 100*time.Millisecond)
	q.Add(t0, 50*time.Millisecond)
	if got := q.Queued(t0); got != 150*time.Millisecond {
		t.Fatalf("after two adds: %v, want 150ms", got)
	}
	if got := q.Queued(t0.Add(40 * time.Millisecond)); got != 110*time.Millisecond {
		t.Fatalf("40ms later: %v, want 110ms", got)
	}
	// An idle gap does not bank credit: a later add starts from now.
	if got := q.Queued(t0.Add(time.Second)); got != 0 {
		t.Fatalf("drained: %v", got)
	}
	q.Add(t0.Add(time.Second), 10*time.Millisecond)
	if got := q.Queued(t0.Add(time.Second)); got != 10*time.Millisecond {
		t.Fatalf("after the gap: %v, want 10ms", got)
	}
	if q.Waiting() != 3 {
		t.Fatalf("waiting %d, want 3", q.Waiting())
	}
}

func TestPrefillQueueEmptyOnceAllHaveFirstByte(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var q PrefillQueue
	q.Add(t0, time.Second)
	q.Add(t0, time.Second)
	q.Done(t0.Add(10 * time.Millisecond))
	if got := q.Queued(t0.Add(10 * time.Millisecond)); got != 1990*time.Millisecond {
		t.Fatalf("one still waiting: %v", got)
	}
	q.Done(t0.Add(20 * time.Millisecond))
	if got := q.Queued(t0.Add(20 * time.Millisecond)); got != 0 {
		t.Fatalf("all have their first byte: %v, want 0", got)
	}
	q.Done(t0) // an extra Done never goes negative
	if q.Waiting() != 0 {
		t.Fatalf("waiting %d", q.Waiting())
	}
	q.Add(t0.Add(time.Second), time.Millisecond)
	if got := q.Queued(t0.Add(time.Second)); got != time.Millisecond {
		t.Fatalf("fresh add after drain: %v", got)
	}
}

package jsonl

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
)

// A full queue drops what Log gives it instead of waiting for the disk.
func TestLogNeverWaits(t *testing.T) {
	set := metrics.NewSet()
	w := newWriter(2, "l", set) // nothing drains the queue
	for range 5 {
		w.Log(map[string]int{"x": 1})
	}
	if len(w.q.queue) != 2 || w.q.dropped.Get() != 3 {
		t.Fatalf("queued %d, dropped %d; want 2 and 3", len(w.q.queue), w.q.dropped.Get())
	}
	w.Log(func() {}) // does not marshal
	if w.q.failed.Get() != 1 {
		t.Fatalf("failed %d; want 1", w.q.failed.Get())
	}
}

// Put waits for room rather than dropping: every value put is on disk, in
// order, after Close. A Put that waits past its context, or comes after
// Close, fails and counts as dropped.
func TestPutWaits(t *testing.T) {
	set := metrics.NewSet()
	path := filepath.Join(t.TempDir(), "l.jsonl")
	w, err := Open(path, 1, "l", set)
	if err != nil {
		t.Fatal(err)
	}
	const n = 2000
	for i := range n {
		if err := w.Put(context.Background(), i); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Put(context.Background(), 1); !errors.Is(err, ErrClosed) {
		t.Fatalf("Put after Close: %v", err)
	}
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) != n || lines[0] != "0" || lines[n-1] != "1999" || w.q.written.Get() != n || w.q.dropped.Get() != 1 {
		t.Fatalf("%d lines (%s..%s), %d written, %d dropped", len(lines), lines[0], lines[len(lines)-1], w.q.written.Get(), w.q.dropped.Get())
	}

	full := newWriter(1, "f", set) // nothing drains the queue
	full.Put(context.Background(), 1)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := full.Put(ctx, 2); !errors.Is(err, context.DeadlineExceeded) || full.q.dropped.Get() != 1 {
		t.Fatalf("Put on a full queue: %v, %d dropped", err, full.q.dropped.Get())
	}
}

// Package jsonl appends values to a file as JSON lines from a goroutine of
// its own, behind a bounded queue: the decision log, the shadow log and
// the request log.
//
// Log never waits for the disk: when the queue is full the line is dropped
// and counted. Put waits for room instead, for a log whose lines are only
// worth anything all together (a replay needs every line of a sequence).
// A Queue encodes its values on its own goroutine instead (Encoder), for a
// log whose lines depend on the lines before them, and can rotate its file.
package jsonl

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/VictoriaMetrics/metrics"
)

// ErrClosed is returned by Put after Close.
var ErrClosed = errors.New("jsonl: writer closed")

// Writer appends JSON lines to a file from its own goroutine, marshalling
// each value on the caller's. Its methods are safe for concurrent use.
type Writer struct {
	q *Queue[[]byte]
}

// lineEncoder writes lines marshalled before they were queued.
type lineEncoder struct{}

func (lineEncoder) Append(dst, line []byte) ([]byte, bool) { return append(dst, line...), true }
func (lineEncoder) Reset()                                 {}
func (lineEncoder) Release([]byte)                         {}

// Open opens (creating, or appending to) the file at path and starts the
// writer, with room for queue lines waiting for the disk. Its counters,
// name{result="written", "dropped" or "failed"}, go into set.
func Open(path string, queue int, name string, set *metrics.Set) (*Writer, error) {
	q, err := OpenQueue[[]byte](Options{Path: path, Queue: queue, Metric: name}, lineEncoder{}, set)
	if err != nil {
		return nil, err
	}
	return &Writer{q}, nil
}

// newWriter returns a writer that nothing drains yet.
func newWriter(queue int, name string, set *metrics.Set) *Writer {
	return &Writer{newQueue[[]byte](Options{Queue: queue, Metric: name}, lineEncoder{}, set)}
}

// line returns v as one JSON line; a value that does not marshal is
// counted as failed.
func (w *Writer) line(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		w.q.failed.Inc()
		return nil, err
	}
	return append(b, '\n'), nil
}

// Log queues v for writing, or drops and counts it when the queue is full.
// It never blocks on the disk. Values logged after Close are dropped.
func (w *Writer) Log(v any) {
	if line, err := w.line(v); err == nil {
		w.q.Offer(line)
	}
}

// Put queues v for writing, waiting for room in the queue (not for the
// disk) until ctx ends; with room it queues v even after ctx ended. It
// fails, counting v as dropped, when ctx ends
// first or after Close, and with the marshalling error when v does not
// marshal.
func (w *Writer) Put(ctx context.Context, v any) error {
	line, err := w.line(v)
	if err != nil {
		return err
	}
	return w.q.Put(ctx, line)
}

// Close stops the writer once every line queued before it is written, and
// closes the file. It returns the first write error, if any. A nil Writer
// closes as a no-op.
func (w *Writer) Close() error {
	if w == nil {
		return nil
	}
	return w.q.Close()
}

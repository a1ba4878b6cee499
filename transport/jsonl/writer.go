// Package jsonl appends values to a file as JSON lines from a goroutine of
// its own, behind a bounded queue: the decision log and the shadow log.
//
// Log never waits for the disk: when the queue is full the line is dropped
// and counted. Put waits for room instead, for a log whose lines are only
// worth anything all together (a replay needs every line of a sequence).
package jsonl

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"sync"

	"github.com/VictoriaMetrics/metrics"
)

// ErrClosed is returned by Put after Close.
var ErrClosed = errors.New("jsonl: writer closed")

// Writer appends JSON lines to a file from its own goroutine. Its methods
// are safe for concurrent use.
type Writer struct {
	queue chan []byte

	written, dropped, failed *metrics.Counter

	// mu orders Log and Put against Close: they queue under the read
	// lock, Close marks the writer closed under the write lock, so every
	// line is either queued before the drain or counted as dropped.
	mu       sync.RWMutex
	closed   bool
	done     chan struct{} // closed by Close: drain and stop
	finished chan struct{} // closed by run when the file is closed
	err      error         // the first write error, reported by Close
}

// Open opens (creating, or appending to) the file at path and starts the
// writer, with room for queue lines waiting for the disk. Its counters,
// name{result="written", "dropped" or "failed"}, go into set.
func Open(path string, queue int, name string, set *metrics.Set) (*Writer, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	w := newWriter(queue, name, set)
	go w.run(f)
	return w, nil
}

// newWriter returns a writer that nothing drains yet.
func newWriter(queue int, name string, set *metrics.Set) *Writer {
	return &Writer{
		queue:    make(chan []byte, queue),
		written:  set.GetOrCreateCounter(name + `{result="written"}`),
		dropped:  set.GetOrCreateCounter(name + `{result="dropped"}`),
		failed:   set.GetOrCreateCounter(name + `{result="failed"}`),
		done:     make(chan struct{}),
		finished: make(chan struct{}),
	}
}

// line returns v as one JSON line; a value that does not marshal is
// counted as failed.
func (w *Writer) line(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		w.failed.Inc()
		return nil, err
	}
	return append(b, '\n'), nil
}

// Log queues v for writing, or drops and counts it when the queue is full.
// It never blocks on the disk. Values logged after Close are dropped.
func (w *Writer) Log(v any) {
	line, err := w.line(v)
	if err != nil {
		return
	}
	w.mu.RLock()
	defer w.mu.RUnlock()
	if w.closed {
		w.dropped.Inc()
		return
	}
	select {
	case w.queue <- line:
	default:
		w.dropped.Inc()
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
	w.mu.RLock()
	defer w.mu.RUnlock()
	if w.closed {
		w.dropped.Inc()
		return ErrClosed
	}
	select {
	case w.queue <- line: // room now, even if ctx has ended
		return nil
	default:
	}
	select {
	case w.queue <- line:
		return nil
	case <-ctx.Done():
		w.dropped.Inc()
		return ctx.Err()
	}
}

// run writes queued lines, flushing whenever the queue runs dry, until
// Close.
func (w *Writer) run(f *os.File) {
	bw := bufio.NewWriterSize(f, 64<<10)
	write := func(line []byte) {
		if _, err := bw.Write(line); err != nil {
			w.failed.Inc()
			if w.err == nil {
				w.err = err
			}
			return
		}
		w.written.Inc()
	}
	flush := func() {
		if err := bw.Flush(); err != nil && w.err == nil {
			w.err = err
		}
	}
	for {
		select {
		case line := <-w.queue:
			write(line)
			if len(w.queue) == 0 {
				flush()
			}
		case <-w.done:
			// Drain what was queued before Close.
			for {
				select {
				case line := <-w.queue:
					write(line)
				default:
					flush()
					w.err = errors.Join(w.err, f.Close())
					close(w.finished)
					return
				}
			}
		}
	}
}

// Close stops the writer once every line queued before it is written, and
// closes the file. It returns the first write error, if any. A nil Writer
// closes as a no-op.
func (w *Writer) Close() error {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	if !w.closed {
		w.closed = true
		close(w.done)
	}
	w.mu.Unlock()
	<-w.finished
	return w.err
}

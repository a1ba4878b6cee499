package jsonl

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"

	"github.com/VictoriaMetrics/metrics"
)

// Encoder turns queued values into lines on the queue's goroutine, where it
// may keep state of its own (the request log numbers block hashes per
// file): it is only ever called from that goroutine.
type Encoder[T any] interface {
	// Append appends v's line, newline included, to dst. It reports false,
	// leaving dst and its own state as they were, when v needs a new file
	// first; it is then called again for v once the new file is open.
	Append(dst []byte, v T) ([]byte, bool)
	// Reset is called when a new file starts, before its first line.
	Reset()
	// Release is called once for every value taken from the queue, after
	// its line is written or failed, so that the value's memory can be
	// reused.
	Release(v T)
}

// Options configure a Queue's file.
type Options struct {
	// Path is the file, created or appended to.
	Path string
	// Queue is how many values may wait for the disk.
	Queue int
	// Metric names the counters, Metric{result="written", "dropped" or
	// "failed"}.
	Metric string
	// RotationMetric, when set, names the rotation counters:
	// RotationMetric{reason="size"} when the file reached MaxBytes, and
	// RotationMetric{reason=EncoderReason} when the Encoder asked for a new
	// file (EncoderReason "" is "encoder").
	RotationMetric, EncoderReason string
	// MaxBytes rotates the file once it holds this many bytes: Path moves
	// to Path.1, Path.1 to Path.2 and so on, and a new Path starts. 0
	// rotates on size never.
	MaxBytes int64
	// MaxFiles is how many files are kept, Path included, when rotating;
	// the oldest goes. Below 1 counts as 1.
	MaxFiles int
	// Log is warned once, naming Path and the cause, on the first failed
	// write; nil warns nobody. Later failures are only counted.
	Log *slog.Logger
	// Fresh moves a file that is not empty at open aside first, as a
	// rotation does (not counted), so that each file holds the lines of
	// one Encoder's run: for an Encoder whose lines depend on the lines
	// before them in the file.
	Fresh bool
}

// Queue appends the lines of queued values to a file from its own
// goroutine, behind a bounded queue. Its methods are safe for concurrent
// use; its Encoder is owned by its goroutine.
type Queue[T any] struct {
	queue chan T
	enc   Encoder[T]
	opts  Options

	written, dropped, failed *metrics.Counter
	bySize, byEncoder        *metrics.Counter // nil without RotationMetric

	// mu orders Offer and Put against Close: they queue under the read
	// lock, Close marks the queue closed under the write lock, so every
	// value is either queued before the drain or counted as dropped.
	mu       sync.RWMutex
	closed   bool
	done     chan struct{} // closed by Close: drain and stop
	finished chan struct{} // closed by run when the file is closed
	err      error         // the first write error, reported by Close

	// Owned by run: the open file (nil after a rotation failed to open
	// the next one), its size, the lines encoded but not yet written,
	// and whether the first failure was warned about.
	f      *os.File
	size   int64
	buf    []byte
	lines  int
	warned bool
}

// flushBytes is how much a Queue encodes before writing even when more
// values wait.
const flushBytes = 64 << 10

// OpenQueue opens (creating, or appending to) the file at o.Path and starts
// the queue's goroutine. A file that cannot be opened for appending fails
// here, so that a path the process may not write is refused at start.
func OpenQueue[T any](o Options, enc Encoder[T], set *metrics.Set) (*Queue[T], error) {
	f, size, err := openAppend(o.Path)
	if err != nil {
		return nil, err
	}
	q := newQueue(o, enc, set)
	q.f, q.size = f, size
	if o.Fresh && size > 0 {
		q.rotate(nil) // nothing runs yet
		if q.err != nil {
			if q.f != nil {
				q.f.Close()
			}
			return nil, fmt.Errorf("move the last run's file aside: %w", q.err)
		}
	}
	go q.run()
	return q, nil
}

// CheckWritable reports whether path can be opened for appending, as
// OpenQueue would open it, without leaving a file that was not there.
func CheckWritable(path string) error {
	_, statErr := os.Stat(path)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	f.Close()
	if errors.Is(statErr, os.ErrNotExist) {
		os.Remove(path)
	}
	return nil
}

func openAppend(path string) (*os.File, int64, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, 0, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, st.Size(), nil
}

// newQueue returns a queue that nothing drains yet.
func newQueue[T any](o Options, enc Encoder[T], set *metrics.Set) *Queue[T] {
	q := &Queue[T]{
		queue:    make(chan T, o.Queue),
		enc:      enc,
		opts:     o,
		written:  set.GetOrCreateCounter(o.Metric + `{result="written"}`),
		dropped:  set.GetOrCreateCounter(o.Metric + `{result="dropped"}`),
		failed:   set.GetOrCreateCounter(o.Metric + `{result="failed"}`),
		done:     make(chan struct{}),
		finished: make(chan struct{}),
	}
	if o.RotationMetric != "" {
		q.bySize = set.GetOrCreateCounter(o.RotationMetric + `{reason="size"}`)
		reason := o.EncoderReason
		if reason == "" {
			reason = "encoder"
		}
		q.byEncoder = set.GetOrCreateCounter(o.RotationMetric + `{reason="` + reason + `"}`)
	}
	return q
}

// Len is how many values wait for the disk.
func (q *Queue[T]) Len() int { return len(q.queue) }

// Offer queues v, or drops and counts it when the queue is full or closed,
// reporting false; a dropped v is the caller's again. It never blocks on
// the disk.
func (q *Queue[T]) Offer(v T) bool { return q.send(nil, v) == nil }

// Put queues v, waiting for room in the queue (not for the disk) until ctx
// ends; with room it queues v even after ctx ended. It fails, counting v as
// dropped, when ctx ends first or after Close.
func (q *Queue[T]) Put(ctx context.Context, v T) error { return q.send(ctx, v) }

// errFull is send's answer without a context when the queue is full.
var errFull = errors.New("jsonl: queue full")

// send queues v, waiting for room until ctx ends, or not at all when ctx is
// nil; v is counted as dropped when it is not queued.
func (q *Queue[T]) send(ctx context.Context, v T) error {
	q.mu.RLock()
	defer q.mu.RUnlock()
	if q.closed {
		q.dropped.Inc()
		return ErrClosed
	}
	select {
	case q.queue <- v: // room now, even if ctx has ended
		return nil
	default:
	}
	if ctx == nil {
		q.dropped.Inc()
		return errFull
	}
	select {
	case q.queue <- v:
		return nil
	case <-ctx.Done():
		q.dropped.Inc()
		return ctx.Err()
	}
}

// run encodes and writes queued values, writing whenever the queue runs
// dry or flushBytes are waiting, until Close.
func (q *Queue[T]) run() {
	defer close(q.finished)
	q.enc.Reset()
	for {
		select {
		case v := <-q.queue:
			q.add(v)
			if len(q.queue) == 0 || len(q.buf) >= flushBytes {
				q.flush()
			}
		case <-q.done:
			// Drain what was queued before Close.
			for {
				select {
				case v := <-q.queue:
					q.add(v)
					if len(q.buf) >= flushBytes {
						q.flush()
					}
				default:
					q.flush()
					if q.f != nil {
						q.fail(q.f.Close())
					}
					return
				}
			}
		}
	}
}

// add encodes v into the pending lines, rotating first when the file is
// full or the encoder asks for a new one.
func (q *Queue[T]) add(v T) {
	defer q.enc.Release(v)
	if q.opts.MaxBytes > 0 && q.size+int64(len(q.buf)) >= q.opts.MaxBytes {
		q.rotate(q.bySize)
	}
	b, ok := q.enc.Append(q.buf, v)
	if !ok {
		q.rotate(q.byEncoder)
		// A fresh encoder takes any value; one that still refuses it
		// breaks the Encoder's contract.
		if b, ok = q.enc.Append(q.buf, v); !ok {
			panic("BUG: jsonl: an encoder refused a value right after Reset")
		}
	}
	q.buf = b
	q.lines++
}

// flush writes the pending lines. A failed write counts them as failed and
// cuts the file back to its last whole line, so that a reader never meets
// half a line, and the queue goes on with the next values: a full disk
// may have room again later.
func (q *Queue[T]) flush() {
	if len(q.buf) == 0 {
		return
	}
	n := q.lines
	q.lines = 0
	buf := q.buf
	q.buf = q.buf[:0]
	if q.f == nil {
		// The last rotation could not open the file: try again.
		f, size, err := openAppend(q.opts.Path)
		if err != nil {
			q.failed.Add(n)
			q.fail(err)
			return
		}
		q.f, q.size = f, size
	}
	w, err := q.f.Write(buf)
	if err != nil {
		q.failed.Add(n)
		if w > 0 {
			q.f.Truncate(q.size) // best effort: the file may be as broken as the disk
		}
		q.fail(err)
		return
	}
	q.size += int64(w)
	q.written.Add(n)
}

// fail keeps err as the first error and warns about it once.
func (q *Queue[T]) fail(err error) {
	if err == nil {
		return
	}
	if q.err == nil {
		q.err = err
	}
	if !q.warned && q.opts.Log != nil {
		q.warned = true
		q.opts.Log.Warn("cannot write a log file; its lines are dropped and counted, and serving goes on",
			"path", q.opts.Path, "metric", q.opts.Metric+`{result="failed"}`, "err", err)
	}
}

// rotate writes what is pending, moves the file aside (Path.1, Path.2...,
// keeping MaxFiles files) and opens a new one, counting it on c.
func (q *Queue[T]) rotate(c *metrics.Counter) {
	if c != nil {
		c.Inc()
	}
	q.flush()
	if q.f != nil {
		q.fail(q.f.Close())
		q.f = nil
	}
	keep := max(q.opts.MaxFiles, 1)
	p := q.opts.Path
	if keep == 1 {
		q.fail(removeIfThere(p))
	} else {
		q.fail(removeIfThere(p + "." + strconv.Itoa(keep-1)))
		for i := keep - 2; i >= 1; i-- {
			q.fail(renameIfThere(p+"."+strconv.Itoa(i), p+"."+strconv.Itoa(i+1)))
		}
		q.fail(renameIfThere(p, p+".1"))
	}
	f, size, err := openAppend(p)
	if err != nil {
		q.fail(fmt.Errorf("rotate: %w", err))
	}
	q.f, q.size = f, size
	q.enc.Reset()
}

func removeIfThere(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

func renameIfThere(from, to string) error {
	if err := os.Rename(from, to); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// Close stops the queue once every value queued before it is written, and
// closes the file. It returns the first write error, if any. A nil Queue
// closes as a no-op.
func (q *Queue[T]) Close() error {
	if q == nil {
		return nil
	}
	q.mu.Lock()
	if !q.closed {
		q.closed = true
		close(q.done)
	}
	q.mu.Unlock()
	<-q.finished
	return q.err
}

package conncheck

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// ErrGone is the cause a Watcher reports when a connection's peer has gone.
var ErrGone = errors.New("client disconnected")

// Watcher checks many connections from one goroutine: every tick it peeks
// at each registered connection and runs its extra check, so that waiting on
// an engine costs a peek per request per tick, not a goroutine and a timer
// per request. With nothing registered it stops ticking until something is.
// Its methods are safe for concurrent use.
type Watcher struct {
	every time.Duration

	mu    sync.Mutex
	items map[*Entry]struct{}
	// wake tells a watcher that stopped ticking, having found nothing to
	// watch, that something is registered again.
	wake chan struct{}

	stop chan struct{}
	wg   sync.WaitGroup

	ticks atomic.Uint64 // ticks taken, for the tests
}

// Entry is one registered connection. Add makes one; Watch registers one
// its caller holds, so that registering allocates nothing.
type Entry struct {
	conn   net.Conn
	target Target
}

// Target is what a watched connection reports to. Both methods are called
// from the watcher's goroutine and must not block.
type Target interface {
	// Check is called every tick; a non-nil error is passed to Fire, and
	// the entry stays registered.
	Check() error
	// Fire is called with ErrGone (after which the entry is removed), with
	// Check's error, or with FireAll's cause.
	Fire(cause error)
}

// funcs is the Target of Add's functions.
type funcs struct {
	Entry
	check func() error
	fire  func(cause error)
}

func (f *funcs) Check() error {
	if f.check == nil {
		return nil
	}
	return f.check()
}

func (f *funcs) Fire(cause error) { f.fire(cause) }

// NewWatcher starts a watcher that ticks every interval. Close stops it.
func NewWatcher(every time.Duration) *Watcher {
	w := &Watcher{every: every, items: make(map[*Entry]struct{}), wake: make(chan struct{}, 1), stop: make(chan struct{})}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		w.run()
	}()
	return w
}

// Close stops the watcher and waits for its goroutine.
func (w *Watcher) Close() {
	close(w.stop)
	w.wg.Wait()
}

// Add registers conn. fire must not block: it is called on the watcher's
// goroutine. check may be nil.
func (w *Watcher) Add(conn net.Conn, check func() error, fire func(cause error)) *Entry {
	f := &funcs{check: check, fire: fire}
	w.Watch(&f.Entry, conn, f)
	return &f.Entry
}

// Watch registers conn in e, which must not be registered already, with t
// to report to.
func (w *Watcher) Watch(e *Entry, conn net.Conn, t Target) {
	e.conn, e.target = conn, t
	w.mu.Lock()
	w.items[e] = struct{}{}
	first := len(w.items) == 1
	w.mu.Unlock()
	if first {
		select {
		case w.wake <- struct{}{}:
		default: // a wake is pending already
		}
	}
}

// FireAll calls every registered entry's Fire with cause, on the caller's
// goroutine; the entries stay registered.
func (w *Watcher) FireAll(cause error) {
	w.mu.Lock()
	batch := make([]*Entry, 0, len(w.items))
	for e := range w.items {
		batch = append(batch, e)
	}
	w.mu.Unlock()
	for _, e := range batch {
		e.target.Fire(cause)
	}
}

// Remove unregisters e; after it returns, e's fire is not called again
// unless a tick that had already started is running it.
func (w *Watcher) Remove(e *Entry) {
	w.mu.Lock()
	delete(w.items, e)
	w.mu.Unlock()
}

func (w *Watcher) run() {
	t := time.NewTicker(w.every)
	defer t.Stop()
	var batch []*Entry
	p := newProbe() // this goroutine's alone
	for {
		select {
		case <-w.stop:
			return
		case <-t.C:
		}
		w.ticks.Add(1)
		batch = batch[:0]
		w.mu.Lock()
		for e := range w.items {
			batch = append(batch, e)
		}
		w.mu.Unlock()
		if len(batch) == 0 {
			// Nothing to watch: stop ticking until Watch registers
			// something, so that an idle process is not woken 50 times a
			// second. A Watch since the look above has left a wake.
			t.Stop()
			select {
			case <-w.stop:
				return
			case <-w.wake:
			}
			t.Reset(w.every)
			continue
		}
		// Sockets are peeked outside the lock, so Add and Remove never wait
		// for a whole sweep.
		for _, e := range batch {
			if p.gone(e.conn) {
				w.Remove(e)
				e.target.Fire(ErrGone)
				continue
			}
			if err := e.target.Check(); err != nil {
				e.target.Fire(err)
			}
		}
		clear(batch)
	}
}

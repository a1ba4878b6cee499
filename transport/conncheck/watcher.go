package conncheck

import (
	"errors"
	"net"
	"sync"
	"time"
)

// ErrGone is the cause a Watcher reports when a connection's peer has gone.
var ErrGone = errors.New("client disconnected")

// Watcher checks many connections from one goroutine: every tick it peeks
// at each registered connection and runs its extra check, so that waiting on
// an engine costs a peek per request per tick, not a goroutine and a timer
// per request. Its methods are safe for concurrent use.
type Watcher struct {
	every time.Duration

	mu    sync.Mutex
	items map[*Entry]struct{}

	stop chan struct{}
	wg   sync.WaitGroup
}

// Entry is one registered connection.
type Entry struct {
	conn net.Conn
	// check, when not nil, is called every tick; a non-nil error is passed
	// to fire, and the entry stays registered.
	check func() error
	// fire is called from the watcher's goroutine with ErrGone (after which
	// the entry is removed) or with check's error.
	fire func(cause error)
}

// NewWatcher starts a watcher that ticks every interval. Close stops it.
func NewWatcher(every time.Duration) *Watcher {
	w := &Watcher{every: every, items: make(map[*Entry]struct{}), stop: make(chan struct{})}
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
	e := &Entry{conn: conn, check: check, fire: fire}
	w.mu.Lock()
	w.items[e] = struct{}{}
	w.mu.Unlock()
	return e
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
	for {
		select {
		case <-w.stop:
			return
		case <-t.C:
		}
		batch = batch[:0]
		w.mu.Lock()
		for e := range w.items {
			batch = append(batch, e)
		}
		w.mu.Unlock()
		// Sockets are peeked outside the lock, so Add and Remove never wait
		// for a whole sweep.
		for _, e := range batch {
			if Gone(e.conn) {
				w.Remove(e)
				e.fire(ErrGone)
				continue
			}
			if e.check != nil {
				if err := e.check(); err != nil {
					e.fire(err)
				}
			}
		}
		clear(batch)
	}
}

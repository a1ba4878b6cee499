package frontend

import (
	"context"
	"errors"
	"net"
	"sync"
	"time"

	"github.com/inferrail/inferrail/transport/conncheck"
)

// watchEvery is how often waiting requests are checked. A client that
// leaves has its engine request aborted within about this long.
const watchEvery = 20 * time.Millisecond

// watch follows one client request across its attempts: when the client
// goes, the current attempt is cancelled with errClientGone; when the
// replica an attempt waits on fails its health checks before the response
// head, the attempt is cancelled with errReplicaUnhealthy so it can be
// retried elsewhere; when the gateway's shutdown cuts the requests still
// running (Server.cut), with errShutdown. The checks run on the server's
// conncheck.Watcher. A watch lives in its request, so that watching
// allocates nothing.
type watch struct {
	s     *Server
	entry conncheck.Entry

	mu      sync.Mutex
	replica string // the current attempt's replica; "" before the first
	head    bool   // the current attempt has its response head
	// cut is errClientGone once the client has disconnected, or
	// errShutdown once the shutdown cut the request: every attempt armed
	// later is cancelled at once.
	cut    error
	cancel canceler
}

// canceler cancels the attempt (or the flow-control wait) a watch follows.
type canceler interface{ cancel(cause error) }

// cancelFunc is a context.CancelCauseFunc as a canceler.
type cancelFunc context.CancelCauseFunc

func (f cancelFunc) cancel(cause error) { f(cause) }

var _ conncheck.Target = (*watch)(nil)

// watchConn starts w watching the client's conn.
func (s *Server) watchConn(w *watch, conn net.Conn) {
	w.s = s
	s.watcher.Watch(&w.entry, conn, w)
}

func (s *Server) unwatch(w *watch) { s.watcher.Remove(&w.entry) }

func (s *Server) replicaHealthy(id string) bool {
	snap, ok := s.fleet.Snapshot(id)
	return ok && snap.Healthy
}

// arm points w at a new attempt. An attempt armed after the client left or
// the shutdown cut the request is cancelled at once. The shutdown cancels
// the server's base before it fires every watch (Server.cut), so an attempt
// armed after that fire sees base cancelled.
func (w *watch) arm(replica string, c canceler) {
	w.mu.Lock()
	w.replica, w.head, w.cancel = replica, false, c
	cut := w.cut
	w.mu.Unlock()
	if cut == nil && w.s.base.Err() != nil {
		cut = errShutdown
	}
	if cut != nil {
		c.cancel(cut)
	}
}

// headArrived stops the health check: after the first byte nothing is
// retried.
func (w *watch) headArrived() {
	w.mu.Lock()
	w.head = true
	w.mu.Unlock()
}

// Check is the watcher's health check of the current attempt's replica.
func (w *watch) Check() error {
	w.mu.Lock()
	replica, head := w.replica, w.head
	w.mu.Unlock()
	if !head && replica != "" && !w.s.replicaHealthy(replica) {
		return errReplicaUnhealthy
	}
	return nil
}

// Fire cancels the current attempt with cause (conncheck.ErrGone as
// errClientGone).
func (w *watch) Fire(cause error) {
	w.mu.Lock()
	switch {
	case errors.Is(cause, conncheck.ErrGone):
		cause = errClientGone
		w.cut = cause
	case cause == errShutdown && w.cut == nil:
		w.cut = cause
	}
	c := w.cancel
	w.mu.Unlock()
	if c != nil {
		c.cancel(cause)
	}
}

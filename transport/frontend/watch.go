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
// retried elsewhere. The checks run on the server's conncheck.Watcher.
type watch struct {
	healthy func(replica string) bool
	entry   *conncheck.Entry

	mu      sync.Mutex
	replica string // the current attempt's replica; "" before the first
	head    bool   // the current attempt has its response head
	gone    bool   // the client has disconnected
	cancel  context.CancelCauseFunc
}

func (s *Server) watchConn(conn net.Conn) *watch {
	w := &watch{healthy: s.replicaHealthy}
	w.entry = s.watcher.Add(conn, w.check, w.fire)
	return w
}

func (s *Server) unwatch(w *watch) { s.watcher.Remove(w.entry) }

func (s *Server) replicaHealthy(id string) bool {
	snap, ok := s.fleet.Snapshot(id)
	return ok && snap.Healthy
}

// arm points w at a new attempt. An attempt armed after the client left is
// cancelled at once.
func (w *watch) arm(replica string, cancel context.CancelCauseFunc) {
	w.mu.Lock()
	w.replica, w.head, w.cancel = replica, false, cancel
	gone := w.gone
	w.mu.Unlock()
	if gone {
		cancel(errClientGone)
	}
}

// headArrived stops the health check: after the first byte nothing is
// retried.
func (w *watch) headArrived() {
	w.mu.Lock()
	w.head = true
	w.mu.Unlock()
}

func (w *watch) check() error {
	w.mu.Lock()
	replica, head := w.replica, w.head
	w.mu.Unlock()
	if !head && replica != "" && !w.healthy(replica) {
		return errReplicaUnhealthy
	}
	return nil
}

func (w *watch) fire(cause error) {
	w.mu.Lock()
	if errors.Is(cause, conncheck.ErrGone) {
		w.gone, cause = true, errClientGone
	}
	cancel := w.cancel
	w.mu.Unlock()
	if cancel != nil {
		cancel(cause)
	}
}

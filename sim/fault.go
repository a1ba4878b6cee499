package sim

import (
	"errors"
	"net"
	"sync"
	"syscall"
	"time"
)

// FaultKind is a way a test can make a simulator misbehave.
type FaultKind int

const (
	// FaultNone serves normally.
	FaultNone FaultKind = iota
	// FaultClose accepts each request, then closes the connection without
	// sending a byte, as a crashing engine does.
	FaultClose
	// FaultHang reads each request and never answers, until the fault is
	// cleared or the server stops.
	FaultHang
	// FaultDelay waits Fault.Delay before serving each request.
	FaultDelay
	// FaultFail answers each request with Fault.Status and a vLLM error body.
	FaultFail
)

// Fault is what SetFault applies. Paths limits it to those request paths;
// empty means every path, /health included.
type Fault struct {
	Kind   FaultKind
	Status int           // FaultFail: the status to answer, 500 when zero
	Delay  time.Duration // FaultDelay
	Paths  []string
}

func (f *Fault) applies(path string) bool {
	if f.Kind == FaultNone {
		return false
	}
	if len(f.Paths) == 0 {
		return true
	}
	for _, p := range f.Paths {
		if p == path {
			return true
		}
	}
	return false
}

// trackingListener records accepted connections so that Kill can close them.
type trackingListener struct {
	net.Listener
	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

func newTrackingListener(ln net.Listener) *trackingListener {
	return &trackingListener{Listener: ln, conns: make(map[net.Conn]struct{})}
}

func (l *trackingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	tc := &trackedConn{Conn: c, l: l}
	l.mu.Lock()
	l.conns[tc] = struct{}{}
	l.mu.Unlock()
	return tc, nil
}

// closeAll closes every connection still open.
func (l *trackingListener) closeAll() {
	l.mu.Lock()
	conns := make([]net.Conn, 0, len(l.conns))
	for c := range l.conns {
		conns = append(conns, c)
	}
	l.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

type trackedConn struct {
	net.Conn
	l    *trackingListener
	once sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.l.mu.Lock()
		delete(c.l.conns, c)
		c.l.mu.Unlock()
	})
	return c.Conn.Close()
}

// SyscallConn exposes the socket, so that conncheck can tell a client has gone.
func (c *trackedConn) SyscallConn() (syscall.RawConn, error) {
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return nil, errors.New("connection has no socket")
	}
	return sc.SyscallConn()
}

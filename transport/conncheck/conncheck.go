// Package conncheck tells whether the peer of a TCP connection has gone.
//
// fasthttp offers no per-request cancellation: RequestCtx.Done fires only on
// server shutdown, and a write error shows a closed client only after a few
// more writes. Peeking at the socket without consuming anything tells at once
// (measured in ../shared/reference/go-stack.md §3). Callers poll Gone every
// 20 ms or so while they wait on an engine.
//
// conncheck starts no goroutines and keeps no state.
package conncheck

import (
	"errors"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// Gone reports whether the peer of conn has closed or reset the connection.
// Unread request bytes (a pipelined request) count as alive. A connection that
// cannot be inspected is reported alive, so callers fall back on write errors.
func Gone(conn net.Conn) bool {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	gone := false
	var b [1]byte
	cerr := rc.Control(func(fd uintptr) {
		n, _, err := unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
		switch {
		case err == nil:
			gone = n == 0
		case errors.Is(err, unix.EAGAIN), errors.Is(err, unix.EINTR):
		default:
			gone = true
		}
	})
	if cerr != nil {
		// The descriptor is already closed.
		return true
	}
	return gone
}

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
//
// Over TLS (a conn with NetConn, such as *tls.Conn) a closing peer sends a
// close_notify record before its FIN, and a peek would see those bytes as
// data: there the socket is asked instead whether the peer has shut its
// side (POLLRDHUP), whatever it left unread.
func Gone(conn net.Conn) bool {
	if w, ok := conn.(interface{ NetConn() net.Conn }); ok {
		return hungUp(w.NetConn())
	}
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

// hungUp reports whether the peer of a socket has shut down its side or
// reset it.
func hungUp(conn net.Conn) bool {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	gone := false
	cerr := rc.Control(func(fd uintptr) {
		fds := [1]unix.PollFd{{Fd: int32(fd), Events: unix.POLLRDHUP}}
		n, err := unix.Poll(fds[:], 0)
		gone = err == nil && n > 0 && fds[0].Revents&(unix.POLLRDHUP|unix.POLLHUP|unix.POLLERR) != 0
	})
	return cerr != nil || gone
}

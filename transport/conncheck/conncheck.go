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
	"net"
	"syscall"
	"unsafe"

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
func Gone(conn net.Conn) bool { return newProbe().gone(conn) }

// probe is the state of one check and the functions syscall.RawConn's
// Control runs with the descriptor, made once: a Watcher keeps one for all
// its sweeps, so that checking a connection allocates nothing (a
// transport/sockio connection hands out its RawConn without allocating
// either).
//
// The calls are raw system calls: non-blocking, they never need the
// runtime's syscall state, whose entry wakes the sysmon thread of an idle
// process (transport/sockio says what that costs).
type probe struct {
	b      [1]byte
	fds    [1]unix.PollFd
	result bool
	peekFn func(fd uintptr)
	pollFn func(fd uintptr)
}

func newProbe() *probe {
	p := &probe{}
	p.peekFn, p.pollFn = p.peek, p.poll
	return p
}

func (p *probe) gone(conn net.Conn) bool {
	fn := p.peekFn
	if w, ok := conn.(interface{ NetConn() net.Conn }); ok {
		conn, fn = w.NetConn(), p.pollFn
	}
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	p.result = false
	if rc.Control(fn) != nil {
		// The descriptor is already closed.
		return true
	}
	return p.result
}

// peek is MSG_PEEK of one byte: 0 bytes means the peer closed; EAGAIN, an
// open and empty socket; EINTR, no news; any other error, a reset.
func (p *probe) peek(fd uintptr) {
	n, _, errno := unix.RawSyscall6(unix.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&p.b[0])), 1,
		unix.MSG_PEEK|unix.MSG_DONTWAIT, 0, 0)
	switch errno {
	case 0:
		p.result = n == 0
	case unix.EAGAIN, unix.EINTR:
	default:
		p.result = true
	}
}

// poll asks, without waiting, whether the peer has shut down its side
// (POLLRDHUP) or reset the socket.
func (p *probe) poll(fd uintptr) {
	p.fds[0] = unix.PollFd{Fd: int32(fd), Events: unix.POLLRDHUP}
	var zero unix.Timespec
	n, _, errno := unix.RawSyscall6(unix.SYS_PPOLL, uintptr(unsafe.Pointer(&p.fds[0])), 1,
		uintptr(unsafe.Pointer(&zero)), 0, 0, 0)
	p.result = errno == 0 && n > 0 && p.fds[0].Revents&(unix.POLLRDHUP|unix.POLLHUP|unix.POLLERR) != 0
}

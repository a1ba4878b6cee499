// Package sockio reads and writes TCP sockets without entering the Go
// runtime's syscall state.
//
// net.Conn's Read and Write go through syscall.Syscall, whose entersyscall
// wakes the runtime's sysmon thread whenever the process was idle: at a
// few thousand requests a second a Go proxy goes idle between requests, so
// each request woke sysmon, which then napped in 20 µs nanosleeps until it
// saw the process idle again. On the 2-core VM the gateway is benchmarked
// on, a context switch costs tens of microseconds, and those wake-ups were
// about a third of a Go proxy's switches (issue 16;
// bench/results/gateway-*.md counts them). A socket read or write on a
// non-blocking descriptor never blocks, so it needs none of that: Conn
// issues it as a raw system call inside syscall.RawConn's Read and Write,
// which hold the descriptor against a concurrent Close and park the
// goroutine on the network poller when the socket is not ready, honouring
// deadlines, as net.Conn does.
//
// The package starts no goroutines and keeps no state.
package sockio

import (
	"io"
	"net"
	"os"
	"syscall"
	"unsafe"
)

// Conn is a *net.TCPConn whose Read and Write are raw system calls. Every
// other method, SyscallConn included, is the TCPConn's.
type Conn struct {
	*net.TCPConn
	rc syscall.RawConn
}

// Wrap returns c as a Conn when it is a TCP connection, and c itself
// otherwise (a TLS connection is wrapped underneath by wrapping its raw
// connection before the handshake).
//
// Under the race detector (-race) it leaves every connection as it is: the
// detector learns the order that socket I/O imposes between goroutines from
// package syscall's reads and writes, which raw calls skip, and it would
// report races across a connection within one process (a test's client
// and the server it calls) that are none.
func Wrap(c net.Conn) net.Conn {
	if raceEnabled {
		return c
	}
	return wrap(c)
}

func wrap(c net.Conn) net.Conn {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return c
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return c
	}
	return &Conn{TCPConn: tc, rc: rc}
}

// Read reads into p as net.Conn's Read does: at least one byte, io.EOF at
// the end of the stream, an *net.OpError otherwise.
func (c *Conn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	var n int
	var errno syscall.Errno
	err := c.rc.Read(func(fd uintptr) bool {
		for {
			r, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
			switch e {
			case syscall.EINTR:
				continue
			case syscall.EAGAIN:
				return false // wait until the socket is readable
			}
			n, errno = int(r), e
			return true
		}
	})
	switch {
	case err != nil:
		return 0, c.opError("read", err)
	case errno != 0:
		return 0, c.opError("read", os.NewSyscallError("read", errno))
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

// Write writes all of p as net.Conn's Write does, or fails with an
// *net.OpError and the count written before it.
func (c *Conn) Write(p []byte) (int, error) {
	var n int
	var errno syscall.Errno
	err := c.rc.Write(func(fd uintptr) bool {
		for n < len(p) {
			r, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&p[n])), uintptr(len(p)-n))
			switch e {
			case 0:
				n += int(r)
			case syscall.EINTR:
			case syscall.EAGAIN:
				return false // wait until the socket is writable again
			default:
				errno = e
				return true
			}
		}
		return true
	})
	switch {
	case err != nil:
		return n, c.opError("write", err)
	case errno != 0:
		return n, c.opError("write", os.NewSyscallError("write", errno))
	}
	return n, nil
}

func (c *Conn) opError(op string, err error) error {
	return &net.OpError{Op: op, Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
}

// Listener wraps the TCP connections a listener accepts in Conn.
type Listener struct{ net.Listener }

// Accept waits for the next connection and wraps it.
func (l Listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return Wrap(c), nil
}

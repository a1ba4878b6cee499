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
	"context"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"unsafe"
)

// Conn is a *net.TCPConn whose Read and Write are raw system calls. Every
// other method is the TCPConn's (SyscallConn's answer is its, kept).
type Conn struct {
	*net.TCPConn
	rc syscall.RawConn

	// The state of the read and of the write in progress, and the
	// functions RawConn calls with the descriptor, made once per
	// connection so that a call allocates nothing. Each mutex keeps two
	// callers of the same method apart (net.Conn allows them).
	rmu   sync.Mutex
	rbuf  []byte
	rn    int
	rerr  syscall.Errno
	rfunc func(fd uintptr) bool

	wmu   sync.Mutex
	wbuf  []byte
	wn    int
	werr  syscall.Errno
	wfunc func(fd uintptr) bool
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
	w := &Conn{TCPConn: tc, rc: rc}
	w.rfunc, w.wfunc = w.read, w.write
	return w
}

// Dialer is d's DialContext with every connection wrapped (Wrap), for an
// http.Transport: a client that polls engines (metrics scrapes, health
// probes) then reads and writes without entering the syscall state, whose
// entry and exit are what keep the runtime's sysmon thread waking every
// 20 µs rather than every 10 ms.
func Dialer(d *net.Dialer) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return Wrap(c), nil
	}
}

// SyscallConn is the TCPConn's, made once: handing it out allocates
// nothing (conncheck peeks at a waiting client's socket every tick).
func (c *Conn) SyscallConn() (syscall.RawConn, error) { return c.rc, nil }

// Read reads into p as net.Conn's Read does: at least one byte, io.EOF at
// the end of the stream, an *net.OpError otherwise.
func (c *Conn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	c.rmu.Lock()
	defer c.rmu.Unlock()
	c.rbuf, c.rn, c.rerr = p, 0, 0
	err := c.rc.Read(c.rfunc)
	n := c.rn
	c.rbuf = nil
	if err := c.outcome("read", err, c.rerr); err != nil {
		return 0, err
	}
	if n == 0 {
		return 0, io.EOF
	}
	return n, nil
}

// read is one attempt of Read on fd: false to wait until it is readable.
func (c *Conn) read(fd uintptr) bool {
	for {
		r, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&c.rbuf[0])), uintptr(len(c.rbuf)))
		switch e {
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false
		}
		c.rn, c.rerr = int(r), e
		return true
	}
}

// Write writes all of p as net.Conn's Write does, or fails with an
// *net.OpError and the count written before it.
func (c *Conn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.wbuf, c.wn, c.werr = p, 0, 0
	err := c.rc.Write(c.wfunc)
	c.wbuf = nil
	return c.wn, c.outcome("write", err, c.werr)
}

// write is one attempt of Write on fd: false to wait until it is writable
// again, with c.wn bytes written so far.
func (c *Conn) write(fd uintptr) bool {
	for c.wn < len(c.wbuf) {
		r, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&c.wbuf[c.wn])), uintptr(len(c.wbuf)-c.wn))
		switch e {
		case 0:
			c.wn += int(r)
		case syscall.EINTR:
		case syscall.EAGAIN:
			return false
		default:
			c.werr = e
			return true
		}
	}
	return true
}

// outcome is op's error as net.Conn gives it, from RawConn's error (a
// deadline, a closed connection) or the system call's, or nil.
func (c *Conn) outcome(op string, err error, errno syscall.Errno) error {
	if err == nil && errno != 0 {
		err = os.NewSyscallError(op, errno)
	}
	if err == nil {
		return nil
	}
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

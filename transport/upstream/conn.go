package upstream

import (
	"bufio"
	"net"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// writeBufferBytes sizes each connection's write buffer; a chat request
// bigger than this is written straight from its body.
const writeBufferBytes = 4096

// conn is one connection to the replica. It is owned by one request at a time
// or by the pool's idle stack; only closeNC may be called from elsewhere (the
// request's context.AfterFunc).
type conn struct {
	nc net.Conn // the connection requests go over: raw, or TLS over raw
	// raw is the socket: closed to cancel (at once, with no TLS alert
	// that could wait on a stuck write), peeked to see if an idle
	// connection is still usable.
	raw net.Conn
	br  *bufio.Reader // reads through the conn, counting bytes
	bw  *bufio.Writer
	// nread counts bytes read from nc since the request started: zero when an
	// error comes means no response byte arrived.
	nread int64
	rerr  error // the last read error, for ClosedError's message
	// reused is set when the conn came from the idle stack.
	reused bool
	// idleSince is when the conn went back to the idle stack (guarded by the
	// pool's mutex while it sits there).
	idleSince time.Time

	// Made once per connection so that a request allocates none of them.
	closeFn func()           // closes nc; what a request's AfterFunc runs
	rc      syscall.RawConn  // nil when nc is not a socket
	peekFn  func(fd uintptr) // peeks into rc, setting peekOK
	peekOK  bool
	peekBuf [1]byte
}

func newConn(nc, raw net.Conn, readBufferBytes int) *conn {
	c := &conn{nc: nc, raw: raw}
	c.br = bufio.NewReaderSize(c, readBufferBytes)
	c.bw = bufio.NewWriterSize(nc, writeBufferBytes)
	c.closeFn = c.close
	if sc, ok := raw.(syscall.Conn); ok {
		if rc, err := sc.SyscallConn(); err == nil {
			c.rc = rc
			c.peekFn = c.peek
		}
	}
	return c
}

// Read counts what the bufio.Reader pulls from the socket.
func (c *conn) Read(p []byte) (int, error) {
	n, err := c.nc.Read(p)
	c.nread += int64(n)
	if err != nil {
		c.rerr = err
	}
	return n, err
}

func (c *conn) close() { c.raw.Close() }

// idleUsable reports whether an idle keep-alive connection can carry a new
// request: the peer has neither closed it nor sent anything since the last
// response. A peek costs one non-blocking syscall and catches the common stale
// case (the engine restarted, or closed the connection on its keep-alive
// timeout) before a request is written into a dead socket. Unsolicited bytes
// would be read as the next request's response, so they disqualify it too;
// over TLS they are a record (a close_notify alert, most likely), and the
// connection is given up as well.
func (c *conn) idleUsable() bool {
	if c.br.Buffered() > 0 {
		return false
	}
	if c.rc == nil {
		return true // cannot tell; the stale retry covers it
	}
	c.peekOK = false
	return c.rc.Control(c.peekFn) == nil && c.peekOK
}

// peek sets peekOK when a non-blocking MSG_PEEK finds the socket open and
// empty. It calls recvfrom directly: unix.Recvfrom allocates the source
// address it returns, on every call. The call never blocks, so it is raw,
// as transport/sockio's reads and writes are: it does not wake sysmon.
func (c *conn) peek(fd uintptr) {
	_, _, errno := unix.RawSyscall6(unix.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&c.peekBuf[0])), 1,
		unix.MSG_PEEK|unix.MSG_DONTWAIT, 0, 0)
	c.peekOK = errno == unix.EAGAIN
}

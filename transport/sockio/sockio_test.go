package sockio

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// pair returns a wrapped client connection and the server side of it.
func pair(t *testing.T) (*Conn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	srv := <-accepted
	if srv == nil {
		t.Fatal("accept failed")
	}
	w, ok := wrap(c).(*Conn) // the raw path, under -race too (see Wrap)
	if !ok {
		t.Fatalf("Wrap(%T) did not wrap", c)
	}
	t.Cleanup(func() { w.Close(); srv.Close() })
	return w, srv
}

// TestRoundTrip: 8 MiB each way, more than the socket buffers hold, so
// both Read and Write wait on the poller (EAGAIN) many times; every byte
// arrives in order.
func TestRoundTrip(t *testing.T) {
	c, srv := pair(t)
	data := make([]byte, 8<<20)
	for i := range data {
		data[i] = byte(i * 7)
	}
	echoed := make(chan error, 1)
	go func() { _, err := io.Copy(srv, io.LimitReader(srv, int64(len(data)))); echoed <- err }()
	wrote := make(chan error, 1)
	go func() {
		n, err := c.Write(data)
		if err == nil && n != len(data) {
			err = io.ErrShortWrite
		}
		wrote <- err
	}()
	got := make([]byte, 0, len(data))
	buf := make([]byte, 3000)
	for len(got) < len(data) {
		n, err := c.Read(buf)
		if err != nil {
			t.Fatalf("after %d bytes: %v", len(got), err)
		}
		got = append(got, buf[:n]...)
	}
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	if err := <-echoed; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatal("the echo differs")
	}
}

// TestEOF: the peer's close reads as io.EOF, as from net.Conn.
func TestEOF(t *testing.T) {
	c, srv := pair(t)
	srv.Write([]byte("bye"))
	srv.Close()
	b, err := io.ReadAll(c)
	if err != nil || string(b) != "bye" {
		t.Fatalf("%q, %v", b, err)
	}
	if n, err := c.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Fatalf("after the end: %d, %v", n, err)
	}
}

// TestDeadline: a read with nothing to read waits until its deadline and
// fails with a timeout that net.Error and os.ErrDeadlineExceeded both
// recognise.
func TestDeadline(t *testing.T) {
	c, _ := pair(t)
	c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	start := time.Now()
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("got %v, want a timeout", err)
	}
	if el := time.Since(start); el < 40*time.Millisecond {
		t.Fatalf("returned after %v, before the deadline", el)
	}
}

// TestCloseUnblocksRead: closing the connection from another goroutine
// ends a read that waits on the poller with net.ErrClosed.
func TestCloseUnblocksRead(t *testing.T) {
	c, _ := pair(t)
	done := make(chan error, 1)
	go func() { _, err := c.Read(make([]byte, 1)); done <- err }()
	time.Sleep(20 * time.Millisecond)
	c.Close()
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("got %v, want net.ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the read did not return after Close")
	}
	if _, err := c.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("write after close: %v", err)
	}
}

// TestResetIsAnError: a write to a peer that reset the connection fails
// with the system's error inside a *net.OpError, as from net.Conn.
func TestResetIsAnError(t *testing.T) {
	c, srv := pair(t)
	srv.(*net.TCPConn).SetLinger(0)
	srv.Close()
	var err error
	for range 100 {
		if _, err = c.Write([]byte("hello")); err != nil {
			break
		}
		time.Sleep(time.Millisecond)
	}
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "write" {
		t.Fatalf("got %v, want a write *net.OpError", err)
	}
}

// TestWrapLeavesOthers: only TCP connections are wrapped; the listener
// wraps what it accepts.
func TestWrapLeavesOthers(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if wrap(a) != a {
		t.Fatal("a pipe was wrapped")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	wl := Listener{ln}
	defer wl.Close()
	go func() {
		if c, err := net.Dial("tcp", ln.Addr().String()); err == nil {
			c.Close()
		}
	}()
	c, err := wl.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, ok := c.(*Conn); ok == raceEnabled {
		t.Fatalf("accepted a %T with the race detector %v", c, raceEnabled)
	}
}

// TestNoAllocations: a read and a write allocate nothing (the functions
// RawConn calls are made once per connection); the gateway's allocation
// guard, transport/frontend's BenchmarkProxyAllocs, counted eight more per
// request when each call built a closure.
func TestNoAllocations(t *testing.T) {
	c, srv := pair(t)
	msg, buf := []byte("ping"), make([]byte, 4)
	go io.Copy(srv, srv)
	if n := testing.AllocsPerRun(200, func() {
		if _, err := c.Write(msg); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, buf); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("%.1f allocations per write and read", n)
	}
}

// TestDialer: a connection Dialer makes is wrapped (outside the race
// detector), carries bytes both ways, and a failed dial is the dialer's
// error.
func TestDialer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		io.Copy(c, c)
	}()
	dial := Dialer(&net.Dialer{Timeout: time.Second})
	c, err := dial(context.Background(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, wrapped := c.(*Conn); wrapped == raceEnabled {
		t.Fatalf("wrapped %v under the race detector %v", wrapped, raceEnabled)
	}
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("read %q, %v", buf, err)
	}
	ln2, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln2.Addr().String()
	ln2.Close()
	if c, err := dial(context.Background(), "tcp", addr); err == nil || c != nil {
		t.Fatalf("dial to a closed port: %v, %v", c, err)
	}
}

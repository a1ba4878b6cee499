package conncheck

import (
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/inferrail/inferrail/transport/sockio"
)

func pair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	acc := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		acc <- c
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server = <-acc
	if server == nil {
		t.Fatal("accept failed")
	}
	return client, server
}

func waitGone(t *testing.T, c net.Conn, want bool) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for Gone(c) != want {
		if time.Now().After(deadline) {
			t.Fatalf("Gone stayed %v", !want)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestGone(t *testing.T) {
	client, server := pair(t)
	defer server.Close()
	if Gone(server) {
		t.Fatal("an idle open connection looks gone")
	}
	if _, err := client.Write([]byte("GET / HTTP/1.1\r\n")); err != nil {
		t.Fatal(err)
	}
	waitGone(t, server, false)
	client.Close()
	// Unread bytes are still buffered: a peek sees data first, so read them.
	buf := make([]byte, 64)
	server.SetReadDeadline(time.Now().Add(time.Second))
	server.Read(buf)
	waitGone(t, server, true)
}

func TestGoneClosedLocally(t *testing.T) {
	client, server := pair(t)
	defer client.Close()
	server.Close()
	if !Gone(server) {
		t.Fatal("a locally closed connection looks alive")
	}
}

func TestWatcher(t *testing.T) {
	w := NewWatcher(5 * time.Millisecond)
	defer w.Close()
	client, server := pair(t)
	defer server.Close()
	fired := make(chan error, 4)
	errCheck := errors.New("check failed")
	var failCheck atomic.Bool
	w.Add(server, func() error {
		if failCheck.Load() {
			return errCheck
		}
		return nil
	}, func(cause error) { fired <- cause })
	select {
	case err := <-fired:
		t.Fatalf("fired %v for a live connection", err)
	case <-time.After(30 * time.Millisecond):
	}
	failCheck.Store(true)
	if err := <-fired; err != errCheck {
		t.Fatalf("check: fired %v", err)
	}
	failCheck.Store(false)
	for len(fired) > 0 {
		<-fired
	}
	client.Close()
	deadline := time.After(2 * time.Second)
	for {
		select {
		case err := <-fired:
			if err == ErrGone {
				return
			}
		case <-deadline:
			t.Fatal("a closed connection was not reported")
		}
	}
}

// target records what a Watcher reports to it.
type target struct{ fired chan error }

func (target) Check() error       { return nil }
func (t target) Fire(cause error) { t.fired <- cause }

// Watch registers an Entry its caller holds; FireAll reports a cause to
// every entry at once, and they stay registered; after Remove, nothing.
func TestWatchFireAll(t *testing.T) {
	w := NewWatcher(time.Hour)
	defer w.Close()
	var entries [2]Entry
	var targets [2]target
	for i := range entries {
		client, server := pair(t)
		defer client.Close()
		defer server.Close()
		targets[i] = target{fired: make(chan error, 2)}
		w.Watch(&entries[i], server, targets[i])
	}
	errCut := errors.New("cut")
	w.FireAll(errCut)
	w.FireAll(errCut)
	for i, tg := range targets {
		for range 2 {
			if err := <-tg.fired; err != errCut {
				t.Fatalf("entry %d: fired %v", i, err)
			}
		}
	}
	w.Remove(&entries[0])
	w.FireAll(errCut)
	if len(targets[0].fired) != 0 || len(targets[1].fired) != 1 {
		t.Fatalf("after Remove: %d and %d fired, want 0 and 1", len(targets[0].fired), len(targets[1].fired))
	}
}

// TestProbeThroughSockio: a sweep's probe tells a transport/sockio
// connection (the front end's) open and then gone, and checking one
// allocates nothing, outside the race detector, under which sockio leaves
// connections unwrapped.
func TestProbeThroughSockio(t *testing.T) {
	client, server := pair(t)
	server = sockio.Wrap(server)
	defer server.Close()
	p := newProbe()
	if p.gone(server) {
		t.Fatal("an idle open connection looks gone")
	}
	if _, isWrapped := server.(*sockio.Conn); isWrapped {
		if n := testing.AllocsPerRun(100, func() { p.gone(server) }); n != 0 {
			t.Errorf("a check allocates %.1f times", n)
		}
	}
	client.Close()
	deadline := time.Now().Add(2 * time.Second)
	for !p.gone(server) {
		if time.Now().After(deadline) {
			t.Fatal("a connection whose client closed still looks open")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestWatcherRestsWhenIdle: with nothing registered the watcher stops
// ticking, and a connection registered after a long rest is still watched:
// its client's close fires within a few ticks.
func TestWatcherRestsWhenIdle(t *testing.T) {
	const every = 5 * time.Millisecond
	w := NewWatcher(every)
	defer w.Close()
	// The first tick finds nothing and the watcher rests right after it.
	for deadline := time.Now().Add(2 * time.Second); w.ticks.Load() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the watcher never ticked")
		}
	}
	rested := w.ticks.Load()
	time.Sleep(20 * every)
	if n := w.ticks.Load() - rested; n > 1 {
		t.Fatalf("%d ticks with nothing to watch", n)
	}
	client, server := pair(t)
	defer server.Close()
	fired := make(chan error, 1)
	w.Add(server, nil, func(cause error) { fired <- cause })
	client.Close()
	select {
	case err := <-fired:
		if !errors.Is(err, ErrGone) {
			t.Fatalf("fired with %v", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("a client that closed after the watcher rested was never seen to go")
	}
	if w.ticks.Load() == rested {
		t.Fatal("the watcher did not tick again after Add")
	}
}

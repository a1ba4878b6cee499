package frontend

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/inferrail/inferrail/sim"
)

// TestAttemptCtx: an attempt's context keeps the context contract (Done,
// Err, Deadline, AfterFunc as the context package runs it) and tells its
// cause; at the deadline it ends with DeadlineExceeded and errTimeout.
// Its pooled deadline timer does not cancel an attempt before its deadline.
func TestAttemptCtx(t *testing.T) {
	var a attemptCtx
	a.start(time.Now().Add(time.Hour))
	if dl, ok := a.Deadline(); !ok || time.Until(dl) < 59*time.Minute {
		t.Fatalf("deadline %v %v", dl, ok)
	}
	if a.Err() != nil || a.Cause() != nil {
		t.Fatalf("running: %v %v", a.Err(), a.Cause())
	}
	ran := make(chan int, 3)
	stop1 := a.AfterFunc(func() { ran <- 1 })
	stop2 := a.AfterFunc(func() { ran <- 2 })
	// The context package registers through AfterFunc too.
	stop3 := context.AfterFunc(&a, func() { ran <- 3 })
	if !stop2() || stop2() {
		t.Fatal("stop: want true once, then false")
	}
	done := a.Done()
	a.cancel(errClientGone)
	a.cancel(errShutdown) // only the first counts
	<-done
	if !errors.Is(a.Err(), context.Canceled) || a.Cause() != errClientGone {
		t.Fatalf("cancelled: %v %v", a.Err(), a.Cause())
	}
	got := map[int]bool{}
	for range 2 {
		select {
		case n := <-ran:
			got[n] = true
		case <-time.After(2 * time.Second):
			t.Fatalf("after funcs: ran %v", got)
		}
	}
	if !got[1] || !got[3] || stop1() || stop3() {
		t.Fatalf("after funcs: ran %v", got)
	}
	// Registered after the end: runs at once.
	a.AfterFunc(func() { ran <- 4 })
	if n := <-ran; n != 4 {
		t.Fatalf("late after func: %d", n)
	}

	var b attemptCtx
	b.start(time.Now().Add(10 * time.Millisecond))
	select {
	case <-b.Done():
	case <-time.After(2 * time.Second):
		t.Fatal("deadline: not done")
	}
	if b.Err() != context.DeadlineExceeded || b.Cause() != errTimeout {
		t.Fatalf("deadline: %v %v", b.Err(), b.Cause())
	}
	// A pooled deadline timer that fires late, after its attempt ended,
	// leaves the next attempt it serves alone.
	var d attemptCtx
	d.start(time.Now().Add(time.Hour))
	d.timer.fire()
	if d.Err() != nil {
		t.Fatalf("a late timer cancelled an attempt: %v", d.Cause())
	}
	d.cancel(nil)

	var c attemptCtx
	c.start(time.Now().Add(time.Hour))
	c.cancel(nil)
	if c.Err() != context.Canceled || c.Cause() != context.Canceled {
		t.Fatalf("cancel(nil): %v %v", c.Err(), c.Cause())
	}
	<-c.Done() // closed, though made after the end
}

// TestShutdownCutsRequests: requests still running at Shutdown's deadline
// are cut, a non-streamed one waiting on the engine and a stream: the
// engine sees both clients go, long before they would have finished.
func TestShutdownCutsRequests(t *testing.T) {
	g := start(t, 1, func(o *sim.Options) {
		o.Engine.Latency.Zero = false
		o.Engine.Latency.DecodeToken = 50 * time.Millisecond
	}, nil)
	ended := make(chan struct{}, 2)
	for _, stream := range []string{"false", "true"} {
		go func() {
			defer func() { ended <- struct{}{} }()
			resp, err := client().Post(g.url("/v1/completions"), "application/json",
				strings.NewReader(`{"prompt":"long","max_tokens":400,"stream":`+stream+`}`))
			if err != nil {
				return
			}
			defer resp.Body.Close()
			io.Copy(io.Discard, resp.Body)
		}()
	}
	waitFor(t, "two requests running", 2*time.Second, func() bool { return g.engineStats(0).Running == 2 })
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	t0 := time.Now()
	g.fe.Shutdown(ctx)
	// 400 tokens take 20 s: the engine must see both requests aborted.
	waitFor(t, "the engine's requests aborted", 3*time.Second, func() bool { return g.engineStats(0).Running == 0 })
	for range 2 {
		select {
		case <-ended:
		case <-time.After(3 * time.Second):
			t.Fatal("a client was not cut")
		}
	}
	if took := time.Since(t0); took > 3*time.Second {
		t.Fatalf("shutdown took %v", took)
	}
}

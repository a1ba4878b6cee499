package upstream

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
	"golang.org/x/sys/unix"

	"github.com/inferrail/inferrail/sim"
)

// errClientGone stands in for the frontend's cancel cause.
var errClientGone = errors.New("client gone")

// doAsync runs Do in a goroutine and reports its result and when it returned.
type result struct {
	resp *Response
	err  error
	at   time.Time
}

func doAsync(ctx context.Context, p *Pool, req *fasthttp.Request) <-chan result {
	ch := make(chan result, 1)
	go func() {
		resp, err := p.Do(ctx, req)
		ch <- result{resp, err, time.Now()}
	}()
	return ch
}

// A hung engine: Do is blocked on the head. Cancelling returns at once, and
// the replica sees the connection close.
func TestCancelWhileWaitingForHead(t *testing.T) {
	s := startSim(t, zero)
	p := newPool(t, s.URL(), Options{})
	do(t, p, chatPath, chatBody) // cancel on a reused conn too
	s.SetFault(sim.Fault{Kind: sim.FaultHang})
	for _, reused := range []bool{true, false} {
		req := newReq(chatPath, chatBody)
		ctx, cancel := context.WithCancelCause(context.Background())
		ch := doAsync(ctx, p, req)
		select {
		case r := <-ch:
			t.Fatalf("answered while hung: %v", r.err)
		case <-time.After(30 * time.Millisecond):
		}
		t0 := time.Now()
		cancel(errClientGone)
		var r result
		select {
		case r = <-ch:
		case <-time.After(50 * time.Millisecond):
			t.Fatal("Do still blocked 50ms after cancel")
		}
		fasthttp.ReleaseRequest(req)
		if !errors.Is(r.err, context.Canceled) || !errors.Is(r.err, errClientGone) || isClosedError(r.err) {
			t.Fatalf("got %v, want context.Canceled and its cause", r.err)
		}
		t.Logf("reused=%v: Do returned %v after cancel: %v", reused, r.at.Sub(t0), r.err)
	}
	if st := p.Stats(); st.StaleRetries != 0 || st.Idle != 0 {
		t.Fatalf("%+v", st)
	}
}

// The replica's side of a cancel while waiting: a raw fake that reads the
// request and then waits for the client to go.
func TestCancelWhileWaitingClosesConnection(t *testing.T) {
	gone := make(chan time.Time, 1)
	f := startFake(t, func(_ int64, c net.Conn, br *bufio.Reader) {
		if !readReq(br) {
			return
		}
		br.ReadByte() // blocks until the client closes
		gone <- time.Now()
	})
	p := newPool(t, f.URL(), Options{})
	req := newReq(chatPath, chatBody)
	defer fasthttp.ReleaseRequest(req)
	ctx, cancel := context.WithCancel(context.Background())
	ch := doAsync(ctx, p, req)
	time.Sleep(20 * time.Millisecond)
	t0 := time.Now()
	cancel()
	r := <-ch
	select {
	case at := <-gone:
		t.Logf("Do returned after %v, the replica saw EOF after %v", r.at.Sub(t0), at.Sub(t0))
		if d := r.at.Sub(t0); d > 50*time.Millisecond {
			t.Fatalf("Do returned %v after cancel", d)
		}
	case <-time.After(time.Second):
		t.Fatal("the replica never saw the connection close")
	}
}

// A request queued behind another on a one-slot engine: cancelling it
// withdraws it from the engine's waiting queue.
func TestCancelQueuedRequestAborts(t *testing.T) {
	s := startSim(t, func(o *sim.Options) { o.Engine.MaxNumSeqs = 1 })
	p := newPool(t, s.URL(), Options{})

	hold := newStreamReq(t, 2000)
	holdCtx, stopHold := context.WithCancel(context.Background())
	defer stopHold()
	front, err := p.Do(holdCtx, hold)
	if err != nil {
		t.Fatal(err)
	}
	defer front.Close()
	waitFor(t, "first request running", 2*time.Second, func() bool { return simStats(t, s).Running == 1 })

	req := newReq("/v1/completions", `{"prompt":"wait","max_tokens":5}`)
	defer fasthttp.ReleaseRequest(req)
	ctx, cancel := context.WithCancel(context.Background())
	ch := doAsync(ctx, p, req)
	waitFor(t, "second request waiting", 2*time.Second, func() bool { return simStats(t, s).Waiting == 1 })
	t0 := time.Now()
	cancel()
	select {
	case r := <-ch:
		if !errors.Is(r.err, context.Canceled) {
			t.Fatalf("got %v", r.err)
		}
		t.Logf("Do returned %v after cancel", r.at.Sub(t0))
	case <-time.After(50 * time.Millisecond):
		t.Fatal("Do still blocked 50ms after cancel")
	}
	d := waitFor(t, "queued request aborted", 500*time.Millisecond, func() bool {
		st := simStats(t, s)
		return st.Waiting == 0 && st.Running == 1 && st.FinishedByReason["abort"] == 1
	})
	t.Logf("engine dropped the queued request %v after cancel", d)
}

// Cancelling mid-stream unblocks the reader and frees the engine's slot.
func TestCancelWhileStreamingAborts(t *testing.T) {
	s := startSim(t, func(o *sim.Options) { o.Engine.Latency.DecodeToken = 5 * time.Millisecond })
	p := newPool(t, s.URL(), Options{})
	ctx, cancel := context.WithCancelCause(context.Background())
	resp, err := p.Do(ctx, newStreamReq(t, 2000))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Close()
	br := bufio.NewReader(resp)
	for n := 0; n < 3; {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(line, "data: ") {
			n++
		}
	}
	if st := simStats(t, s); st.Running != 1 {
		t.Fatalf("running %d", st.Running)
	}
	// Read on until the cancel lands: the blocked Read must return.
	done := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, br)
		done <- err
	}()
	time.Sleep(10 * time.Millisecond)
	t0 := time.Now()
	cancel(errClientGone)
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) || !errors.Is(err, errClientGone) {
			t.Fatalf("read error %v", err)
		}
		t.Logf("Read returned %v after cancel", time.Since(t0))
	case <-time.After(50 * time.Millisecond):
		t.Fatal("Read still blocked 50ms after cancel")
	}
	d := waitFor(t, "stream aborted", 200*time.Millisecond, func() bool {
		st := simStats(t, s)
		return st.Running == 0 && st.FinishedByReason["abort"] == 1 && st.UsedBlocks == 0
	})
	t.Logf("engine aborted the stream %v after cancel", d)
}

// Closing a Response mid-stream aborts the request just as cancelling does.
func TestCloseWhileStreamingAborts(t *testing.T) {
	s := startSim(t, func(o *sim.Options) { o.Engine.Latency.DecodeToken = 5 * time.Millisecond })
	p := newPool(t, s.URL(), Options{})
	resp, err := p.Do(context.Background(), newStreamReq(t, 2000))
	if err != nil {
		t.Fatal(err)
	}
	var b [256]byte
	if _, err := resp.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	resp.Close()
	d := waitFor(t, "stream aborted", 200*time.Millisecond, func() bool {
		st := simStats(t, s)
		return st.Running == 0 && st.FinishedByReason["abort"] == 1
	})
	t.Logf("engine aborted the stream %v after Close", d)
}

// A context that is already done dials nothing.
func TestCancelledBeforeDo(t *testing.T) {
	p := newPool(t, "http://127.0.0.1:1", Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	req := newReq(chatPath, chatBody)
	defer fasthttp.ReleaseRequest(req)
	if _, err := p.Do(ctx, req); !errors.Is(err, context.Canceled) || isDialError(err) {
		t.Fatalf("got %v", err)
	}
	if st := p.Stats(); st.Dials+st.DialErrors != 0 {
		t.Fatalf("%+v", st)
	}
}

// A cancel that lands after the response is complete changes nothing, and
// the connection is still reused.
func TestCancelAfterCompletion(t *testing.T) {
	s := startSim(t, zero)
	p := newPool(t, s.URL(), Options{})
	for range 3 {
		ctx, cancel := context.WithCancel(context.Background())
		doCtx(t, ctx, p, chatPath, chatBody)
		cancel()
	}
	if st := p.Stats(); st.Dials != 1 {
		t.Fatalf("%+v", st)
	}
}

// fullBacklog returns the address of a listener that never accepts, with its
// accept queue already full: a connect to it hangs (Linux drops the SYN).
func fullBacklog(t *testing.T) string {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(sa.(*unix.SockaddrInet4).Port))
	c, err := net.Dial("tcp", addr) // takes the one queue slot
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return addr
}

func TestDialTimeoutIsDialError(t *testing.T) {
	p := newPool(t, "http://"+fullBacklog(t), Options{DialTimeout: 50 * time.Millisecond})
	req := newReq(chatPath, chatBody)
	defer fasthttp.ReleaseRequest(req)
	t0 := time.Now()
	_, err := p.Do(context.Background(), req)
	d := time.Since(t0)
	if !isDialError(err) {
		t.Fatalf("got %v, want a DialError", err)
	}
	if d < 50*time.Millisecond || d > 550*time.Millisecond {
		t.Fatalf("dial gave up after %v", d)
	}
	t.Log(err)
}

func TestCancelWhileDialing(t *testing.T) {
	p := newPool(t, "http://"+fullBacklog(t), Options{})
	req := newReq(chatPath, chatBody)
	defer fasthttp.ReleaseRequest(req)
	ctx, cancel := context.WithCancel(context.Background())
	ch := doAsync(ctx, p, req)
	time.Sleep(20 * time.Millisecond)
	t0 := time.Now()
	cancel()
	select {
	case r := <-ch:
		if !errors.Is(r.err, context.Canceled) || isDialError(r.err) {
			t.Fatalf("got %v", r.err)
		}
		t.Logf("Do returned %v after cancel", r.at.Sub(t0))
	case <-time.After(50 * time.Millisecond):
		t.Fatal("Do still dialling 50ms after cancel")
	}
	if st := p.Stats(); st.DialErrors != 0 {
		t.Fatalf("a cancelled dial counted as the replica's failure: %+v", st)
	}
}

package mailbox

import (
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/goleak"
)

// TestMain fails the package when a test leaves a goroutine behind.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// short is an Inline message; the actor notes its n and, while n < more,
// sends itself short{n + 1}.
type short struct{ n, more int }

func (short) Inline() {}

// slow is an ordinary message: the actor waits for release to close.
type slow struct{ release chan struct{} }

// boom is an Inline message the actor panics on.
type boom struct{}

func (boom) Inline() {}

// recorder notes the messages it handled, in order, on seen.
type recorder struct {
	seen    chan int // short's n; -1 for slow
	started chan struct{}
	// gate, when not nil, holds short{n: gateAt} until it is closed.
	gate   chan struct{}
	gateAt int
}

func (r *recorder) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		r.started <- struct{}{}
	case short:
		if r.gate != nil && m.n == r.gateAt {
			<-r.gate
		}
		r.seen <- m.n
		if m.n < m.more {
			ctx.Send(ctx.Self(), short{m.n + 1, m.more})
		}
	case slow:
		<-m.release
		r.seen <- -1
	case boom:
		panic("boom")
	}
}

// spawn starts a recorder with the mailbox and waits until it has started,
// so that no system message is queued when the test posts.
func spawn(t *testing.T) (*actor.ActorSystem, *actor.PID, *recorder) {
	t.Helper()
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.DiscardHandler)
	}))
	t.Cleanup(sys.Shutdown)
	r := &recorder{seen: make(chan int, 64), started: make(chan struct{}, 8)}
	pid := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return r }, actor.WithMailbox(New)))
	t.Cleanup(func() { _ = sys.Root.StopFuture(pid).Wait() })
	waitStarted(t, r)
	return sys, pid, r
}

func waitStarted(t *testing.T, r *recorder) {
	t.Helper()
	select {
	case <-r.started:
	case <-time.After(5 * time.Second):
		t.Fatal("the actor did not start")
	}
}

// next receives the next value r noted.
func next(t *testing.T, r *recorder) int {
	t.Helper()
	select {
	case n := <-r.seen:
		return n
	case <-time.After(5 * time.Second):
		t.Fatal("nothing handled")
		return 0
	}
}

// An Inline message to an idle actor is handled before Send returns, in
// the sender's goroutine; an ordinary one is not (its handler waits for
// the sender, which would deadlock inline).
func TestInlineIdle(t *testing.T) {
	sys, pid, r := spawn(t)
	sys.Root.Send(pid, short{n: 1})
	select {
	case n := <-r.seen:
		if n != 1 {
			t.Fatalf("handled %d, want 1", n)
		}
	default:
		t.Fatal("an Inline message to an idle actor was not handled before Send returned")
	}

	release := make(chan struct{})
	sent := make(chan struct{})
	go func() {
		sys.Root.Send(pid, slow{release})
		close(sent)
	}()
	select {
	case <-sent:
	case <-time.After(5 * time.Second):
		t.Fatal("Send of an ordinary message waited for its handler")
	}
	close(release)
	if n := next(t, r); n != -1 {
		t.Fatalf("handled %d, want the slow message", n)
	}
}

// An Inline message queued behind an ordinary one waits its turn: the
// order of the mailbox is kept.
func TestInlineKeepsOrder(t *testing.T) {
	sys, pid, r := spawn(t)
	release := make(chan struct{})
	sys.Root.Send(pid, slow{release})
	sys.Root.Send(pid, short{n: 7})
	select {
	case n := <-r.seen:
		t.Fatalf("handled %d before the slow message ahead of it", n)
	default:
	}
	close(release)
	if a, b := next(t, r), next(t, r); a != -1 || b != 7 {
		t.Fatalf("handled %d then %d, want -1 then 7", a, b)
	}
}

// A poster handles at most inlineBudget messages, its own and those they
// send to the same actor; the dispatcher handles the rest, in order. The
// first one past the budget waits for the test, which would deadlock if
// the poster handled it.
func TestInlineBudget(t *testing.T) {
	sys, pid, r := spawn(t)
	r.gate, r.gateAt = make(chan struct{}), inlineBudget+1
	const more = 3 * inlineBudget
	sent := make(chan struct{})
	go func() {
		sys.Root.Send(pid, short{n: 1, more: more})
		close(sent)
	}()
	select {
	case <-sent:
	case <-time.After(5 * time.Second):
		t.Fatal("the poster handled more than inlineBudget messages")
	}
	if got := len(r.seen); got != inlineBudget {
		t.Fatalf("%d messages handled before Send returned, want %d", got, inlineBudget)
	}
	close(r.gate)
	for want := 1; want <= more; want++ {
		if n := next(t, r); n != want {
			t.Fatalf("handled %d, want %d", n, want)
		}
	}
}

// A panic in an Inline message goes to the supervisor, which restarts the
// actor; it then handles messages again.
func TestInlinePanicRestarts(t *testing.T) {
	sys, pid, r := spawn(t)
	sys.Root.Send(pid, boom{})
	waitStarted(t, r) // the restarted incarnation
	sys.Root.Send(pid, short{n: 2})
	if n := next(t, r); n != 2 {
		t.Fatalf("handled %d after the restart, want 2", n)
	}
}

// Concurrent posters lose no message and the actor handles one at a time.
func TestConcurrentPosters(t *testing.T) {
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.DiscardHandler)
	}))
	t.Cleanup(sys.Shutdown)
	c := &counter{done: make(chan struct{})}
	const posters, each = 4, 2000
	c.want = posters * each
	pid := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return c }, actor.WithMailbox(New)))
	t.Cleanup(func() { _ = sys.Root.StopFuture(pid).Wait() })
	var wg sync.WaitGroup
	for p := range posters {
		wg.Go(func() {
			for i := range each {
				if (p+i)%3 == 0 {
					sys.Root.Send(pid, plain{})
				} else {
					sys.Root.Send(pid, short{})
				}
			}
		})
	}
	wg.Wait()
	select {
	case <-c.done:
	case <-time.After(10 * time.Second):
		t.Fatalf("handled %d of %d messages", c.n, c.want)
	}
}

type plain struct{}

// counter counts the messages it handled; with plain fields, so that the
// race detector sees two handlers at once.
type counter struct {
	n, want int
	done    chan struct{}
}

func (c *counter) Receive(ctx actor.Context) {
	switch ctx.Message().(type) {
	case short, plain:
		if c.n++; c.n == c.want {
			close(c.done)
		}
	}
}

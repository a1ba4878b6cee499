package replica

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/goleak"

	"github.com/inferrail/inferrail/config"
	"github.com/inferrail/inferrail/model/estimate"
)

// TestMain fails the package when a test leaves a goroutine behind.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// waitFor polls cond every millisecond until it holds, failing the test if
// it does not within 5s.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 5s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// clock is a controllable clock for ejection times.
type clock struct{ ns atomic.Int64 }

func newClock() *clock {
	c := &clock{}
	c.ns.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	return c
}

func (c *clock) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *clock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

// scriptProber is a fake Prober whose every probe waits for the test to
// hand it a result. It records each call's cards flag.
type scriptProber struct {
	calls   chan bool  // cards flag of each call
	results chan error // one per probe; nil passes
	cards   map[string][]byte
}

func newScriptProber() *scriptProber {
	return &scriptProber{
		calls:   make(chan bool, 1024),
		results: make(chan error),
		cards:   map[string][]byte{"m": []byte(`{"id":"m","object":"model"}`)},
	}
}

func (p *scriptProber) Probe(ctx context.Context, url string, cards bool) (map[string][]byte, error) {
	p.calls <- cards
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case err := <-p.results:
		if err == nil && cards {
			return p.cards, nil
		}
		return nil, err
	}
}

// next waits for the next probe call and answers it with err, returning the
// call's cards flag.
func (p *scriptProber) next(t testing.TB, err error) bool {
	t.Helper()
	var cards bool
	select {
	case cards = <-p.calls:
	case <-time.After(5 * time.Second):
		t.Fatal("no probe within 5s")
	}
	select {
	case p.results <- err:
	case <-time.After(5 * time.Second):
		t.Fatal("probe did not take its result within 5s")
	}
	return cards
}

// harness is a fresh actor system with a supervising parent for replica
// actors, torn down (actors stopped, probers joined) at cleanup.
type harness struct {
	sys    *actor.ActorSystem
	parent *actor.PID
	wg     sync.WaitGroup
}

type spawnChild struct {
	props *actor.Props
	pid   chan *actor.PID
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	h := &harness{sys: actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.DiscardHandler)
	}))}
	parent := actor.PropsFromFunc(func(ctx actor.Context) {
		if m, ok := ctx.Message().(*spawnChild); ok {
			m.pid <- ctx.Spawn(m.props)
		}
	}, actor.WithSupervisor(Supervisor()))
	h.parent = h.sys.Root.Spawn(parent)
	t.Cleanup(func() {
		if err := h.sys.Root.StopFuture(h.parent).Wait(); err != nil {
			t.Errorf("stop: %v", err)
		}
		h.wg.Wait()
		h.sys.Shutdown()
	})
	return h
}

// spawn starts a replica actor for hd under the supervising parent.
func (h *harness) spawn(hd *Handle, cfg Config) *actor.PID {
	cfg.Goroutines = &h.wg
	m := &spawnChild{props: Props(hd, cfg), pid: make(chan *actor.PID, 1)}
	h.sys.Root.Send(h.parent, m)
	return <-m.pid
}

func (h *harness) send(pid *actor.PID, msg Message) { h.sys.Root.Send(pid, msg) }

// sync waits until the actor has processed every message sent before.
func (h *harness) sync(t testing.TB, pid *actor.PID) {
	t.Helper()
	if err := h.sys.Root.RequestFuture(pid, &actor.Touch{}, 5*time.Second).Wait(); err != nil {
		t.Fatalf("sync: %v", err)
	}
}

func testHealth() config.Health {
	return config.Health{
		Interval:           time.Millisecond,
		Timeout:            time.Minute, // probes wait for the test's answer
		UnhealthyThreshold: 3,
		EjectionBackoff:    5 * time.Second,
		MaxEjectionBackoff: 20 * time.Second,
		MaxEjectionPercent: 50,
	}
}

// predict is the cached tokens the replica at pid predicts for q, through
// an estimate broadcast of one.
func (h *harness) predict(t testing.TB, pid *actor.PID, q estimate.Query) int {
	t.Helper()
	g := NewGather(q, 1)
	h.send(pid, &Estimate{Gather: g, Slot: 0})
	h.sync(t, pid)
	r, ok := g.Reply(0)
	if !ok {
		t.Fatal("no estimate")
	}
	return r.CachedTokens
}

package routing

import (
	"log/slog"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/goleak"

	"github.com/inferrail/inferrail/actors/replica"
	"github.com/inferrail/inferrail/model/policy"
)

// TestMain fails the package when a test leaves a goroutine behind.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// fakeReplica is a replica whose snapshot the test sets directly.
type fakeReplica struct {
	snap atomic.Pointer[replica.Snapshot]
}

func newFake(id string, models []string, c *replica.Counters) *fakeReplica {
	f := &fakeReplica{}
	f.snap.Store(&replica.Snapshot{ID: id, URL: "http://" + id, Models: models, Healthy: true, Counters: c})
	return f
}

func (f *fakeReplica) Snapshot() *replica.Snapshot { return f.snap.Load() }

// set publishes a copy of the snapshot changed by edit.
func (f *fakeReplica) set(edit func(s *replica.Snapshot)) {
	s := *f.snap.Load()
	edit(&s)
	f.snap.Store(&s)
}

// newSystem returns a fresh actor system, shut down at cleanup after the
// test's actors (stopped by the cleanups spawn registers).
func newSystem(t testing.TB) *actor.ActorSystem {
	t.Helper()
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.DiscardHandler)
	}))
	t.Cleanup(sys.Shutdown)
	return sys
}

// spawn starts a routing actor for model with policy name over replicas,
// stopped at cleanup.
func spawn(t testing.TB, sys *actor.ActorSystem, model, name string, seed uint64, now func() time.Time, replicas ...Replica) *actor.PID {
	t.Helper()
	p, err := policy.New(name)
	if err != nil {
		t.Fatal(err)
	}
	pid := sys.Root.Spawn(Props(Config{Model: model, Policy: p, Rand: rand.New(rand.NewPCG(seed, 0)), Now: now}))
	t.Cleanup(func() { _ = sys.Root.StopFuture(pid).Wait() })
	sys.Root.Send(pid, &ReplicasChanged{Replicas: replicas})
	return pid
}

// ask sends a Pick and waits for its answer.
func ask(t testing.TB, sys *actor.ActorSystem, pid *actor.PID, m *Pick) *Picked {
	t.Helper()
	if m.Deadline.IsZero() {
		m.Deadline = time.Now().Add(5 * time.Second)
	}
	res, err := sys.Root.RequestFuture(pid, m, 5*time.Second).Result()
	if err != nil {
		t.Fatalf("pick: %v", err)
	}
	return res.(*Picked)
}

// barrier waits until the actor has processed every message sent before.
func barrier(t testing.TB, sys *actor.ActorSystem, pid *actor.PID) {
	t.Helper()
	if err := sys.Root.RequestFuture(pid, &actor.Touch{}, 5*time.Second).Wait(); err != nil {
		t.Fatal(err)
	}
}

package routing

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/asynkron/protoactor-go/actor"

	"github.com/inferrail/inferrail/actors/replica"
	"github.com/inferrail/inferrail/model/cost"
	"github.com/inferrail/inferrail/model/policy"
	"github.com/inferrail/inferrail/model/prefix"
	"github.com/inferrail/inferrail/model/route"
)

// estimating is a fake replica whose actor answers estimates with a fixed
// prediction, or never when silent.
type estimating struct {
	*fakeReplica
	pid *actor.PID
}

func (e *estimating) PID() *actor.PID { return e.pid }

// answerer answers every Estimate with an empty reply, unless silent.
type answerer struct {
	silent bool
}

func (a *answerer) Receive(ctx actor.Context) {
	if m, ok := ctx.Message().(*replica.Estimate); ok {
		if !a.silent {
			m.Gather.Fill(m.Slot, route.Reply{})
		}
	}
}

func blocksOf(n int) []prefix.Hash {
	ids := make([]uint32, n)
	for i := range ids {
		ids[i] = uint32(i)
	}
	var h prefix.Hasher
	return h.Chain(nil, prefix.Root("m", "", ""), ids, 16)
}

// spawnHalfSilent starts a cost_model routing actor, counting into set,
// over two estimating replicas: r0's actor never answers, r1's does.
func spawnHalfSilent(t *testing.T, sys *actor.ActorSystem, set *metrics.Set) *actor.PID {
	t.Helper()
	var reps []Replica
	for i, silent := range []bool{true, false} {
		f := newFake([]string{"r0", "r1"}[i], []string{"m"}, replica.NewCounters(0, 0))
		f.set(func(s *replica.Snapshot) { s.Shadow = &replica.Shadow{} })
		pid := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return &answerer{silent: silent} }))
		reps = append(reps, &estimating{fakeReplica: f, pid: pid})
	}
	pid := sys.Root.Spawn(Props(Config{Model: "m", Policy: policy.NewCostModel(policy.DefaultCostModelParams()),
		Rand: rand.New(rand.NewPCG(1, 1)), Estimates: true, CostModel: cost.Default(), Metrics: set}))
	t.Cleanup(func() { _ = sys.Root.StopFuture(pid).Wait() })
	sys.Root.Send(pid, &ReplicasChanged{Replicas: reps})
	return pid
}

// A replica actor that never answers costs the decision its cache
// prediction, not the decision: the asker's deadline message makes the
// routing actor decide with the replies it has, and the miss is counted.
func TestSilentReplicaIsPricedFromPublishedState(t *testing.T) {
	sys := newSystem(t)
	set := metrics.NewSet()
	pid := spawnHalfSilent(t, sys, set)

	m := &Pick{Request: policy.Request{PromptTokens: 400, BlockSize: 16, Blocks: blocksOf(400)},
		Deadline: time.Now().Add(5 * time.Second), Answered: make(chan struct{}, 1)}
	sys.Root.Send(pid, m)
	select {
	case <-m.Answered:
		t.Fatal("decided before every replica answered or the deadline passed")
	case <-time.After(20 * time.Millisecond):
	}
	sys.Root.Send(pid, &Gathered{Pick: m}) // the asker's estimate deadline
	select {
	case <-m.Answered:
	case <-time.After(5 * time.Second):
		t.Fatal("no decision after the deadline message")
	}
	p := m.Answer()
	if p == nil || p.Err != nil || p.Attempt == nil {
		t.Fatalf("answer %+v", p)
	}
	p.Lease.Release()
	misses := set.GetOrCreateCounter(`inferrail_estimate_deadline_misses_total{model="m"}`).Get()
	if misses != 1 {
		t.Fatalf("%d deadline misses counted, want 1 (the silent replica)", misses)
	}
	// A second Gathered for the same Pick changes nothing.
	sys.Root.Send(pid, &Gathered{Pick: m})
	if err := sys.Root.RequestFuture(pid, &actor.Touch{}, time.Second).Wait(); err != nil {
		t.Fatal(err)
	}
	if got := set.GetOrCreateCounter(`inferrail_estimate_deadline_misses_total{model="m"}`).Get(); got != 1 {
		t.Fatalf("a late Gathered counted again: %d", got)
	}
}

// An Explain whose broadcast a replica never answers is explained once the
// estimate deadline has passed, with that replica priced from its
// published state, instead of waiting out its own deadline.
func TestExplainAfterEstimateDeadline(t *testing.T) {
	sys := newSystem(t)
	pid := spawnHalfSilent(t, sys, metrics.NewSet())
	m := &Explain{Request: policy.Request{PromptTokens: 400, BlockSize: 16, Blocks: blocksOf(400)},
		Deadline: time.Now().Add(time.Minute)}
	done := make(chan *Explanation, 1)
	go func() { done <- Explaining(sys.Root, pid, m, 200*time.Millisecond) }() // time enough for the one that answers, on a loaded machine
	select {
	case ex := <-done:
		if ex == nil || ex.Err != nil || ex.Winner == "" || len(ex.Replicas) != 2 || ex.Replicas[0].Answered || !ex.Replicas[1].Answered {
			t.Fatalf("explanation %+v", ex)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no explanation well past the estimate deadline")
	}
}

// The actor never writes to a Pick: the request's time is the decision's
// own, as the shadows see it, while the Pick keeps the zero time it was
// sent with.
func TestPickNotWritten(t *testing.T) {
	sys := newSystem(t)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	rec := &trialRecorder{}
	pid := sys.Root.Spawn(Props(Config{Model: "m", Policy: &policy.RoundRobin{}, Rand: rand.New(rand.NewPCG(1, 1)),
		Now: func() time.Time { return now }, Trials: rec}))
	t.Cleanup(func() { _ = sys.Root.StopFuture(pid).Wait() })
	sys.Root.Send(pid, &ReplicasChanged{Replicas: []Replica{newFake("r0", []string{"m"}, replica.NewCounters(0, 0))}})
	m := &Pick{}
	p := ask(t, sys, pid, m)
	if p.Err != nil {
		t.Fatal(p.Err)
	}
	p.Lease.Release()
	barrier(t, sys, pid)
	if !m.Request.Now.IsZero() {
		t.Fatalf("the actor wrote the decision's time %v into the Pick", m.Request.Now)
	}
	if len(rec.got) != 1 || !rec.got[0].Request.Now.Equal(now) {
		t.Fatalf("shadow decisions %+v, want one at %v", rec.got, now)
	}
}

// spawnAnswering starts a cost_model routing actor over two estimating
// replicas whose actors both answer.
func spawnAnswering(t *testing.T, sys *actor.ActorSystem) *actor.PID {
	t.Helper()
	var reps []Replica
	for _, id := range []string{"r0", "r1"} {
		f := newFake(id, []string{"m"}, replica.NewCounters(0, 0))
		f.set(func(s *replica.Snapshot) { s.Shadow = &replica.Shadow{} })
		pid := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return &answerer{} }))
		reps = append(reps, &estimating{fakeReplica: f, pid: pid})
	}
	pid := sys.Root.Spawn(Props(Config{Model: "m", Policy: policy.NewCostModel(policy.DefaultCostModelParams()),
		Rand: rand.New(rand.NewPCG(1, 1)), Estimates: true, CostModel: cost.Default()}))
	t.Cleanup(func() { _ = sys.Root.StopFuture(pid).Wait() })
	sys.Root.Send(pid, &ReplicasChanged{Replicas: reps})
	return pid
}

// With Gathers, the last estimate in signals the asker instead of making
// the actor decide: Answered gets a value while Answer is nil, and the
// decision waits for the asker's Gathered.
func TestGathersSignalsTheAsker(t *testing.T) {
	sys := newSystem(t)
	pid := spawnAnswering(t, sys)
	m := &Pick{Request: policy.Request{PromptTokens: 400, BlockSize: 16, Blocks: blocksOf(400)},
		Deadline: time.Now().Add(5 * time.Second), Answered: make(chan struct{}, 1), Gathers: true}
	sys.Root.Send(pid, m)
	select {
	case <-m.Answered:
	case <-time.After(5 * time.Second):
		t.Fatal("no signal once both replicas answered")
	}
	if err := sys.Root.RequestFuture(pid, &actor.Touch{}, time.Second).Wait(); err != nil {
		t.Fatal(err)
	}
	if p := m.Answer(); p != nil {
		t.Fatalf("the actor decided without the asker's Gathered: %+v", p)
	}
	sys.Root.Send(pid, &Gathered{Pick: m})
	select {
	case <-m.Answered:
	case <-time.After(5 * time.Second):
		t.Fatal("no decision after Gathered")
	}
	p := m.Answer()
	if p == nil || p.Err != nil || !p.Estimated {
		t.Fatalf("answer %+v", p)
	}
	p.Lease.Release()
}

// Decide answers as soon as every replica answered, long before an
// estimate deadline of a minute: it sends Gathered on the gather's signal.
func TestDecideOnGatherSignal(t *testing.T) {
	sys := newSystem(t)
	pid := spawnAnswering(t, sys)
	for range 20 {
		m := &Pick{Request: policy.Request{PromptTokens: 400, BlockSize: 16, Blocks: blocksOf(400)},
			Deadline: time.Now().Add(time.Minute)}
		done := make(chan *Picked, 1)
		go func() { done <- Decide(sys.Root, pid, m, true, time.Minute) }()
		select {
		case p := <-done:
			if p == nil || p.Err != nil || !p.Estimated {
				t.Fatalf("answer %+v", p)
			}
			p.Lease.Release()
		case <-time.After(5 * time.Second):
			t.Fatal("Decide waited for the estimate deadline though every replica answered")
		}
	}
}

package routing

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/inferrail/inferrail/actors/replica"
	"github.com/inferrail/inferrail/model/policy"
	"github.com/inferrail/inferrail/model/route"
	"github.com/inferrail/inferrail/model/sched"
)

// spawnScheduler starts a routing actor for model m routed by s, drawing
// from the PCG seeded seed (its Source, as the fleet sets it), over
// replicas; stopped at cleanup.
func spawnScheduler(t *testing.T, sys *actor.ActorSystem, s *sched.Scheduler, seed uint64, replicas ...Replica) *actor.PID {
	t.Helper()
	src := rand.NewPCG(seed, 0)
	pid := sys.Root.Spawn(Props(Config{Model: "m", Policy: s, Rand: rand.New(src), Source: src}))
	t.Cleanup(func() { _ = sys.Root.StopFuture(pid).Wait() })
	sys.Root.Send(pid, &ReplicasChanged{Replicas: replicas})
	return pid
}

// explain asks the actor to explain req.
func explain(t *testing.T, sys *actor.ActorSystem, pid *actor.PID, req policy.Request) *Explanation {
	t.Helper()
	m := &Explain{Request: req, Deadline: time.Now().Add(5 * time.Second), Answered: make(chan *Explanation, 1)}
	sys.Root.Send(pid, m)
	select {
	case ex := <-m.Answered:
		return ex
	case <-time.After(5 * time.Second):
		t.Fatal("no explanation")
	}
	return nil
}

// profile builds a Scheduler of an EndpointPickerConfig's plugins.
func profile(t *testing.T, name string, plugins ...any) *sched.Scheduler {
	t.Helper()
	c, _, err := sched.Parse(name, map[string]any{"apiVersion": sched.APIVersion, "kind": sched.ConfigKind, "plugins": plugins})
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.Build()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Explaining a scheduling profile's decision draws from a copy of the
// actor's source: the explanation names the replica the next Pick picks,
// and an actor explained before every decision picks exactly as one never
// explained, for profiles that draw more than once per decision (ties,
// two choices, a rotation's start).
func TestExplainNeverChangesTheNextPick(t *testing.T) {
	scheds := map[string]func() *sched.Scheduler{
		"ties": func() *sched.Scheduler {
			return profile(t, "ties", map[string]any{"type": "queue-scorer"}, map[string]any{"type": "max-score-picker"})
		},
	}
	for _, name := range sched.Policies() {
		scheds[name] = func() *sched.Scheduler {
			s, err := sched.New(policy.Spec{Name: name})
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
	}
	for name, mk := range scheds {
		sys := newSystem(t)
		var reps []Replica
		for i := range 5 {
			reps = append(reps, newFake(fmt.Sprint("r", i), []string{"m"}, replica.NewCounters(0, 0)))
		}
		explained, plain := spawnScheduler(t, sys, mk(), 7, reps...), spawnScheduler(t, sys, mk(), 7, reps...)
		for step := range 120 {
			req := policy.Request{Key: uint64(step) + 1}
			ex := explain(t, sys, explained, req)
			a := ask(t, sys, explained, &Pick{Request: req})
			if a.Err != nil {
				t.Fatalf("%s: %v", name, a.Err)
			}
			a.Lease.Release() // the two actors share the replicas' counters
			b := ask(t, sys, plain, &Pick{Request: req})
			if b.Err != nil {
				t.Fatalf("%s: %v", name, b.Err)
			}
			b.Lease.Release()
			if ex.Winner != a.Replica.ID || a.Replica.ID != b.Replica.ID {
				t.Fatalf("%s step %d: explained %s, the explained actor picked %s, the other %s", name, step, ex.Winner, a.Replica.ID, b.Replica.ID)
			}
			if len(ex.Profiles) != 1 || ex.Profiles[0].Winner != ex.Winner {
				t.Fatalf("%s step %d: profiles %+v", name, step, ex.Profiles)
			}
		}
	}
}

// A profile's explanation shows each plugin's effect per replica (the
// filter that set it aside, each scorer's raw and weighted score, the
// total and the pick); a profile whose filters keep nothing answers
// ErrFilteredOut naming the filter, to Pick and to Explain.
func TestExplainProfile(t *testing.T) {
	sys := newSystem(t)
	reps := make([]Replica, 3)
	for i, role := range []string{"decode", "prefill", "decode"} {
		f := newFake(fmt.Sprint("r", i), []string{"m"}, replica.NewCounters(0, 0))
		f.set(func(s *replica.Snapshot) { s.Labels = map[string]string{sched.RoleLabel: role} })
		reps[i] = f
	}
	s := profile(t, "p", map[string]any{"type": "decode-filter"},
		map[string]any{"type": "active-request-scorer"}, map[string]any{"type": "max-score-picker"})
	pid := spawnScheduler(t, sys, s, 1, reps...)
	busy := ask(t, sys, pid, &Pick{Request: policy.Request{Key: 1}})
	ex := explain(t, sys, pid, policy.Request{Key: 2})
	if ex.Err != nil || len(ex.Profiles) != 1 {
		t.Fatalf("explanation %+v", ex)
	}
	pe := ex.Profiles[0]
	idle := map[string]string{"r0": "r2", "r2": "r0"}[busy.Replica.ID]
	if pe.Profile != "default" || pe.Picker != "max-score-picker" || pe.Winner != idle || ex.Winner != idle {
		t.Fatalf("the busy replica is %s; profile %+v, winner %s", busy.Replica.ID, pe, ex.Winner)
	}
	for _, r := range pe.Replicas {
		switch {
		case r.ID == "r1":
			if r.Filter != "decode-filter" || len(r.Scores) != 0 || r.Picked {
				t.Errorf("the prefill replica: %+v", r)
			}
		case r.ID == busy.Replica.ID:
			if r.Filter != "" || len(r.Scores) != 1 || r.Scores[0].Raw != 0 || r.Total != 0 || r.Picked {
				t.Errorf("the busy replica: %+v", r)
			}
		default:
			if sc := r.Scores; len(sc) != 1 || sc[0].Scorer != "active-request-scorer" || sc[0].Raw != 1 || sc[0].Weighted != 1 || r.Total != 1 || !r.Picked {
				t.Errorf("the idle replica: %+v", r)
			}
		}
	}
	busy.Lease.Release()

	none := profile(t, "none", map[string]any{"type": "label-selector-filter", "parameters": map[string]any{
		"matchLabels": map[string]any{sched.RoleLabel: "encode"}}})
	pid = spawnScheduler(t, sys, none, 1, reps...)
	p := ask(t, sys, pid, &Pick{Request: policy.Request{Key: 3}})
	var fe *sched.FilteredError
	if !errors.Is(p.Err, route.ErrFilteredOut) || !errors.As(p.Err, &fe) || fe.Filter != "label-selector-filter" || p.Lease != nil {
		t.Fatalf("pick %+v", p)
	}
	ex = explain(t, sys, pid, policy.Request{Key: 3})
	if !errors.Is(ex.Err, route.ErrFilteredOut) || ex.Winner != "" || len(ex.Profiles) != 1 || len(ex.Profiles[0].Replicas) != 3 {
		t.Fatalf("explanation %+v", ex)
	}
	for _, r := range ex.Profiles[0].Replicas {
		if r.Filter != "label-selector-filter" {
			t.Errorf("replica %+v", r)
		}
	}
}

// A profile that routes on the engines' load (Config.Load, as the fleet
// sets it for sched.SignalLoad) gets each replica's fresh waiting queue
// and KV usage without the estimate broadcast: queue-scorer sends every
// request to the replica with the shortest queue. Without Load the
// candidates carry no load, and the scorer ties them all.
func TestProfileReadsLoad(t *testing.T) {
	sys := newSystem(t)
	now := time.Now()
	reps := make([]Replica, 3)
	for i, waiting := range []float64{5, 0, 3} {
		f := newFake(fmt.Sprint("r", i), []string{"m"}, replica.NewCounters(0, 0))
		f.set(func(s *replica.Snapshot) { s.Load.Waiting, s.LoadAt = waiting, now })
		reps[i] = f
	}
	queue := func() *sched.Scheduler {
		return profile(t, "q", map[string]any{"type": "queue-scorer"}, map[string]any{"type": "max-score-picker"})
	}
	spawnLoad := func(load bool) *actor.PID {
		src := rand.NewPCG(3, 0)
		pid := sys.Root.Spawn(Props(Config{Model: "m", Policy: queue(), Rand: rand.New(src), Source: src, Load: load,
			MaxAge: time.Hour, Now: func() time.Time { return now }}))
		t.Cleanup(func() { _ = sys.Root.StopFuture(pid).Wait() })
		sys.Root.Send(pid, &ReplicasChanged{Replicas: reps})
		return pid
	}
	withLoad, without := spawnLoad(true), spawnLoad(false)
	seen := map[string]bool{}
	for i := range 30 {
		p := ask(t, sys, withLoad, &Pick{Request: policy.Request{Key: uint64(i)}})
		if p.Err != nil || p.Replica.ID != "r1" {
			t.Fatalf("with load: %+v", p)
		}
		p.Lease.Release()
		q := ask(t, sys, without, &Pick{Request: policy.Request{Key: uint64(i)}})
		seen[q.Replica.ID] = true
		q.Lease.Release()
	}
	if len(seen) < 2 {
		t.Fatalf("without load every pick went to %v: the queue was read", seen)
	}
}

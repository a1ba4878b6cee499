package fleet

import (
	"testing"
	"time"

	"github.com/inferrail/inferrail/config"
	"github.com/inferrail/inferrail/model/policy"
	"github.com/inferrail/inferrail/model/prefix"
)

// promptReq is a policy request for a prompt of n tokens whose ids start at
// base, so prompts with the same base share their blocks.
func promptReq(base uint32, n int) policy.Request {
	ids := make([]uint32, n)
	for i := range ids {
		ids[i] = base + uint32(i)
	}
	var h prefix.Hasher
	return policy.Request{PromptTokens: n, BlockSize: 16, Blocks: h.Chain(nil, prefix.Root("m", "", ""), ids, 16), Key: uint64(base)}
}

func costModelFleet(t *testing.T, n int) *Fleet {
	t.Helper()
	return start(t, testConfig(n, func(c *config.Config) {
		c.Models[0].Policy = "cost_model"
		c.Routing.EstimateDeadline = time.Second // every replica answers in these tests
	}), Options{})
}

func pickOK(t *testing.T, f *Fleet, req policy.Request) Decision {
	t.Helper()
	d, err := f.Pick(PickRequest{Model: "m", Policy: req, Deadline: time.Now().Add(5 * time.Second)})
	if err != nil {
		t.Fatalf("pick: %v", err)
	}
	return d
}

// A prompt routed once is predicted cached on its replica, which then wins
// the repeat; a failed attempt's blocks are taken back.
func TestEstimatesFollowAssignments(t *testing.T) {
	f := costModelFleet(t, 3)
	req := promptReq(1000, 2000)
	d1 := pickOK(t, f, req)
	if !d1.Predicted || d1.CachedTokens != 0 {
		t.Fatalf("first pick: predicted %v, cached %d; want a prediction of 0", d1.Predicted, d1.CachedTokens)
	}
	f.FirstByte(d1)
	f.Done(d1, OutcomeOK)
	waitFor(t, "the assignment applied", func() bool {
		s, _ := f.Snapshot(d1.Replica)
		b, _, _ := s.Shadow.Index()
		return b == 2000/16
	})
	d2 := pickOK(t, f, req)
	if d2.Replica != d1.Replica || d2.CachedTokens != 1984 {
		t.Fatalf("repeat went to %s with %d cached; want %s with 1984 (one block short)", d2.Replica, d2.CachedTokens, d1.Replica)
	}
	f.FirstByte(d2)
	f.Done(d2, OutcomeOK)

	other := promptReq(50000, 800)
	d3 := pickOK(t, f, other)
	f.Done(d3, OutcomeFailed)
	d4 := pickOK(t, f, other)
	if d4.CachedTokens != 0 {
		t.Fatalf("after a failed attempt %s predicts %d cached; want 0 (taken back)", d4.Replica, d4.CachedTokens)
	}
	f.Done(d4, OutcomeCancelled)
}

// A burst of the same long prompt, all waiting for their first byte, does
// not herd onto one replica: each decision sees the prefill queued by the
// ones before it, applied or not.
func TestBurstDoesNotHerd(t *testing.T) {
	f := costModelFleet(t, 4)
	var ds []Decision
	for i := range 40 {
		ds = append(ds, pickOK(t, f, promptReq(uint32(i)*100000, 4000)))
	}
	per := map[string]int{}
	for _, d := range ds {
		per[d.Replica]++
	}
	for id, n := range per {
		if n > 15 {
			t.Errorf("%s got %d of 40 distinct long prompts: %v", id, n, per)
		}
	}
	if len(per) != 4 {
		t.Errorf("only %d replicas used: %v", len(per), per)
	}
	for _, d := range ds {
		f.Done(d, OutcomeCancelled)
	}
}

// Explaining names the replica the next decision picks and changes nothing.
func TestExplainNamesTheNextPick(t *testing.T) {
	f := costModelFleet(t, 3)
	for i := range 20 {
		req := promptReq(uint32(i%4)*7777, 1500)
		ex, err := f.Explain("m", "", req, time.Now().Add(5*time.Second))
		if err != nil || ex.Err != nil {
			t.Fatalf("explain: %v %v", err, ex.Err)
		}
		if len(ex.Replicas) != 3 {
			t.Fatalf("explained %d replicas, want 3", len(ex.Replicas))
		}
		d := pickOK(t, f, req)
		if d.Replica != ex.Winner {
			t.Fatalf("request %d: explain named %s, routing picked %s", i, ex.Winner, d.Replica)
		}
		f.FirstByte(d)
		f.Done(d, OutcomeOK)
		waitFor(t, "idle", func() bool {
			s, _ := f.Snapshot(d.Replica)
			return s.Shadow.Queued(time.Now()) == 0 && s.Counters.InFlight() == 0
		})
	}
}

// A Pick that asks to be logged carries its explanation: every replica as
// the policy saw it, and the replica chosen; one that does not carries none.
// The explanation, made with the same draw before the choice, does not
// change the choice (the same requests route the same way without it).
func TestPickLogExplains(t *testing.T) {
	logged, plain := costModelFleet(t, 3), costModelFleet(t, 3)
	for i := range 30 {
		req := promptReq(uint32(i%5)*7777, 1200)
		d, err := logged.Pick(PickRequest{Model: "m", Policy: req, Deadline: time.Now().Add(5 * time.Second), Log: true})
		if err != nil {
			t.Fatal(err)
		}
		e := pickOK(t, plain, req)
		if e.Explanation != nil {
			t.Fatal("a Pick that did not ask to be logged carries an explanation")
		}
		ex := d.Explanation
		if ex == nil || ex.Err != nil || ex.Winner != d.Replica || len(ex.Replicas) != 3 || ex.Policy != "cost_model" {
			t.Fatalf("request %d: picked %s, explanation %+v", i, d.Replica, ex)
		}
		if d.Replica != e.Replica {
			t.Fatalf("request %d: %s when logged, %s when not", i, d.Replica, e.Replica)
		}
		for _, r := range ex.Replicas {
			if r.ID == d.Replica && (r.CachedTokens != d.CachedTokens || r.Estimate.Total() != d.Estimate) {
				t.Fatalf("request %d: the winner explained with %d cached and %v, decided with %d and %v",
					i, r.CachedTokens, r.Estimate.Total(), d.CachedTokens, d.Estimate)
			}
		}
		for _, x := range []struct {
			f *Fleet
			d Decision
		}{{logged, d}, {plain, e}} {
			x.f.FirstByte(x.d)
			x.f.Done(x.d, OutcomeOK)
			waitFor(t, "idle", func() bool {
				s, _ := x.f.Snapshot(x.d.Replica)
				return s.Shadow.Queued(time.Now()) == 0 && s.Counters.InFlight() == 0
			})
		}
	}
	// A baseline explains nothing but still shows the replicas it saw.
	rr := start(t, testConfig(3, func(c *config.Config) { c.Models[0].Policy = "round_robin" }), Options{})
	d, err := rr.Pick(PickRequest{Model: "m", Deadline: time.Now().Add(5 * time.Second), Log: true})
	if err != nil {
		t.Fatal(err)
	}
	if ex := d.Explanation; ex == nil || ex.Winner != d.Replica || len(ex.Replicas) != 3 {
		t.Fatalf("round_robin: picked %s, explanation %+v", d.Replica, ex)
	}
}

// TestRequestPathStartsNoGoroutine: a cost_model request on idle replicas,
// its decision (the estimate broadcast and the gather) and the three
// messages the request path sends its replica afterwards (Assign,
// FirstByte, RequestDone), is handled in the caller's goroutine. Each of
// those messages started a goroutine of the dispatcher before they were
// mailbox.Inline: one per request at least, and a wake-up of another core
// on the gateway's path (issue 16).
func TestRequestPathStartsNoGoroutine(t *testing.T) {
	const n, requests = 8, 400
	cfg := testConfig(n, func(c *config.Config) { c.Models[0].Policy = "cost_model" })
	f := start(t, cfg, Options{Logger: discard()})
	req := fillIndexes(t, f, n)
	pick := func() {
		d, err := f.Pick(PickRequest{Model: "m", Policy: req, Deadline: time.Now().Add(time.Second)})
		if err != nil {
			t.Fatal(err)
		}
		f.FirstByte(d)
		f.Done(d, OutcomeOK)
	}
	pick() // anything the first decision sets up
	g0 := goroutinesCreated()
	for range requests {
		pick()
	}
	// The replicas' own loops (probes, scrapes) may start a few in the
	// meantime; the request path before this change started 400 or more.
	if got := goroutinesCreated() - g0; got > requests/20 {
		t.Fatalf("%d goroutines started for %d requests, want the request path to start none", got, requests)
	}
}

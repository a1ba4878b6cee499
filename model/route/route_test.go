package route

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/inferrail/inferrail/model/cost"
	"github.com/inferrail/inferrail/model/estimate"
	"github.com/inferrail/inferrail/model/policy"
	"github.com/inferrail/inferrail/model/policy/policytest"
	"github.com/inferrail/inferrail/model/prefix"
)

// ledger is a replica's ledger that applies nothing until told.
type ledger struct {
	next, applied uint64
	queued        time.Duration
}

func (l *ledger) Next() uint64                   { l.next++; return l.next }
func (l *ledger) Applied() uint64                { return l.applied }
func (l *ledger) Queued(time.Time) time.Duration { return l.queued }

func replicas(ids ...string) []View {
	vs := make([]View, len(ids))
	for i, id := range ids {
		vs[i] = View{ID: id, Key: policy.ReplicaKey(id), Serves: true, Healthy: true, Room: true}
	}
	return vs
}

func positions(cands []policy.Candidate) []int {
	out := make([]int, len(cands))
	for i, c := range cands {
		out[i] = c.Replica
	}
	return out
}

// Collect offers the replicas that serve the model, are healthy, not
// ejected, not tried and have room; the ejected ones only when every
// healthy one is ejected; and counts the qualifying ones before the room
// check, which tells no replica from every replica full.
func TestCollect(t *testing.T) {
	f := func(name string, edit func(vs []View), exclude []string, want []int, wantOffered int) {
		t.Helper()
		vs := replicas("r0", "r1", "r2", "r3")
		edit(vs)
		got, offered := Collect(nil, vs, exclude, false)
		if !slices.Equal(positions(got), want) || offered != wantOffered {
			t.Errorf("%s: candidates %v offered %d, want %v and %d", name, positions(got), offered, want, wantOffered)
		}
	}
	f("all", func([]View) {}, nil, []int{0, 1, 2, 3}, 4)
	f("unhealthy, other model, tried", func(vs []View) { vs[0].Healthy = false; vs[1].Serves = false }, []string{"r3"}, []int{2}, 1)
	f("full", func(vs []View) { vs[1].Room, vs[2].Room = false, false }, nil, []int{0, 3}, 4)
	f("every one full", func(vs []View) {
		for i := range vs {
			vs[i].Room = false
		}
	}, nil, []int{}, 4)
	f("some ejected", func(vs []View) { vs[0].Ejected = true }, nil, []int{1, 2, 3}, 3)
	f("every healthy one ejected", func(vs []View) {
		vs[0].Healthy = false
		vs[1].Ejected, vs[2].Ejected, vs[3].Ejected = true, true, true
	}, nil, []int{1, 2, 3}, 3)
	f("the live ones tried: no fallback", func(vs []View) { vs[0].Ejected = true }, []string{"r1", "r2", "r3"}, []int{}, 0)
	f("nobody", func(vs []View) {
		for i := range vs {
			vs[i].Healthy = false
		}
	}, nil, []int{}, 0)
}

// A detailed collection carries the key, the pending tokens, the engine's
// running and waiting requests and KV usage while fresh, else the requests
// past their first byte; every collection carries the labels.
func TestCollectDetail(t *testing.T) {
	vs := replicas("r0", "r1")
	role := map[string]string{"llm-d.ai/role": "decode"}
	vs[0].InFlight, vs[0].Pending, vs[0].Waiting, vs[0].PendingTokens = 5, 2, 9, 300
	vs[1].InFlight, vs[1].Fresh, vs[1].Running, vs[1].KVUsage, vs[1].Waiting, vs[1].Labels = 1, true, 7, 0.5, 4, role
	got, _ := Collect(nil, vs, nil, true)
	want := []policy.Candidate{
		{Replica: 0, InFlight: 5, Pending: 2, Key: vs[0].Key, Running: 3, PendingTokens: 300},
		{Replica: 1, InFlight: 1, Key: vs[1].Key, Running: 7, KVUsage: 0.5, Waiting: 4, Fresh: true, Labels: role},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	plain, _ := Collect(nil, vs, nil, false)
	if !reflect.DeepEqual(plain[1], policy.Candidate{Replica: 1, InFlight: 1, Labels: role}) {
		t.Fatalf("a plain collection carries %+v", plain[1])
	}
}

func blocks(seed uint32, n int) []prefix.Hash {
	ids := make([]uint32, n)
	for i := range ids {
		ids[i] = seed<<16 + uint32(i)
	}
	var h prefix.Hasher
	return h.Chain(nil, prefix.Root("m", "", ""), ids, 16)
}

// An assignment the replica has not applied is added to its price, with
// the prefix it shares with the prompt, until the replica reports it
// applied; a replica that left is forgotten.
func TestPriceAddsUnapplied(t *testing.T) {
	c := New(Config{Policy: policy.LeastRequest{}, Rand: rand.New(rand.NewPCG(1, 1)), Cost: cost.Default()})
	l := &ledger{queued: 5 * time.Millisecond}
	req := &policy.Request{PromptTokens: 320, Blocks: blocks(1, 320), BlockSize: 16}
	w := &policy.Candidate{Replica: 0}
	a, ok := c.Assign(w, l, req)
	if !ok || a.Seq != 1 || a.Estimate.Prefill <= 0 {
		t.Fatalf("assignment %+v %v", a, ok)
	}
	now := time.Now()
	// From the published state: its queue, plus the unapplied prefill and
	// all but the prompt's last block, which the engine computes anyway.
	var cand policy.Candidate
	c.Price(&cand, l, req, nil, now)
	if cand.QueuedPrefill != l.queued+a.Estimate.Prefill || cand.CachedTokens != 320-16 {
		t.Fatalf("priced %+v, want queue %v and 304 cached", cand, l.queued+a.Estimate.Prefill)
	}
	// A reply that has applied it prices from the reply alone.
	cand = policy.Candidate{}
	c.Price(&cand, l, req, &Reply{Reply: estimate.Reply{CachedTokens: 32, QueuedPrefill: time.Millisecond}, Applied: 1}, now)
	if cand.QueuedPrefill != time.Millisecond || cand.CachedTokens != 32 {
		t.Fatalf("priced %+v after the replica applied the assignment", cand)
	}
	// Once dropped, the published state prices it alone.
	cand = policy.Candidate{}
	c.Price(&cand, l, req, nil, now)
	if cand.QueuedPrefill != l.queued || cand.CachedTokens != 0 {
		t.Fatalf("priced %+v once applied", cand)
	}
	c.Assign(w, l, req)
	c.Keep(nil)
	cand = policy.Candidate{}
	c.Price(&cand, l, req, nil, now)
	if cand.QueuedPrefill != l.queued {
		t.Fatalf("a departed replica's assignment still priced: %+v", cand)
	}
	if _, ok := c.Assign(w, nil, req); ok {
		t.Fatal("assigned to a replica without a ledger")
	}
}

// refuse is a take that refuses the replicas it names.
func refuse(ids ...int) func(*policy.Candidate) bool {
	return func(c *policy.Candidate) bool { return !slices.Contains(ids, c.Replica) }
}

// Choose runs the policy again without a pick the caller could not take,
// and answers by the offered count when none is left.
func TestChoose(t *testing.T) {
	c := New(Config{Policy: policy.LeastRequest{}, Rand: rand.New(rand.NewPCG(1, 1))})
	cands := []policy.Candidate{{Replica: 0, InFlight: 0}, {Replica: 1, InFlight: 1}, {Replica: 2, InFlight: 2}}
	got, k, err := c.Choose(&policy.Request{}, slices.Clone(cands), 3, refuse(0))
	if err != nil || got[k].Replica != 1 || len(got) != 2 {
		t.Fatalf("chose %v of %v, %v; want replica 1 of two", k, got, err)
	}
	if _, _, err := c.Choose(&policy.Request{}, slices.Clone(cands), 3, refuse(0, 1, 2)); !errors.Is(err, ErrOverloaded) {
		t.Fatalf("every pick refused: %v, want ErrOverloaded", err)
	}
	if _, _, err := c.Choose(&policy.Request{}, nil, 0, refuse()); !errors.Is(err, ErrNoReplica) {
		t.Fatalf("nothing offered: %v, want ErrNoReplica", err)
	}
}

// Choose answers a policy's refusal for the SLO with ErrNotAdmitted, not
// as a lack of replicas.
func TestChooseNotAdmitted(t *testing.T) {
	c := New(Config{Policy: policytest.Admitter{TTFT: time.Second}, Rand: rand.New(rand.NewPCG(1, 1))})
	cands := []policy.Candidate{{Replica: 0}, {Replica: 1}}
	_, _, err := c.Choose(&policy.Request{SLO: policy.SLO{TTFT: time.Millisecond}}, slices.Clone(cands), 2, refuse())
	if !errors.Is(err, policy.ErrNotAdmitted) || errors.Is(err, ErrOverloaded) || errors.Is(err, ErrFilteredOut) {
		t.Fatalf("refused for its SLO: %v, want ErrNotAdmitted alone", err)
	}
	if _, k, err := c.Choose(&policy.Request{}, slices.Clone(cands), 2, refuse()); err != nil || k < 0 {
		t.Fatalf("no SLO: %v, %v", k, err)
	}
}

// only keeps the candidates of the replicas it names, as a profile's
// filters do, and refuses when it keeps none.
type only []int

func (only) Name() string { return "only" }

func (o only) Pick(_ *policy.Request, cands []policy.Candidate, _ *rand.Rand) (int, error) {
	for k, c := range cands {
		if slices.Contains(o, c.Replica) {
			return k, nil
		}
	}
	return -1, fmt.Errorf("%w: only %v", policy.ErrNoCandidate, []int(o))
}

// A policy that refuses the candidates it is first offered answers
// ErrFilteredOut with its reason; one that refuses once its picks were
// taken away answers by the offered count, as when every pick is refused.
func TestChooseFilteredOut(t *testing.T) {
	c := New(Config{Policy: only{5}, Rand: rand.New(rand.NewPCG(1, 1))})
	cands := []policy.Candidate{{Replica: 0}, {Replica: 1}}
	_, _, err := c.Choose(&policy.Request{}, cands, 2, refuse())
	if !errors.Is(err, ErrFilteredOut) || !errors.Is(err, policy.ErrNoCandidate) || !strings.Contains(err.Error(), "only [5]") {
		t.Fatalf("nothing kept: %v, want ErrFilteredOut with the reason", err)
	}
	c = New(Config{Policy: only{1}, Rand: rand.New(rand.NewPCG(1, 1))})
	if _, _, err := c.Choose(&policy.Request{}, slices.Clone(cands), 2, refuse(1)); !errors.Is(err, ErrOverloaded) || errors.Is(err, ErrFilteredOut) {
		t.Fatalf("the one kept is full: %v, want ErrOverloaded", err)
	}
}

// Past the fanout, the replicas that last got the prompt's root prefix are
// asked first, then the least loaded by their published queue.
func TestAskShortlists(t *testing.T) {
	c := New(Config{Policy: policy.LeastRequest{}, Rand: rand.New(rand.NewPCG(1, 1)), Cost: cost.Default(), Fanout: 2})
	vs := replicas("r0", "r1", "r2", "r3")
	ls := []*ledger{{queued: 9 * time.Millisecond}, {queued: 3 * time.Millisecond}, {queued: 1 * time.Millisecond}, {queued: 2 * time.Millisecond}}
	for i := range vs {
		vs[i].Ledger = ls[i]
	}
	req := &policy.Request{PromptTokens: 64, Blocks: blocks(2, 64), BlockSize: 16}
	cands, _ := Collect(nil, vs, nil, true)
	if got := c.Ask(nil, cands[:2], vs, req, time.Now()); got != nil {
		t.Fatalf("asked %v of two candidates, want all (nil)", got)
	}
	if got := c.Ask(nil, cands, vs, req, time.Now()); !slices.Equal(got, []int{2, 3}) {
		t.Fatalf("shortlist %v, want the least loaded [2 3]", got)
	}
	c.Assign(&cands[0], ls[0], req)
	if got := c.Ask(nil, cands, vs, req, time.Now()); !slices.Equal(got, []int{0, 2}) {
		t.Fatalf("shortlist %v, want the prefix's last owner first: [0 2]", got)
	}
	if got := c.Ask(nil, cands, vs, &policy.Request{}, time.Now()); got != nil {
		t.Fatalf("asked %v for a prompt without blocks", got)
	}
}

// TestPoolFits: a calibrating replica without a fit is priced with the mean
// of its fitted peers' serving the model; replicas not calibrating, not
// serving, or with fits of their own are left as they are, and nothing
// changes while no peer is fitted.
func TestPoolFits(t *testing.T) {
	slow, fast := cost.Default(), cost.Default()
	slow.PrefillTokenSecs, fast.PrefillTokenSecs = 3e-4, 1e-4
	other := cost.Default()
	other.PrefillTokenSecs = 9e-4
	views := []View{
		{ID: "slow", Serves: true, Calibrating: true, Model: &slow},
		{ID: "fast", Serves: true, Calibrating: true, Model: &fast},
		{ID: "new", Serves: true, Calibrating: true},
		{ID: "configured", Serves: true},
		{ID: "elsewhere", Calibrating: true, Model: &other},
	}
	var pooled cost.Model
	PoolFits(views, &pooled)
	if views[2].Model != &pooled || math.Abs(pooled.PrefillTokenSecs-2e-4) > 1e-12 || pooled.PrefillFixedSecs != slow.PrefillFixedSecs {
		t.Errorf("new replica priced with %+v (pooled %+v), want the mean of slow and fast", views[2].Model, pooled)
	}
	if views[3].Model != nil || views[0].Model != &slow || views[4].Model != &other {
		t.Errorf("views changed that are not calibrating without a fit: %+v", views)
	}
	none := []View{{Serves: true, Calibrating: true}, {Serves: true, Calibrating: true}}
	PoolFits(none, &pooled)
	if none[0].Model != nil || none[1].Model != nil {
		t.Errorf("priced without any fitted peer: %+v", none)
	}
}

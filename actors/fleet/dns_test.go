package fleet

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/inferrail/inferrail/actors/replica"
	"github.com/inferrail/inferrail/config"
	"github.com/inferrail/inferrail/model/kvevent"
)

func dnsConfig(refresh time.Duration) *config.Config {
	return testConfig(1, func(c *config.Config) {
		c.Discovery.DNS = []config.DNSGroup{{
			Name: "g", URL: "http://vllm.inference.svc:8000", Models: []string{"m"},
			Refresh: refresh, MaxConcurrency: 1024,
		}}
	})
}

func ids(f *Fleet) []string {
	var out []string
	for _, s := range f.Replicas() {
		out = append(out, s.ID)
	}
	return out
}

func TestDNSJoinsAndLeaves(t *testing.T) {
	r := newFakeResolver("10.1.0.2", "10.1.0.1")
	f := start(t, dnsConfig(5*time.Millisecond), Options{Resolver: r})

	// Resolved before Start returned; static replicas first, then members
	// in address order.
	if got := fmt.Sprint(ids(f)); got != "[r0 g-10.1.0.1-8000 g-10.1.0.2-8000]" {
		t.Fatalf("members after Start: %s", got)
	}
	if s, _ := f.Snapshot("g-10.1.0.2-8000"); s.URL != "http://10.1.0.2:8000" {
		t.Fatalf("member URL %q", s.URL)
	}
	stay := pick(t, f, "r0", "g-10.1.0.2-8000")
	leave := pick(t, f, "r0", "g-10.1.0.1-8000")
	if stay.Replica != "g-10.1.0.1-8000" || leave.Replica != "g-10.1.0.2-8000" {
		t.Fatalf("picked %s and %s", stay.Replica, leave.Replica)
	}
	stayBefore, _ := f.Snapshot(stay.Replica)
	leaving := f.view.Load().byID[leave.Replica].h

	r.set(nil, "10.1.0.1", "10.1.0.3")
	waitFor(t, "membership updated", func() bool {
		return fmt.Sprint(ids(f)) == "[r0 g-10.1.0.1-8000 g-10.1.0.3-8000]"
	})
	// The member that stayed kept its state.
	stayAfter, _ := f.Snapshot(stay.Replica)
	if stayAfter.Counters != stayBefore.Counters || stayAfter.Counters.InFlight() != 1 {
		t.Fatal("the member that stayed lost its counters")
	}
	// The member that left is stopped, and its running request finishes.
	if _, ok := f.Snapshot(leave.Replica); ok {
		t.Fatal("the member that left is still listed")
	}
	drained(t, f, leaving, leave)
	// New picks never go to the member that left; the joiner gets traffic.
	got := map[string]bool{}
	for range 60 {
		d := pick(t, f)
		got[d.Replica] = true
		f.Done(d, OutcomeOK)
	}
	if got[leave.Replica] || !got["g-10.1.0.3-8000"] {
		t.Fatalf("picks went to %v", got)
	}
	f.Done(stay, OutcomeOK)

	// A failed lookup keeps the last set.
	r.set(errors.New("i/o timeout"))
	r.lookups(t, 3)
	if got := fmt.Sprint(ids(f)); got != "[r0 g-10.1.0.1-8000 g-10.1.0.3-8000]" {
		t.Fatalf("after failed lookups: %s", got)
	}
	// A member that rejoins is new.
	r.set(nil, "10.1.0.1", "10.1.0.2", "10.1.0.3")
	waitFor(t, "rejoined", func() bool { _, ok := f.Snapshot(leave.Replica); return ok })
	if s, _ := f.Snapshot(leave.Replica); s.Counters == leaving.Counters() || !s.Healthy {
		t.Fatal("a rejoining member reused the old actor's state")
	}
	// Every member leaving empties the group, not the static replicas.
	r.set(nil)
	waitFor(t, "group emptied", func() bool { return fmt.Sprint(ids(f)) == "[r0]" })
}

func TestDNSFirstLookupFails(t *testing.T) {
	r := newFakeResolver()
	r.set(errors.New("no such host"))
	f := start(t, dnsConfig(5*time.Millisecond), Options{Resolver: r})
	if got := fmt.Sprint(ids(f)); got != "[r0]" {
		t.Fatalf("members: %s", got)
	}
	r.set(nil, "10.1.0.9")
	waitFor(t, "joined on a later lookup", func() bool { return slices.Contains(ids(f), "g-10.1.0.9-8000") })
}

func TestGroupMembers(t *testing.T) {
	g, err := newGroup(&config.DNSGroup{Name: "vllm", URL: "https://engines.example/base", Refresh: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ms, bad := g.members([]string{"fd00::1", "10.0.0.2", "10.0.0.2", "not-an-ip", "::ffff:10.0.0.1"})
	var got []string
	for _, m := range ms {
		got = append(got, m.id+" "+m.url)
	}
	want := []string{
		"vllm-10.0.0.1-443 https://10.0.0.1:443/base",
		"vllm-10.0.0.2-443 https://10.0.0.2:443/base",
		"vllm-fd00--1-443 https://[fd00::1]:443/base",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) || fmt.Sprint(bad) != "[not-an-ip]" {
		t.Fatalf("members %q, bad %q", got, bad)
	}
}

// eventsRecorder is an EventSource that records what was subscribed to.
type eventsRecorder struct {
	mu   sync.Mutex
	subs map[string]string // endpoint -> replay
}

func (e *eventsRecorder) Subscribe(es replica.EventStream, _ func(uint64, *kvevent.Batch), _ func(bool)) (io.Closer, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.subs[es.Endpoint] = es.Replay
	return io.NopCloser(nil), nil
}

func (e *eventsRecorder) has(endpoint, replay string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	r, ok := e.subs[endpoint]
	return ok && r == replay
}

// A DNS group's kv_capacity_blocks sizes each member's index, as it does
// a static replica's; a group without it leaves the fleet default.
func TestDNSMembersCapacity(t *testing.T) {
	r := newFakeResolver("10.1.0.1")
	cfg := dnsConfig(5 * time.Millisecond)
	cfg.Discovery.DNS[0].KVCapacityBlocks = 777
	cfg.Discovery.DNS = append(cfg.Discovery.DNS, config.DNSGroup{Name: "plain", URL: "http://plain.svc:8000",
		Models: []string{"m"}, Refresh: time.Hour, MaxConcurrency: 1024})
	cfg.Index.DefaultCapacityBlocks = 555
	f := start(t, cfg, Options{Resolver: r})
	capacity := func(id string) int {
		s, ok := f.Snapshot(id)
		if !ok {
			return -1
		}
		_, c, _ := s.Shadow.Index()
		return c
	}
	waitFor(t, "the member sized", func() bool { return capacity("g-10.1.0.1-8000") == 777 })
	waitFor(t, "the other group's member sized", func() bool { return capacity("plain-10.1.0.1-8000") == 555 })
}

// A DNS group with kv_events_port subscribes each member to the stream on
// its own address, a member that joins later too; a group without it
// subscribes nothing.
func TestDNSMembersFollowKVEvents(t *testing.T) {
	r := newFakeResolver("10.1.0.1")
	ev := &eventsRecorder{subs: map[string]string{}}
	cfg := dnsConfig(5 * time.Millisecond)
	cfg.Discovery.DNS[0].KVEventsPort, cfg.Discovery.DNS[0].KVEventsReplayPort = 5557, 5558
	cfg.Discovery.DNS = append(cfg.Discovery.DNS, config.DNSGroup{Name: "quiet", URL: "http://quiet.svc:8000",
		Models: []string{"m"}, Refresh: time.Hour, MaxConcurrency: 1024})
	f := start(t, cfg, Options{Resolver: r, Events: ev})
	waitFor(t, "the first member subscribed", func() bool { return ev.has("tcp://10.1.0.1:5557", "tcp://10.1.0.1:5558") })
	r.set(nil, "10.1.0.1", "10.1.0.2")
	waitFor(t, "the joining member subscribed", func() bool { return ev.has("tcp://10.1.0.2:5557", "tcp://10.1.0.2:5558") })
	if n := len(f.Replicas()); n < 3 {
		t.Fatalf("%d replicas", n)
	}
	ev.mu.Lock()
	defer ev.mu.Unlock()
	if len(ev.subs) != 2 {
		t.Fatalf("subscriptions %v: want the two members of g only (r0 and group quiet have no stream)", ev.subs)
	}
}

// eventsOnce is an EventSource that delivers one batch as each
// subscription starts.
type eventsOnce struct{ batch *kvevent.Batch }

func (e eventsOnce) Subscribe(_ replica.EventStream, onBatch func(uint64, *kvevent.Batch), _ func(bool)) (io.Closer, error) {
	onBatch(0, e.batch)
	return io.NopCloser(nil), nil
}

// TestKVEventChecksReachReplicas: models[].block_size and the tokenizer's
// vocabulary size (Options.VocabSizes) reach the replica actors, whose
// engine's events then raise the warnings they should.
func TestKVEventChecksReachReplicas(t *testing.T) {
	tokens := make([]uint32, 64)
	for i := range tokens {
		tokens[i] = uint32(200 + i) // past a vocabulary of 100
	}
	ev := eventsOnce{&kvevent.Batch{Events: []kvevent.Event{
		&kvevent.BlockStored{BlockHashes: []uint64{1, 2}, TokenIDs: tokens, BlockSize: 32, Medium: "GPU"},
		&kvevent.BlockStored{BlockHashes: []uint64{3, 4, 5, 6}, TokenIDs: tokens, BlockSize: 16, Medium: "GPU"},
	}}}
	cfg := testConfig(1, func(c *config.Config) { c.Replicas[0].KVEvents = "tcp://10.0.0.1:5557" })
	f := start(t, cfg, Options{Events: ev, VocabSizes: map[string]int{"m": 100}})
	waitFor(t, "both warnings raised", func() bool {
		s, ok := f.Snapshot("r0")
		return ok && s.Warnings.Active(replica.WarnEventsBlockSize) && s.Warnings.Active(replica.WarnEventsForeignTokens)
	})
}

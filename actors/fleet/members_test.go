package fleet

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/inferrail/inferrail/actors/replica"
	"github.com/inferrail/inferrail/config"
	"github.com/inferrail/inferrail/model/kvevent"
)

// barrier waits until the fleet has applied every endpoint set sent
// before (Fleet.Settle).
func barrier(t testing.TB, f *Fleet) {
	t.Helper()
	if err := f.Settle(5 * time.Second); err != nil {
		t.Fatalf("barrier: %v", err)
	}
}

// drained checks that the actor of a member that left (h) stops and that
// its running request d, picked before it left, still finishes there.
func drained(t testing.TB, f *Fleet, h *replica.Handle, d Decision) {
	t.Helper()
	waitFor(t, "the member that left stopped", func() bool { return !h.Snapshot().Healthy })
	d.Lease.FirstByte()
	f.Done(d, OutcomeOK)
	if c := h.Counters(); c.InFlight() != 0 || c.Pending() != 0 {
		t.Fatalf("lease on the member that left: %d in flight, %d pending", c.InFlight(), c.Pending())
	}
}

func pod(id, ip string, labels map[string]string) Endpoint {
	return Endpoint{ID: id, URL: "http://" + ip + ":8000", Models: []string{"m"}, Labels: labels, MaxConcurrency: 1024}
}

// TestSourceJoinsAndLeaves: a discovery source's endpoints become members
// after the static replicas and the DNS groups; one that stays keeps its
// actor and state; one that leaves is drained (no new picks, its running
// request finishes); one whose labels change is replaced, and the new
// labels are what routing sees.
func TestSourceJoinsAndLeaves(t *testing.T) {
	r := newFakeResolver("10.1.0.1")
	f := start(t, dnsConfig(time.Hour), Options{Resolver: r})
	decode := map[string]string{"llm-d.ai/role": "decode"}
	f.SetEndpoints("kubernetes", []Endpoint{pod("vllm-b-rank-0", "10.2.0.2", decode), pod("vllm-a-rank-0", "10.2.0.1", nil)})
	barrier(t, f)
	if got := fmt.Sprint(ids(f)); got != "[r0 g-10.1.0.1-8000 vllm-b-rank-0 vllm-a-rank-0]" {
		t.Fatalf("members: %s", got)
	}
	if s, _ := f.Snapshot("vllm-b-rank-0"); s.Labels["llm-d.ai/role"] != "decode" || s.URL != "http://10.2.0.2:8000" {
		t.Fatalf("member b: labels %v, url %s", s.Labels, s.URL)
	}
	stay := pick(t, f, "r0", "g-10.1.0.1-8000", "vllm-b-rank-0")
	leave := pick(t, f, "r0", "g-10.1.0.1-8000", "vllm-a-rank-0")
	if stay.Replica != "vllm-a-rank-0" || leave.Replica != "vllm-b-rank-0" {
		t.Fatalf("picked %s and %s", stay.Replica, leave.Replica)
	}
	stayBefore, _ := f.Snapshot(stay.Replica)
	leaving := f.view.Load().byID[leave.Replica].h

	// b leaves; a stays, in a fresh slice with an equal (not the same)
	// label map: nil and empty are equal.
	f.SetEndpoints("kubernetes", []Endpoint{pod("vllm-a-rank-0", "10.2.0.1", map[string]string{})})
	barrier(t, f)
	if got := fmt.Sprint(ids(f)); got != "[r0 g-10.1.0.1-8000 vllm-a-rank-0]" {
		t.Fatalf("members after b left: %s", got)
	}
	if s, _ := f.Snapshot(stay.Replica); s.Counters != stayBefore.Counters || s.Counters.InFlight() != 1 {
		t.Fatal("the member that stayed lost its counters")
	}
	drained(t, f, leaving, leave)
	for range 40 {
		d := pick(t, f)
		if d.Replica == leave.Replica {
			t.Fatal("a pick went to the member that left")
		}
		f.Done(d, OutcomeOK)
	}
	f.Done(stay, OutcomeOK)

	// a's labels change: it is replaced, and routing sees the new labels.
	f.SetEndpoints("kubernetes", []Endpoint{pod("vllm-a-rank-0", "10.2.0.1", decode)})
	barrier(t, f)
	s, ok := f.Snapshot("vllm-a-rank-0")
	if !ok || s.Labels["llm-d.ai/role"] != "decode" || s.Counters == stayBefore.Counters {
		t.Fatalf("relabelled member: ok %v, labels %v, same counters %v", ok, s.Labels, s.Counters == stayBefore.Counters)
	}

	// An empty set empties the source, not the others.
	f.SetEndpoints("kubernetes", nil)
	barrier(t, f)
	if got := fmt.Sprint(ids(f)); got != "[r0 g-10.1.0.1-8000]" {
		t.Fatalf("members after the source emptied: %s", got)
	}
}

// TestSourceIDsTaken: an endpoint whose id a static replica, a DNS member
// or another source holds is skipped, and so is an id given twice; a
// reload whose static replica takes a discovered member's id is refused.
func TestSourceIDsTaken(t *testing.T) {
	r := newFakeResolver("10.1.0.1")
	f := start(t, dnsConfig(time.Hour), Options{Resolver: r})
	f.SetEndpoints("file", []Endpoint{pod("shared", "10.3.0.1", nil)})
	f.SetEndpoints("kubernetes", []Endpoint{pod("r0", "10.2.0.1", nil), pod("g-10.1.0.1-8000", "10.2.0.2", nil),
		pod("shared", "10.2.0.3", nil), pod("p", "10.2.0.4", nil), pod("p", "10.2.0.5", nil)})
	barrier(t, f)
	if got := fmt.Sprint(ids(f)); got != "[r0 g-10.1.0.1-8000 shared p]" {
		t.Fatalf("members: %s", got)
	}
	if s, _ := f.Snapshot("r0"); s.URL != "http://10.0.0.1:8000" {
		t.Fatalf("static r0 was replaced: %s", s.URL)
	}
	if s, _ := f.Snapshot("shared"); s.URL != "http://10.3.0.1:8000" {
		t.Fatalf("shared belongs to file, got %s", s.URL)
	}
	if s, _ := f.Snapshot("p"); s.URL != "http://10.2.0.4:8000" {
		t.Fatalf("p: the first of the two kept, got %s", s.URL)
	}
	cfg := dnsConfig(time.Hour)
	cfg.Replicas = append(cfg.Replicas, config.Replica{ID: "p", URL: "http://10.9.0.1:8000", Models: []string{"m"}, MaxConcurrency: 1024})
	if err := f.Reconfigure(cfg); err == nil || !strings.Contains(err.Error(), "member of kubernetes") {
		t.Fatalf("reload taking a discovered id: %v", err)
	}
}

// TestSourceEventsAndCaps: an endpoint's KV event stream is subscribed to
// and its caps reach its counters and index.
func TestSourceEventsAndCaps(t *testing.T) {
	ev := &eventsRecorder{subs: map[string]string{}}
	f := start(t, testConfig(1, nil), Options{Events: ev})
	ep := pod("e", "10.2.0.1", nil)
	ep.Events = replica.EventStream{Endpoint: "tcp://10.2.0.1:5557", Replay: "tcp://10.2.0.1:5558", Engine: kvevent.EngineSGLang}
	ep.MaxConcurrency, ep.KVCapacityBlocks = 2, 321
	f.SetEndpoints("kubernetes", []Endpoint{ep})
	waitFor(t, "subscribed", func() bool { return ev.has("tcp://10.2.0.1:5557", "tcp://10.2.0.1:5558") })
	s, _ := f.Snapshot("e")
	if _, c, _ := s.Shadow.Index(); c != 321 {
		t.Errorf("index capacity %d, want 321", c)
	}
	if s.Events.Engine != kvevent.EngineSGLang {
		t.Errorf("engine %q", s.Events.Engine)
	}
	var held []Decision
	for range 2 {
		held = append(held, pick(t, f, "r0"))
	}
	if _, err := f.Pick(PickRequest{Model: "m", Exclude: []string{"r0"}, Deadline: time.Now().Add(time.Second)}); err == nil {
		t.Error("a third pick on a member capped at 2 succeeded")
	}
	for _, d := range held {
		f.Done(d, OutcomeOK)
	}
}

// TestSources: each source's state as Sources reports it: its members,
// when it last set them, and why it cannot refresh, from when.
func TestSources(t *testing.T) {
	clk := newClock()
	f := start(t, testConfig(1, nil), Options{Now: clk.Now})
	if got := f.Sources(); len(got) != 0 {
		t.Fatalf("sources before any: %v", got)
	}
	f.SetEndpoints("kubernetes", []Endpoint{pod("a", "10.2.0.1", nil), pod("b", "10.2.0.2", nil)})
	f.SourceFailing("file", errors.New("endpoints.yaml: too large"))
	barrier(t, f)
	t0 := clk.Now()
	clk.Advance(time.Minute)
	f.SourceFailing("file", errors.New("endpoints.yaml: bad YAML"))
	f.SourceFailing("kubernetes", errors.New("pods is forbidden"))
	barrier(t, f)
	got := f.Sources()
	want := []Source{
		{Name: "file", Failing: "endpoints.yaml: bad YAML", Since: t0},
		{Name: "kubernetes", Members: 2, Updated: t0, Failing: "pods is forbidden", Since: t0.Add(time.Minute)},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("sources:\n got %v\nwant %v", got, want)
	}
	f.SourceFailing("kubernetes", nil)
	barrier(t, f)
	if got := f.Sources()[1]; got.Failing != "" || !got.Since.IsZero() || got.Members != 2 {
		t.Fatalf("after recovery: %+v", got)
	}
}

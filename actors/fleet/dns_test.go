package fleet

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/inferrail/inferrail/config"
)

func dnsConfig(refresh time.Duration) *config.Config {
	return testConfig(1, func(c *config.Config) {
		c.Discovery.DNS = []config.DNSGroup{{
			Name: "g", URL: "http://vllm.inference.svc:8000", Models: []string{"m"},
			Refresh: refresh, MaxConcurrency: 1024, Engine: "auto",
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
	waitFor(t, "the member that left stopped", func() bool { return !leaving.Snapshot().Healthy })
	leave.Lease.FirstByte()
	f.Done(leave, OutcomeOK)
	if c := leaving.Counters(); c.InFlight() != 0 || c.Pending() != 0 {
		t.Fatalf("lease on the member that left: %d in flight", c.InFlight())
	}
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

package fleet

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/inferrail/inferrail/actors/replica"
	"github.com/inferrail/inferrail/config"
	"github.com/inferrail/inferrail/model/kvevent"
)

// Endpoint is one replica as a member of the fleet is built from it: a
// static replica, a DNS group's address, or what a discovery source found
// (Fleet.SetEndpoints). Immutable once passed to the fleet.
type Endpoint struct {
	// ID names the replica: letters, digits, '.', '_' and '-', unique in
	// the fleet. An id another member holds is skipped, with a warning.
	ID string
	// URL is the engine's base URL, such as http://10.0.0.7:8000.
	URL string
	// Models are the configured model names it serves.
	Models []string
	// Labels are its replica labels, which scheduling profiles' filters
	// select by (decode-filter and prefill-filter read llm-d.ai/role).
	Labels map[string]string
	// Events is its engine's KV event stream; the zero value for none.
	Events replica.EventStream
	// MaxConcurrency, MaxPending and KVCapacityBlocks are as a replica's
	// max_concurrency, max_pending and kv_capacity_blocks.
	MaxConcurrency   int
	MaxPending       int
	KVCapacityBlocks int
}

// equal reports whether a member built from ep would be built as one built
// from o: a member whose endpoint did not change keeps its actor.
func (ep *Endpoint) equal(o *Endpoint) bool {
	return ep.ID == o.ID && ep.URL == o.URL && slices.Equal(ep.Models, o.Models) && maps.Equal(ep.Labels, o.Labels) &&
		ep.Events == o.Events && ep.MaxConcurrency == o.MaxConcurrency && ep.MaxPending == o.MaxPending &&
		ep.KVCapacityBlocks == o.KVCapacityBlocks
}

// staticEndpoint is static replica r as an endpoint.
func staticEndpoint(r config.Replica) Endpoint {
	return Endpoint{ID: r.ID, URL: r.URL, Models: r.Models, Labels: r.Labels,
		Events: replica.EventStream{Endpoint: r.KVEvents, Replay: r.KVEventsReplay, Bind: r.KVEventsBind,
			Engine: kvevent.Engine(r.EngineType)},
		MaxConcurrency: r.MaxConcurrency, MaxPending: r.MaxPending, KVCapacityBlocks: r.KVCapacityBlocks}
}

// Owners of members besides the discovery sources, whose names are their
// callers'.
const (
	ownerStatic    = "replicas"
	ownerDNSPrefix = "discovery.dns "
)

// newEntry returns the entry of a member built from ep, held by owner,
// without an actor yet.
func newEntry(ep Endpoint, owner string) *entry {
	c := replica.NewCounters(ep.MaxConcurrency, ep.MaxPending)
	h := replica.NewHandle(ep.ID, ep.URL, ep.Models, c)
	h.SetLabels(ep.Labels)
	h.Shadow().SetConfiguredCapacity(ep.KVCapacityBlocks)
	h.SetEvents(ep.Events)
	return &entry{h: h, owner: owner, ep: ep}
}

// change is what one apply did to the membership.
type change struct {
	ids     []string // the owner's members afterwards, in order
	joined  []string // ids of new entries, without actors yet
	left    []*entry // entries taken out of the membership, actors still running
	leftIDs []string
	moved   bool // the owner's member list differs from before
}

// apply makes the members of owner, which were prev, the endpoints eps, in
// their order. A member whose endpoint did not change keeps its entry, and
// with it its actor, counters and cache prediction; a new endpoint gets a
// new entry, and a changed one a new entry in place of its old one, whose
// actor stops as a member's that left. Ids another owner holds, and ids
// repeated in eps, are logged and skipped. The caller puts the change into
// effect (fleetActor.commit); before the actors start, Start does.
func (st *state) apply(owner string, prev []string, eps []Endpoint) change {
	var c change
	kept := make(map[string]bool, len(eps))
	for i := range eps {
		ep := &eps[i]
		if kept[ep.ID] {
			st.log.Warn("fleet: member id given twice; the first kept", "owner", owner, "id", ep.ID)
			continue
		}
		e, ok := st.entries[ep.ID]
		switch {
		case ok && e.owner != owner:
			st.log.Warn("fleet: member id already taken; skipped", "owner", owner, "id", ep.ID, "held_by", e.owner)
			continue
		case ok && e.ep.equal(ep):
		default:
			if ok {
				c.left, c.leftIDs = append(c.left, e), append(c.leftIDs, ep.ID)
			}
			st.entries[ep.ID] = newEntry(*ep, owner)
			c.joined = append(c.joined, ep.ID)
		}
		kept[ep.ID] = true
		c.ids = append(c.ids, ep.ID)
	}
	for _, id := range prev {
		if !kept[id] {
			c.left, c.leftIDs = append(c.left, st.entries[id]), append(c.leftIDs, id)
			delete(st.entries, id)
		}
	}
	c.moved = len(c.joined) > 0 || !slices.Equal(c.ids, prev)
	return c
}

// commit puts a change into effect: the members that joined get actors,
// the routing actors of models (of every model when nil) get the new
// membership, and the actors of members that left stop. Routing actors
// process ReplicasChanged before any later Pick, so the members that left
// get no new requests; their running requests finish, since leases only
// touch the shared counters.
func (a *fleetActor) commit(ctx actor.Context, c change, models []string) {
	for _, id := range c.joined {
		a.spawnReplica(ctx, id, a.st.entries[id])
	}
	a.publish(ctx, models)
	for _, e := range c.left {
		if e.pid != nil {
			ctx.Stop(e.pid)
		}
	}
}

// source is a discovery source as the fleet actor keeps it.
type source struct {
	name    string
	ids     []string // its members, in the order it gave them
	updated time.Time
	failing string // why it cannot refresh; "" when it can
	since   time.Time
}

// Source is a discovery source as the fleet last heard from it
// (Fleet.Sources). Immutable.
type Source struct {
	// Name is the name the source gave (Fleet.SetEndpoints).
	Name string
	// Members counts its endpoints that are members of the fleet now.
	Members int
	// Updated is when it last set its endpoints; zero before it has.
	Updated time.Time
	// Failing says why it cannot refresh its endpoints, "" when it can;
	// its members are its last good set meanwhile. Since is when it began.
	Failing string
	Since   time.Time
}

// sourceNamed returns the source of that name, adding it in name order
// when it is new.
func (st *state) sourceNamed(name string) *source {
	i, found := slices.BinarySearchFunc(st.sources, name, func(s *source, n string) int {
		switch {
		case s.name < n:
			return -1
		case s.name > n:
			return 1
		}
		return 0
	})
	if !found {
		st.sources = slices.Insert(st.sources, i, &source{name: name})
	}
	return st.sources[i]
}

// setEndpoints makes a source's members its endpoints.
func (a *fleetActor) setEndpoints(ctx actor.Context, m *setEndpoints) {
	st := a.st
	src := st.sourceNamed(m.source)
	src.updated = st.now()
	c := st.apply(m.source, src.ids, m.eps)
	src.ids = c.ids
	if c.moved || len(c.left) > 0 {
		a.commit(ctx, c, nil)
		st.log.Info("fleet: discovered members changed", "source", m.source, "members", len(c.ids),
			"joined", c.joined, "left", c.leftIDs)
	}
	a.publishSources()
}

// sourceFailing records that a source cannot refresh, or can again.
func (a *fleetActor) sourceFailing(m *sourceFailing) {
	src := a.st.sourceNamed(m.source)
	switch {
	case m.reason == "":
		src.failing, src.since = "", time.Time{}
	case src.failing == "":
		src.failing, src.since = m.reason, a.st.now()
	default:
		src.failing = m.reason
	}
	a.publishSources()
}

// publishSources stores the sources as Fleet.Sources returns them.
func (a *fleetActor) publishSources() {
	out := make([]Source, len(a.st.sources))
	for i, s := range a.st.sources {
		out[i] = Source{Name: s.name, Members: len(s.ids), Updated: s.updated, Failing: s.failing, Since: s.since}
	}
	a.st.sourcesView.Store(&out)
}

// SetEndpoints makes the members of discovery source name exactly eps, in
// their order, after the static replicas and DNS groups (sources in name
// order): an endpoint that is already a member of that source, unchanged,
// keeps its actor and state; a new one joins; one that changed (its URL,
// models, labels, KV event stream or caps) is replaced; and the members it
// no longer lists leave, drained as DNS members are: routing stops
// offering them first, and their running requests finish. Ids another
// member holds are skipped with a warning. The names "replicas" and
// "discovery.dns …" are taken. It sends one message and returns; eps is
// the fleet's once passed.
func (f *Fleet) SetEndpoints(name string, eps []Endpoint) {
	if f.stopped.Load() {
		return
	}
	f.sys.Root.Send(f.pid, &setEndpoints{source: name, eps: eps})
}

// Settle waits, up to timeout, until the fleet has applied every
// SetEndpoints and SourceFailing that happened before the call (the same
// goroutine's, or one it synchronised with), so that a source read at
// start is in the fleet before the gateway serves.
func (f *Fleet) Settle(timeout time.Duration) error {
	if f.stopped.Load() {
		return nil
	}
	if err := f.sys.Root.RequestFuture(f.pid, &actor.Touch{}, timeout).Wait(); err != nil {
		return fmt.Errorf("fleet: endpoints not applied within %v: %w", timeout, err)
	}
	return nil
}

// SourceFailing records that discovery source name cannot refresh its
// endpoints, and why (err), for Sources; a nil err records that it can
// again. The source's members stay as it last set them. It sends one
// message and returns.
func (f *Fleet) SourceFailing(name string, err error) {
	if f.stopped.Load() {
		return
	}
	m := &sourceFailing{source: name}
	if err != nil {
		m.reason = err.Error()
	}
	f.sys.Root.Send(f.pid, m)
}

// Sources returns every discovery source that has set its endpoints or
// reported a failure, in name order.
func (f *Fleet) Sources() []Source {
	if p := f.st.sourcesView.Load(); p != nil {
		return slices.Clone(*p)
	}
	return nil
}

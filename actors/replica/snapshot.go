package replica

import (
	"slices"
	"sync/atomic"
	"time"

	"github.com/inferrail/inferrail/model/load"
)

// Snapshot is a replica's state as its actor last published it. It is
// immutable once published: nothing in it changes, its maps and slices
// included, and a change publishes a new Snapshot. Only Counters is live: it
// is the same *Counters in every snapshot of the replica, shared with the
// request path.
type Snapshot struct {
	ID     string   // the replica id: a config id or <group>-<ip>-<port>
	Models []string // the configured model names the replica serves
	// Labels are the replica's configured labels (replicas[].labels, a DNS
	// group's labels), which scheduling profiles' filters read. Read only.
	Labels map[string]string

	// Healthy is the active health check's verdict: false after
	// health.unhealthy_threshold consecutive failed probes, true again
	// after one that passes. A replica starts healthy, and so does a
	// restarted actor. A stopped actor publishes false.
	Healthy bool
	// EjectedUntil is the end of the replica's passive ejection, in the
	// fleet's clock; the replica is out of rotation while now is before
	// it. Zero when it was never ejected.
	EjectedUntil time.Time
	// Counters are the replica's live request counts, shared by every
	// snapshot of the replica and by every lease on it.
	Counters *Counters
	// Shadow is the published part of the shadow index and prefill queue;
	// shared by every snapshot.
	Shadow *Shadow
	// Load is the engine's last readable /metrics report, taken at LoadAt
	// (zero before the first); see FreshLoad for the max_age rule.
	LoadAt time.Time
	Load   load.Report

	// The fields above are the ones a decision reads of every replica,
	// kept together so that they share as few cache lines as they can.

	URL string // the engine's base URL
	// ProbeFailures counts consecutive failed probes.
	ProbeFailures int
	// RequestFailures counts consecutive failed requests (OutcomeFailed
	// reports) since the last success or ejection.
	RequestFailures int
	// Ejections counts the ejections since the actor started.
	Ejections int
	// Cards maps each model id the engine lists at /v1/models to its card,
	// the raw JSON object as the engine sent it. Nil until a probe fetched
	// them.
	Cards map[string][]byte
	// Restarts counts the actor's restarts by its supervisor.
	Restarts int

	// LoadInFlight is Counters.InFlight as the scrape that read Load ran
	// (the fewer of the counts when it began and ended): how many of the
	// gateway's requests the report can count.
	LoadInFlight int
	// LoadFailing is set while the engine's page cannot be scraped or read.
	LoadFailing bool
	// EngineRestarts counts the engine restarts its counters revealed.
	EngineRestarts int
	// Scrapes count the scrapes by result; shared by every snapshot.
	Scrapes *ScrapeCounts
	// Events is the engine's KV event stream; zero when it has none.
	Events EventStream
	// EventCounts count the KV events applied; shared by every snapshot.
	EventCounts *EventCounts
	// Warnings are the replica's active warnings; shared by every
	// snapshot, and by the request path, which raises some of them.
	Warnings *Warnings
	// IndexMode is how its cache prediction is fed: exact while it
	// follows its engine's KV events in step, else approximate.
	IndexMode IndexMode
	// SharedEngine reports that the engine serves another router's
	// requests too while the index follows routing decisions
	// (WarnSharedEngines).
	SharedEngine bool
}

// Serves reports whether the replica serves the configured model.
func (s *Snapshot) Serves(model string) bool {
	for _, m := range s.Models {
		if m == model {
			return true
		}
	}
	return false
}

// Ejected reports whether the replica is passively ejected at now.
func (s *Snapshot) Ejected(now time.Time) bool { return now.Before(s.EjectedUntil) }

// Handle is how the rest of the gateway sees one replica: its latest
// Snapshot, published by its actor through an atomic pointer. It is safe for
// concurrent use; only the replica's actor publishes. A Handle outlives its
// actor's restarts, and the fleet keeps it for as long as the replica is a
// member, so its Counters survive both.
type Handle struct {
	snap atomic.Pointer[Snapshot]
}

// NewHandle returns the handle of a new replica, with a first snapshot:
// healthy, not ejected, no cards, with counters c. models is copied.
func NewHandle(id, url string, models []string, c *Counters) *Handle {
	h := &Handle{}
	h.snap.Store(&Snapshot{ID: id, URL: url, Models: slices.Clone(models), Healthy: true, Counters: c,
		Scrapes: &ScrapeCounts{}, Shadow: &Shadow{}, EventCounts: &EventCounts{}, Warnings: &Warnings{},
		IndexMode: IndexApproximate})
	return h
}

// SetEvents sets the engine's KV event stream, which the replica's actor
// subscribes to when the fleet has an EventSource. Call it before the
// actor starts.
func (h *Handle) SetEvents(es EventStream) {
	s := *h.snap.Load()
	s.Events = es
	h.snap.Store(&s)
}

// SetLabels sets the replica's labels. Call it before the actor starts;
// labels is the handle's from then on.
func (h *Handle) SetLabels(labels map[string]string) {
	s := *h.snap.Load()
	s.Labels = labels
	h.snap.Store(&s)
}

// Snapshot returns the latest published snapshot. It never returns nil.
func (h *Handle) Snapshot() *Snapshot { return h.snap.Load() }

// ID returns the replica id.
func (h *Handle) ID() string { return h.snap.Load().ID }

// Shadow returns the replica's published shadow state.
func (h *Handle) Shadow() *Shadow { return h.snap.Load().Shadow }

// Counters returns the replica's live counters.
func (h *Handle) Counters() *Counters { return h.snap.Load().Counters }

// publish replaces the snapshot. Only the replica's actor calls it.
func (h *Handle) publish(s *Snapshot) { h.snap.Store(s) }

package replica

import (
	"time"

	"github.com/inferrail/inferrail/actors/mailbox"

	"github.com/inferrail/inferrail/model/dump"
	"github.com/inferrail/inferrail/model/kvevent"
	"github.com/inferrail/inferrail/model/load"
)

// Message is the replica actor's protocol, all of it in this file: what
// the fleet and the request path send (Estimate, Assign, FirstByte,
// RequestDone, DumpIndex, WarmIndex) and what the actor's own goroutines report back (probed,
// scraped, the events* messages). The marker method seals it: only this
// package defines messages the actor handles.
type Message interface{ replicaMsg() }

// Outcome is how a request attempt on the replica ended, for passive health.
type Outcome uint8

const (
	// OutcomeOK: the engine answered. It ends a failure streak, and after
	// a readmission it resets the ejection backoff.
	OutcomeOK Outcome = iota
	// OutcomeFailed: the attempt failed on the replica's side (connection
	// refused or reset, closed before answering, a 5xx, a timeout).
	// health.unhealthy_threshold of them in a row eject the replica.
	OutcomeFailed
	// OutcomeCancelled: the client went away. It says nothing of the
	// replica and is ignored.
	OutcomeCancelled
	// OutcomeWithdrawn: the attempt ended before any response, and the
	// engine may never have seen it (an endpoint-picker exchange that
	// ended after its request phase: Envoy gave up, or a later filter
	// refused the request). Its blocks are taken back, as a failure's, but
	// it says nothing of the replica's health.
	OutcomeWithdrawn
)

// RequestDone reports how one request attempt on the replica ended. It is
// sent fire-and-forget, once per attempt, after the attempt's lease has been
// released.
type RequestDone struct {
	Outcome Outcome
	// Attempt is the attempt's shadow record when it was assigned (a
	// cache-aware policy routed it), else nil.
	Attempt *Attempt
}

// probed is one probe's result, sent by the actor's own prober goroutine.
type probed struct {
	run   *probeRun         // the prober that sent it; stale ones are dropped
	err   error             // nil when the engine passed its health check
	cards map[string][]byte // the engine's model cards, when this probe fetched them
}

// crash makes the actor panic, to exercise its supervision. Only tests send
// it (see export_test.go).
type crash struct{}

func (*RequestDone) replicaMsg() {}
func (*RequestDone) Inline()     {}
func (*probed) replicaMsg()      {}
func (*crash) replicaMsg()       {}

// A replica that left the fleet may still get a late RequestDone or probe
// result; those are expected and not worth a dead-letter log line.
func (*RequestDone) IgnoreDeadLetterLogging() {}
func (*probed) IgnoreDeadLetterLogging()      {}

var (
	_ Message        = (*RequestDone)(nil)
	_ mailbox.Inline = (*RequestDone)(nil)
	_ Message        = (*probed)(nil)
	_ Message        = (*crash)(nil)
)

// The estimate broadcast and the request path.

// Estimate asks the replica for its estimate of a query: the actor fills
// slot Slot of Gather. It never answers through protoactor. It is handled
// in its sender's goroutine when the replica's mailbox is idle
// (mailbox.Inline): a lookup in the index and the queue, no more.
type Estimate struct {
	Gather Gather
	Slot   int
}

// Assign tells the replica that an attempt was routed to it. Like
// FirstByte and RequestDone it is handled in its sender's goroutine when
// the replica's mailbox is idle (mailbox.Inline): the request path sends
// all three, and handing each to a goroutine of its own cost a wake-up per
// message (issue 16); their handlers record or settle the attempt and
// never wait.
type Assign struct{ Attempt *Attempt }

// FirstByte tells the replica that an attempt got its response head.
type FirstByte struct{ Attempt *Attempt }

func (*Estimate) replicaMsg()  {}
func (*Estimate) Inline()      {}
func (*Assign) replicaMsg()    {}
func (*Assign) Inline()        {}
func (*FirstByte) replicaMsg() {}
func (*FirstByte) Inline()     {}

// A replica that left may still get a late message; not worth a log line.
func (*Estimate) IgnoreDeadLetterLogging()  {}
func (*Assign) IgnoreDeadLetterLogging()    {}
func (*FirstByte) IgnoreDeadLetterLogging() {}

var (
	_ Message        = (*Estimate)(nil)
	_ mailbox.Inline = (*Estimate)(nil)
	_ Message        = (*Assign)(nil)
	_ mailbox.Inline = (*Assign)(nil)
	_ Message        = (*FirstByte)(nil)
	_ mailbox.Inline = (*FirstByte)(nil)
)

// Warm start (issue 17): an instance's index snapshot, served to its peers
// and read from one at startup.

// DumpIndex asks the replica for its index and KV event mapping: the actor
// responds with a *dump.Replica the caller owns.
type DumpIndex struct{}

// WarmIndex fills the replica's index, and its KV event mapping when it
// follows events, from a peer's snapshot of the same replica. Sent before
// the gateway serves, it is applied before any estimate. The actor keeps
// Replica.
type WarmIndex struct{ Replica *dump.Replica }

func (*DumpIndex) replicaMsg() {}
func (*WarmIndex) replicaMsg() {}

var (
	_ Message = (*DumpIndex)(nil)
	_ Message = (*WarmIndex)(nil)
)

// The scrape loop.

// scraped is one scrape's result, sent by the actor's scrape goroutine.
type scraped struct {
	run    *scrapeRun
	report load.Report
	at     time.Time // when the scrape began, so that its age is never understated
	// inFlight is the replica's requests in flight as the scrape ran: the
	// fewer of the counts when it began and when it ended; inFlightMax
	// the more, for the shared-engine check (load.Shared), with steady:
	// no request started while the page was read, and idle: nothing was
	// in flight when the last page was read and nothing started since.
	inFlight, inFlightMax int
	steady, idle          bool
	err                   error
}

func (*scraped) replicaMsg()              {}
func (*scraped) IgnoreDeadLetterLogging() {}

var _ Message = (*scraped)(nil)

// The KV event subscription.

// eventsBatch is one batch of the engine's events, sent by the
// subscription's callbacks.
type eventsBatch struct {
	run   *eventsRun
	seq   uint64
	batch *kvevent.Batch
}

// eventsGap reports lost batches.
type eventsGap struct {
	run     *eventsRun
	restart bool
}

// eventsFailed reports a subscription that could not start (err set) or
// that started after failing (err nil).
type eventsFailed struct {
	run *eventsRun
	err error
}

// eventsQuiet says that Config.EventsQuiet has passed since the
// subscription started.
type eventsQuiet struct {
	run *eventsRun
}

func (*eventsBatch) replicaMsg()  {}
func (*eventsGap) replicaMsg()    {}
func (*eventsFailed) replicaMsg() {}
func (*eventsQuiet) replicaMsg()  {}

// Batches keep coming until the subscription closes, which can be after
// the actor stopped; not worth a log line.
func (*eventsBatch) IgnoreDeadLetterLogging()  {}
func (*eventsGap) IgnoreDeadLetterLogging()    {}
func (*eventsFailed) IgnoreDeadLetterLogging() {}
func (*eventsQuiet) IgnoreDeadLetterLogging()  {}

var (
	_ Message = (*eventsBatch)(nil)
	_ Message = (*eventsGap)(nil)
	_ Message = (*eventsFailed)(nil)
	_ Message = (*eventsQuiet)(nil)
)

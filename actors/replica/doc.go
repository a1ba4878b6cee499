// Package replica holds the gateway's replica actors: one supervised actor
// per engine replica, which owns that replica's health (active probes and
// passive ejection) and its model cards, and publishes them as an immutable
// Snapshot through its Handle.
//
// What it owns and shares:
//
//   - The actor's state (health, failure streaks, ejection and backoff,
//     cards) is touched only by the actor. Every change is published as a
//     new Snapshot through an atomic pointer in the Handle; readers (the
//     routing actors, the front end, admin) never message the actor.
//   - Counters (in flight, pending) are atomics shared by pointer between
//     the snapshots, the leases on the request path and the actor. They
//     outlive the actor's restarts and its stop: leases taken before a
//     replica left the fleet still give their slots back.
//   - Budget, shared by the replica actors of one fleet, caps how many of a
//     model's healthy replicas failed requests may eject at once.
//
// Each actor owns one goroutine, its prober: started when the actor starts,
// cancelled when it stops or restarts, and joined by whoever owns the
// Config's WaitGroup (the fleet, when it stops). The prober calls the Prober
// every health.interval within health.timeout and reports each result to the
// actor as a message; it never touches the actor's state. Receive never
// blocks. The scrape loop and, for a replica with a KV event stream, the
// subscription to it (events.go) run the same way: the subscription's
// batches come to the actor as messages, which it maps onto its shadow
// index with estimate.Events.
//
// The package does no I/O itself: probes go through the Prober interface,
// which transport/health implements over HTTP; scrapes through Scraper
// (transport/scrape) and KV events through EventSource (transport/kvevents).
package replica

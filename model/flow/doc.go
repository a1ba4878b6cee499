// Package flow is the pure part of the gateway's flow control, after
// llm-d's flow controller: Bands holds the requests the gateway holds
// back in priority bands (a higher band always first; flows within a band
// round-robin or as one queue; within a flow first come first served or
// earliest deadline first; a full queue may evict sheddable work for
// higher-priority work), and the saturation detectors (utilization,
// concurrency) say from the replicas' reports when a model's pool is
// saturated. ParseSLO reads a request's latency objective from llm-d's
// headers, and Attained judges whether a finished request met it.
//
// flow is pure: it starts no goroutines, does no I/O and keeps no globals.
// transport/frontend owns a Bands per model under its own lock, does the
// waiting, and feeds the detectors from the replicas' snapshots.
package flow

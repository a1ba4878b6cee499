// Package cluster is a virtual-time fleet simulator: N simulated vLLM engines
// (sim/engine) on one virtual clock, fed by a seeded workload and routed by
// the gateway's own routing core (model/route, running a policy's built-in
// scheduling profile or an EndpointPickerConfig profile of model/sched)
// over the gateway's own per-replica estimates (model/estimate), so that a
// routing policy or profile can be measured over minutes of traffic in a
// fraction of a second and exactly replayed from its seed. The workloads are the benchmark harness's
// (sim/workload), their text tokenized as the simulator's handler does,
// so a virtual run computes the token ids a real one sends; with more
// replicas than Config.Fanout, the cache-aware policies see predictions
// for a shortlist only, as the routing actor asks.
//
// A run is a discrete-event loop over three kinds of events: an engine step
// ending (its tokens come out), a load scrape (every 100 ms, as the gateway
// scrapes /metrics) and a request arriving (it is routed and added to the
// winner's engine). There is no HTTP, no goroutine and no wall clock, so the
// network, the tokenizer and the actor system's latencies are not modelled:
// the fleet measures routing decisions and what the engines do with them.
//
// cluster starts no goroutines, does no I/O and keeps no globals. Run is safe
// for concurrent use; everything a run touches is its own.
package cluster

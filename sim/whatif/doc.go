// Package whatif answers an operator's "how many GPUs does this save on my
// traffic?": it replays a trace (or a generated workload) in virtual time
// through sim/cluster, which routes with the gateway's own routing core, for
// every policy or scheduling profile over a range of replica counts and
// load multiples, and reports per policy and load the fewest replicas that
// meet a latency SLO, the GPUs that saves against round_robin and
// least_request, and each point's latencies and cache hit rates, as
// Markdown with SVG charts and as JSON.
//
// A sweep is made of points (a policy, a replica count, a load multiple);
// each point's result is a file named by a hash of everything that
// determines it, so a rerun skips the points already made. For "fewest
// replicas" a sweep searches each policy's replica counts by bisection,
// assuming that more replicas never make the tail worse, and adds a few
// points around the answer for the knee chart (Plan.Knee); Plan.All runs
// every point.
//
// whatif does no I/O but through the directory it is given (Options.Dir) and
// the progress writer; it starts goroutines only inside Sweep, which joins
// them before returning. Everything it returns is a value the caller owns.
package whatif

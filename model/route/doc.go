// Package route is the routing core that the gateway's routing actors
// (actors/routing) and the virtual-time fleet simulator (sim/cluster) both
// run, so that the simulator measures the decisions the gateway makes.
//
// A decision goes through it in this order:
//
//  1. Collect turns the replicas, as the caller saw them at the decision
//     (View: health, ejection, room under the breakers, counts, load),
//     into the policy's candidates, offering the ejected ones when every
//     healthy one is ejected.
//  2. Core.Ask chooses the candidates worth an estimate request: all of
//     them, or with more than the fanout a shortlist (Shortlist) of those
//     that recently got the prompt's root prefix, then the least loaded.
//  3. Core.Price fills each candidate's predicted cache and queued prefill
//     from its replica's reply, or its published state, and adds what this
//     core assigned there that the replica had not applied yet.
//  4. Core.Choose runs the policy (policy.Policy.Pick) and offers its pick
//     to the caller, choosing again among the rest when the caller could
//     not take it.
//  5. Core.Assign prices the winner's prefill, takes its assignment number
//     and remembers where the prompt went, for later shortlists and prices.
//
// The caller does what needs a clock, a mailbox or an engine: the gateway
// gathers the replies of the replica actors under its deadline and takes a
// lease on the winner, the simulator asks its engines' estimates directly.
//
// route starts no goroutines, does no I/O and keeps no globals; callers pass
// the time and the randomness. A Core is owned by one routing actor or one
// simulation run and is not safe for concurrent use.
package route

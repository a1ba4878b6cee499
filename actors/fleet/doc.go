// Package fleet runs the gateway's actors: one supervised replica actor per
// engine replica, one routing actor per model (per policy of its A/B split),
// and the fleet actor that starts and stops replica actors from the config,
// DNS discovery and the discovery sources (Kubernetes, an endpoint file)
// that transport/ runs and that report through Fleet.SetEndpoints.
//
// The request path talks to the fleet only through Fleet's methods: Pick
// asks the model's routing actor for a replica under a deadline and returns
// a Decision holding a lease on that replica's counters; Done reports the
// outcome fire-and-forget. Nothing on the request path waits on a mailbox
// without a deadline.
//
// What runs where:
//
//   - The fleet actor (actor.go) owns membership: it spawns a replica actor
//     for every configured replica and every address of every DNS group,
//     resolves each group every refresh in a goroutine it owns (results come
//     back as messages), stops the actors of members that leave and tells
//     the routing actors of the affected models. Every owner of members
//     (the static replicas, each DNS group, each discovery source) goes
//     through one join/leave rule (members.go, state.apply): a member whose
//     endpoint did not change keeps its actor and state, a changed one is
//     replaced, and one that left is drained. It supervises the replica
//     and routing actors (protoactor OneForOne: a panicking actor restarts).
//     It publishes the membership as an immutable view through an atomic
//     pointer, which Fleet's read methods load without messaging.
//   - One routing actor per model (actors/routing) answers Pick from the
//     replicas' snapshots and, for the cache-aware policies, the estimates
//     it gathers from their replica actors (routing.Decide waits for them
//     under routing.estimate_deadline), and takes the winner's lease before
//     answering. A
//     model with an A/B split (routing.split or its own split) has one per
//     policy, each with its own policy state; Pick and Explain choose the
//     arm from the request's key (policy.Split), so a conversation stays
//     with one policy. The arms share the replica actors and their shadow
//     indexes.
//     Every arm's policy, and every shadow, is built through model/sched's
//     registry (profile.go): a policy's built-in profile with the routing
//     section's params, or a scheduling profile of the config, whose
//     signals decide what its routing actor gathers.
//   - One replica actor per replica (actors/replica) owns health, ejection
//     and model cards, and publishes snapshots.
//   - One trial worker per model with shadow policies (trial.go), a
//     goroutine Start starts and Stop ends: the model's routing actors hand
//     it each decision through a bounded queue, never waiting (a full queue
//     drops and counts), and it replays the decision through every shadow
//     policy, pricing both picks with the model's cost model (model/shadow).
//     It owns the shadow policies' state and random sources.
//
// Every goroutine the fleet's actors start (probers, resolvers) and the
// trial workers are joined by Stop.
package fleet

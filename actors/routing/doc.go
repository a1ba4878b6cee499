// Package routing holds the gateway's routing actors: one per model (one
// per policy of its A/B split), each owning that model's routing core
// (model/route: the policy with its state and seeded random source, the
// recent owners of root prefixes, the assignments its replicas have not
// applied yet) and answering Pick and Explain.
//
// A decision starts from the replicas' published snapshots: the actor
// offers the policy every replica that serves the model, passes its health
// checks, is not ejected, was not already tried by the request and has room
// under its breakers (route.Collect). For a cache-aware policy and a prompt
// with blocks it then scatter-gathers: it sends each candidate's replica
// actor a replica.Estimate naming one Gather for the decision (only a
// shortlist past routing.estimate_fanout), parks the decision and goes on
// with other messages. The replica that fills the last slot (or, for a
// Pick that Decide asks, the asker on that replica's signal), or the asker
// once routing.estimate_deadline has passed, sends Gathered; the
// actor prices each candidate from its reply, or from its published state
// when it did not answer, adds what it assigned there that the replica had
// not applied, runs the policy and takes a lease on the winner's counters
// before it answers, with the replica.Attempt the asker hands the replica
// actor. The baselines decide at once from the snapshots, with no message
// to a replica actor.
//
// The gateway's policies are scheduling profiles (model/sched: a policy's
// built-in profile, or one of the config's); what a profile routes on
// (sched.Signal) sets what the actor gathers: the broadcast (Estimates),
// the engines' load reports (Load), and always the replicas' labels. An
// Explain of a profile runs it on a copy of the actor's random source, so
// that it names what the next Pick picks and never changes it, and shows
// each plugin's effect per replica. A profile whose filters keep nothing
// answers route.ErrFilteredOut, counted, and logged once per reason.
//
// Because decisions are serialized in the actor and each one holds its
// lease, and counts its assignment, before the next is made, a burst of
// requests sees every earlier decision of the burst and cannot herd onto
// the replica that looked idle.
//
// The gather and its deadline live here: Gather, the Gathered message and
// Decide and Explaining, which the asker calls on its own goroutine. The
// actors start no goroutines and do no I/O; their state lives in the actor
// and is touched only inside Receive, which never blocks. Their mailbox
// (actors/mailbox) hands a Pick, a Gathered and a replica.Estimate that find
// their actor idle to the sender's goroutine: a decision over idle actors
// runs on the asker's goroutine from Pick to answer, one message at a time
// per actor as ever, without a goroutine started for each hop.
package routing

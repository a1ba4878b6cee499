package replica

// Message is the replica actor's protocol. The marker method seals it: only
// this package defines messages the actor handles.
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
func (*probed) replicaMsg()      {}
func (*crash) replicaMsg()       {}

// A replica that left the fleet may still get a late RequestDone or probe
// result; those are expected and not worth a dead-letter log line.
func (*RequestDone) IgnoreDeadLetterLogging() {}
func (*probed) IgnoreDeadLetterLogging()      {}

var (
	_ Message = (*RequestDone)(nil)
	_ Message = (*probed)(nil)
	_ Message = (*crash)(nil)
)

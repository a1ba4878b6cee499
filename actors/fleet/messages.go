package fleet

import "github.com/inferrail/inferrail/config"

// message is the fleet actor's protocol. The marker method seals it; only
// this package sends the fleet actor messages.
type message interface{ fleetMsg() }

// resolved is one lookup of a DNS group, from the group's resolver
// goroutine.
type resolved struct {
	group int          // index in discovery.dns
	run   *resolverRun // the goroutine that sent it; stale ones are dropped
	addrs []string
	err   error
}

// setEndpoints makes a discovery source's members eps (Fleet.SetEndpoints).
type setEndpoints struct {
	source string
	eps    []Endpoint
}

// sourceFailing records why a discovery source cannot refresh, or with an
// empty reason that it can again (Fleet.SourceFailing).
type sourceFailing struct {
	source string
	reason string
}

// reconfigure installs a reload (Fleet.Reconfigure): every routing actor
// of the new table, those without a pid to be spawned, and the static
// replicas. The actor answers on done (capacity 1).
type reconfigure struct {
	models   []*modelState
	replicas []config.Replica
	done     chan error
}

// retire stops routing actors a reload replaced, once their grace period
// has passed. Each finishes the messages already in its mailbox first.
type retire struct {
	models []*modelState
}

// crash makes the actor panic, to exercise its supervision. Only tests send
// it.
type crash struct{}

func (*resolved) fleetMsg()      {}
func (*setEndpoints) fleetMsg()  {}
func (*sourceFailing) fleetMsg() {}
func (*crash) fleetMsg()         {}
func (*reconfigure) fleetMsg()   {}
func (*retire) fleetMsg()        {}

var (
	_ message = (*resolved)(nil)
	_ message = (*setEndpoints)(nil)
	_ message = (*sourceFailing)(nil)
	_ message = (*crash)(nil)
	_ message = (*reconfigure)(nil)
	_ message = (*retire)(nil)
)

// A late lookup or retirement after the fleet stopped is expected, not
// worth a log line.
func (*resolved) IgnoreDeadLetterLogging()      {}
func (*setEndpoints) IgnoreDeadLetterLogging()  {}
func (*sourceFailing) IgnoreDeadLetterLogging() {}
func (*retire) IgnoreDeadLetterLogging()        {}

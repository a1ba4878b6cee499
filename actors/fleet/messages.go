package fleet

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

// crash makes the actor panic, to exercise its supervision. Only tests send
// it.
type crash struct{}

func (*resolved) fleetMsg() {}
func (*crash) fleetMsg()    {}

var (
	_ message = (*resolved)(nil)
	_ message = (*crash)(nil)
)

// A late lookup after the fleet stopped is expected, not worth a log line.
func (*resolved) IgnoreDeadLetterLogging() {}

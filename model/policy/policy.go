// Package policy holds Inferrail's routing policies as pure functions of a
// request and an immutable view of its candidates.
//
// policy starts no goroutines, does no I/O and keeps no globals: callers pass
// in the randomness (and, for later policies, the time). A policy value with
// state (a round-robin position) is owned by one routing actor and is not safe
// for concurrent use.
package policy

import (
	"errors"
	"math/rand/v2"
)

// Candidate is one replica a request may go to, as the routing actor saw it
// when it offered it: it serves the model, passes its health checks, is not
// ejected and has room under its breakers.
type Candidate struct {
	// Replica is the caller's index for the replica; Pick returns the
	// position in the cands slice, and the caller maps it back.
	Replica int
	// InFlight is the gateway's count of requests in flight to the replica.
	InFlight int
	// Pending is how many of those still wait for a response head.
	Pending int
}

// Request is what a policy may know about the request being routed.
type Request struct {
	// Key is a hash of the request's conversation key (x-session-id or
	// user) or, when it names none, of its request id.
	Key uint64
}

// Policy chooses one of the candidates for a request.
type Policy interface {
	// Name is the policy's config name, such as "least_request".
	Name() string
	// Pick returns the position in cands of the chosen replica. cands is
	// never modified. It returns ErrNoCandidate when cands is empty.
	Pick(req *Request, cands []Candidate, rng *rand.Rand) (int, error)
}

// ErrNoCandidate is returned by Pick when no replica can take the request.
var ErrNoCandidate = errors.New("policy: no candidate")

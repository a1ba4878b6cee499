package fleet

import (
	"context"
	"errors"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/inferrail/inferrail/actors/replica"
	"github.com/inferrail/inferrail/actors/routing"
	"github.com/inferrail/inferrail/model/policy"
)

// Prober checks one engine: GET {url}/health within ctx, and, when cards is
// true, GET {url}/v1/models for the model cards it publishes (raw JSON
// objects of its "data" array, keyed by model id). Implemented over HTTP in
// transport/health; tests use fakes.
type Prober interface {
	Probe(ctx context.Context, url string, cards bool) (map[string][]byte, error)
}

// Resolver resolves a DNS group's host to addresses. *net.Resolver
// satisfies it; tests use a fake.
type Resolver interface {
	LookupHost(ctx context.Context, host string) ([]string, error)
}

// Decision is where one attempt of a request goes.
type Decision struct {
	Replica string // replica id
	URL     string // the replica's base URL, such as http://10.0.0.7:8000
	Policy  string // the policy that chose it (the request's arm of a split), for x-inferrail-policy
	// Lease holds the replica's in-flight and pending slots for this
	// attempt. The caller calls Fleet.FirstByte when the response head
	// arrives and Fleet.Done exactly once when the attempt ends.
	Lease *replica.Lease

	// Predicted reports that the KV index priced the replica: CachedTokens
	// is how many prompt tokens it predicts the replica holds, and Estimate
	// the cost model's time to first token there.
	Predicted    bool
	CachedTokens int
	Estimate     time.Duration

	// Explanation is every replica as the policy saw it and the decision,
	// when PickRequest.Log asked for it.
	Explanation *routing.Explanation

	// Ranking is, when PickRequest.Rank asked for it, the ids of the
	// replicas that could have taken the request, best first as the
	// policy ranks them: Replica first. Only Replica holds a lease.
	Ranking []string

	attempt *replica.Attempt // the shadow record, when Predicted
	pid     *actor.PID       // the replica actor, when Predicted
}

// Outcome is how an attempt ended, as the replica actor counts it for
// passive health (ejection).
type Outcome uint8

const (
	// OutcomeOK: the engine answered (any status below 500, or a 5xx that
	// is the request's own fault is still a failure: see OutcomeFailed).
	OutcomeOK Outcome = iota
	// OutcomeFailed: connection refused or reset, closed before answering,
	// a 5xx, or a timeout. Consecutive failures eject the replica.
	OutcomeFailed
	// OutcomeCancelled: the client went away; says nothing of the replica.
	OutcomeCancelled
	// OutcomeWithdrawn: the attempt ended before any response, and may
	// never have reached the engine (replica.OutcomeWithdrawn): its blocks
	// leave the shadow index; says nothing of the replica.
	OutcomeWithdrawn
)

// ModelInfo is one entry of GET /v1/models, in config order: a configured
// model or one of its aliases, with the card an engine serving it
// published (nil until a probe has fetched one).
type ModelInfo struct {
	ID    string // the name clients use
	Model string // the configured model it resolves to
	Card  []byte // the engine's card JSON for Model, or nil
}

// Errors Pick and Explain return besides the routing errors, which they
// return as the routing actor answered them: route.ErrNoReplica,
// route.ErrOverloaded and route.ErrDeadline (the routing actor did not
// answer within the deadline).
var (
	// ErrUnknownModel: the model is neither configured nor an alias.
	ErrUnknownModel = errors.New("fleet: unknown model")
	// ErrStopped: the fleet has been stopped.
	ErrStopped = errors.New("fleet: stopped")
	// ErrUnknownPolicy: Explain named a policy that is not an arm of the
	// model's split.
	ErrUnknownPolicy = errors.New("fleet: the model has no such policy")
)

// PickRequest is one routing question.
type PickRequest struct {
	Model    string         // configured model name (aliases resolved by Resolve)
	Policy   policy.Request // what the policy may know of the request
	Exclude  []string       // replica ids already tried by this request
	Deadline time.Time      // answer by then or fail with ErrDeadline
	// Log asks for the decision's explanation (Decision.Explanation), for
	// the decision log.
	Log bool
	// Rank asks for the candidates' ranking (Decision.Ranking), for an
	// endpoint picker's ordered fallback list.
	Rank bool
	// Unpriced routes on Policy's blocks but predicts nothing from them
	// (Decision.Predicted stays false): they are the first prompt of a
	// completions batch, and the engine's usage counts every prompt of it.
	Unpriced bool
}

// Package policy holds Inferrail's routing policies as pure functions of a
// request and an immutable view of its candidates.
//
// policy starts no goroutines, does no I/O and keeps no globals: callers pass
// in the randomness and the time (Request.Now). A policy value with state (a
// round-robin position, cost_model's hot-prefix sketch and session table) is
// owned by one routing actor and is not safe for concurrent use.
package policy

import (
	"errors"
	"math/rand/v2"
	"time"

	"github.com/inferrail/inferrail/model/cost"
	"github.com/inferrail/inferrail/model/prefix"
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

	// The fields below feed the cache-aware policies (prefix_hash, kv_aware,
	// cost_model); the baselines ignore them, and zero values are safe.

	// Key is a stable hash of the replica's id, the same across config
	// reloads and gateways: prefix_hash and hot-prefix ownership hash on it,
	// and session affinity remembers it. Zero means unknown: Replica is
	// used instead, which is stable only while the replica set is.
	Key uint64
	// CachedTokens is how many of the prompt's leading tokens the KV index
	// predicts the replica holds.
	CachedTokens int
	// QueuedPrefill is the replica's virtual prefill queue: the estimated
	// prefill of the requests routed there that still await their first
	// byte, drained in real time (the raw part of cost_model's W).
	QueuedPrefill time.Duration
	// Running is how many requests the engine reports running (decoding),
	// else the gateway's count of those past their first byte.
	Running int
	// KVUsage is the engine's reported share of its KV cache in use, in
	// [0, 1]; meaningful only when Fresh.
	KVUsage float64
	// Fresh reports whether the engine's load report is recent enough
	// (load.max_age) to trust KVUsage.
	Fresh bool
	// Session reports that the caller knows this replica as the last one
	// of the request's conversation (besides cost_model's own table).
	Session bool
	// Shared reports that the replica's engine also serves requests the
	// caller did not send it (another router or client; load.Shared),
	// while the caller's index is fed by its own decisions alone.
	Shared bool

	// Unpredicted reports that the caller has no cache prediction for the
	// replica (left off the shortlist, or its estimate came too late):
	// CachedTokens is then 0 because nothing is known, not because the
	// replica holds nothing. cost_model charges it no recompute price.
	Unpredicted bool

	// Model, when not nil, is the replica's own cost model, fitted online
	// (routing.cost_model: auto), which prices it instead of the policy's.
	// Read only: it points into the replica's published snapshot.
	Model *cost.Model

	// The fields below feed the scheduling pipeline's plugins (model/sched);
	// the policies above ignore them, and zero values are safe.

	// Waiting is how many requests the engine reports waiting
	// (vllm:num_requests_waiting, sglang:num_queue_reqs); meaningful only
	// when Fresh.
	Waiting int
	// PendingTokens is the prompt tokens, less those predicted cached, of
	// the requests routed to the replica that still await their first
	// byte: llm-d's in-flight tokens, in tokens where QueuedPrefill is in
	// time.
	PendingTokens int
	// Labels are the replica's configured labels (llm-d.ai/role and the
	// like), read by the label filters. Read only; may be nil.
	Labels map[string]string
}

// Request is what a policy may know about the request being routed.
type Request struct {
	// Key is a hash of the request's conversation key (x-session-id or
	// user) or, when it names none, of its request id.
	Key uint64

	// PromptTokens is the prompt's length in tokens; 0 when not tokenized.
	PromptTokens int
	// Blocks are the chained hashes of the prompt's full blocks
	// (model/prefix), so Blocks[i] names the whole prefix of i+1 blocks.
	// Read only; a policy never keeps it.
	Blocks []prefix.Hash
	// BlockSize is tokens per block, as the engines' --block-size; 0 is
	// taken as 16, vLLM's default.
	BlockSize int
	// SessionKey is a hash of the conversation the request names
	// (x-session-id or the user field), or 0 when it names none.
	SessionKey uint64
	// Now is the decision's time, for the policies that measure demand over
	// time. The caller's clock: policies never read one.
	Now time.Time
	// SLO is the request's latency objective: from llm-d's headers
	// (x-llm-d-slo-ttft-ms, x-llm-d-slo-tpot-ms), else its model's
	// defaults. Zero fields set no objective.
	SLO SLO
}

// SLO is a request's latency objective: its time to first token and its
// time per output token. A zero field sets no objective on that measure.
type SLO struct {
	TTFT, TPOT time.Duration
}

// ErrNotAdmitted is returned by a decision that finds no candidate able to
// serve the request within its SLO and is configured to refuse rather
// than send it to miss (llm-d's latency-slo-admitter; the gateway answers
// 500 "request cannot be admitted", as llm-d does).
var ErrNotAdmitted = errors.New("policy: request cannot be admitted within its SLO")

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

// ReplicaKey is a replica's Candidate.Key: FNV-1a of its id, the same in
// every gateway, across reloads and in the fleet simulator.
func ReplicaKey(id string) uint64 { return Key(id) }

// Key is FNV-1a of s: stable across processes, for candidate keys and the
// conversation and request keys of a Request.
func Key[T ~string | ~[]byte](s T) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}

// CacheAware reports whether the policy named name routes on the estimate
// broadcast: predicted cache, queued prefill and the prompt's blocks. The
// gateway reads this from the registry of model/sched (a profile's
// sched.SignalEstimates); this is the same for this package's
// implementations.
func CacheAware(name string) bool {
	p, err := New(name)
	_, ok := p.(estimating)
	return err == nil && ok
}

// estimating marks the policies that route on the estimate broadcast.
type estimating interface{ routesOnEstimates() }

func (*PrefixHash) routesOnEstimates() {}
func (*KVAware) routesOnEstimates()    {}
func (*CostModel) routesOnEstimates()  {}

// Cost returns the cost model that prices c: its own (Model) when it has
// one, else def.
func (c *Candidate) Cost(def *cost.Model) *cost.Model {
	if c.Model != nil {
		return c.Model
	}
	return def
}

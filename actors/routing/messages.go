package routing

import (
	"errors"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/inferrail/inferrail/actors/mailbox"

	"github.com/inferrail/inferrail/actors/replica"
	"github.com/inferrail/inferrail/model/cost"
	"github.com/inferrail/inferrail/model/policy"
	"github.com/inferrail/inferrail/model/sched"
	"github.com/inferrail/inferrail/model/shadow"
)

// Message is the routing actor's protocol. The marker method seals it: only
// this package defines messages the actor handles.
type Message interface{ routingMsg() }

// Replica is what a routing actor reads of one replica: its latest snapshot.
// *replica.Handle satisfies it; tests use fakes.
type Replica interface {
	Snapshot() *replica.Snapshot
}

// Estimator is a Replica whose actor answers estimate requests. A Replica
// that is not one is priced from its published state alone.
type Estimator interface {
	Replica
	// PID is the replica actor.
	PID() *actor.PID
}

// ReplicasChanged gives the actor its model's replicas: every member of the
// fleet that serves the model, in a stable order. It replaces the previous
// set whole. The slice is the actor's once sent.
type ReplicasChanged struct {
	Replicas []Replica
}

// Pick asks for a replica for one request attempt. The actor answers the
// asker with a *Picked through ctx.Respond, unless the asker abandoned the
// question first. Decide sends one and waits for its answer under the
// estimate deadline and the request's.
//
// The actor never writes to a Pick. Its sender touches it after sending
// only through Abandon and Answer, which hand the answer over atomically:
// either the actor answers first and the asker gets the answer (with its
// lease), or the asker abandons first and the actor releases any lease it
// took and does not answer. So a lease is never lost to a timed-out future.
type Pick struct {
	// Request is what the policy may know of the request. A zero Now is
	// the decision's time, as the actor's clock reads it.
	Request policy.Request
	// Exclude lists replica ids the request already tried. It is read by
	// the actor and must not change once sent.
	Exclude []string
	// Deadline is when the asker stops waiting. A Pick processed after its
	// deadline is answered route.ErrDeadline without deciding.
	Deadline time.Time

	// Log asks for the decision's explanation (Picked.Explanation), for
	// the decision log: the policy explains its choice before making it,
	// with the same draw, which costs a second evaluation.
	Log bool
	// Rank asks for the ranking of the candidates (Picked.Ranking), for
	// an endpoint picker's ordered fallback list.
	Rank bool

	// Answered, when not nil, receives a value once the actor has
	// answered (capacity 1; the actor never blocks, and a value already
	// waiting there stands for the answer too). An asker that waits on it
	// instead of on a protoactor future saves the future's registration
	// and timer on every decision.
	Answered chan struct{}
	// Gathers, with Answered, has the estimate gather signal Answered
	// once the last reply is in, instead of sending the actor Gathered:
	// the asker sends Gathered itself, so that the decision runs in its
	// goroutine when the actor is idle (mailbox.Inline) rather than in the
	// last replica actor's. A value on Answered while Answer is nil is
	// that signal. Decide sets it.
	Gathers bool

	answer atomic.Pointer[Picked] // nil, the actor's answer, or abandoned
	// done is the Gathered that Decide sends for the Pick (once: on the
	// gather's signal or at the estimate deadline), kept here so that
	// deciding does not allocate one.
	done Gathered
}

// gathered returns the Gathered for p that its asker sends.
func (p *Pick) gathered() *Gathered {
	p.done.Pick = p
	return &p.done
}

// abandoned marks a Pick whose asker stopped waiting. It is never modified.
var abandoned = &Picked{}

// Abandon tells the actor that the asker no longer waits for an answer. It
// reports true if the actor had not answered yet: it then never will, and
// releases any lease it takes. When it reports false, the actor has
// answered, and Answer returns that answer, which the asker then owns (with
// its lease).
func (p *Pick) Abandon() bool { return p.answer.CompareAndSwap(nil, abandoned) }

// Answer returns the actor's answer, or nil if there is none or the asker
// abandoned the question. It is what the asker reads when its future timed
// out but Abandon reported false.
func (p *Pick) Answer() *Picked {
	if a := p.answer.Load(); a != abandoned {
		return a
	}
	return nil
}

// settle records the actor's answer, reporting false if the asker had
// abandoned the question.
func (p *Pick) settle(a *Picked) bool {
	if !p.answer.CompareAndSwap(nil, a) {
		return false
	}
	if p.Answered != nil {
		select {
		case p.Answered <- struct{}{}:
		default: // the gather's signal, unread: the asker reads Answer on it
		}
	}
	return true
}

// Picked answers a Pick: the chosen replica with a lease on its counters, or
// an error. It is immutable once sent; the asker owns its lease.
type Picked struct {
	// Replica is the snapshot the replica was chosen on; nil with Err.
	Replica *replica.Snapshot
	// Lease holds the attempt's in-flight and pending slots on the
	// replica; the asker owns it and must release it.
	Lease *replica.Lease
	// Policy names the policy that chose.
	Policy string
	// Err is route.ErrNoReplica, route.ErrOverloaded or route.ErrDeadline.
	Err error

	// With the estimate broadcast (cache-aware policies and a prompt with
	// blocks): Attempt is what the asker sends the replica actor in
	// replica.Assign, FirstByte and RequestDone; CachedTokens is the
	// winner's predicted cache and Estimate its estimated time to first
	// token. Estimated reports that they are set.
	Attempt      *replica.Attempt
	CachedTokens int
	Estimate     cost.Estimate
	Estimated    bool

	// Explanation is the decision explained, when the Pick asked to Log
	// it: every replica as the policy saw it, and the one chosen.
	Explanation *Explanation

	// Ranking is, when the Pick asked to Rank, the ids of the replicas
	// that could have taken the request, best first as the policy ranks
	// them (route.Core.Ranking): Replica's first.
	Ranking []string

	// trial is the decision for Config.Trials, which the actor takes
	// back before answering.
	trial *shadow.Decision
}

// An answer can reach its future after it timed out: the asker then reads
// it through Answer, so the dead letter is expected, not worth a log line.
func (*Picked) IgnoreDeadLetterLogging() {}

// Gathered tells the routing actor to decide a Pick (or answer an Explain)
// whose estimates it broadcast: sent when the last replica asked has
// answered, or by the asker once routing.estimate_deadline has passed
// (Decide, Explaining). The first one decides; later ones for the same
// question are ignored. One of Pick and Explain is set.
type Gathered struct {
	Pick    *Pick
	Explain *Explain
}

// Explain asks what the model's policy would decide for a request now,
// without routing it: no lease is taken, nothing is assigned and the
// policy's state does not change. The actor sends one *Explanation on
// Answered (capacity 1) unless Deadline passed first. Explaining sends one
// and waits for the answer.
type Explain struct {
	Request  policy.Request
	Deadline time.Time
	Answered chan *Explanation
}

// ErrNoExplain: the policy does not explain its decisions (the baselines).
var ErrNoExplain = errors.New("routing: the policy does not explain its decisions")

// Explanation is the answer to Explain: every replica serving the model in
// the actor's order, and the decision.
type Explanation struct {
	Policy   string
	Replicas []ReplicaExplained
	// Winner is the id of the replica the policy would pick; empty when
	// none could take the request or the policy does not explain.
	Winner   string
	Decision policy.Decision
	// Workings names what the policy filled in of each replica's
	// workings (Estimate, Score, Weight, …).
	Workings policy.Workings
	// Err is route.ErrNoReplica, route.ErrOverloaded, ErrNoExplain,
	// route.ErrFilteredOut or route.ErrDeadline.
	Err error
	// Profiles are, for a scheduling profile (a policy's built-in one
	// included), each profile it ran with every plugin's effect on each
	// replica offered.
	Profiles []ProfileExplained
}

// ProfileExplained is one scheduling profile's run.
type ProfileExplained struct {
	Profile, Picker string
	// Winner is the id of the profile's pick; empty with Err.
	Winner string
	// Err is the sched.FilteredError naming the filter that left nothing.
	Err error
	// Replicas are the replicas offered, in the actor's order.
	Replicas []PluginsExplained
}

// PluginsExplained is what one profile's plugins made of one replica.
type PluginsExplained struct {
	ID string
	// Filter names the filter that set the replica aside, "" if none did.
	Filter string
	// Scores are each scorer's raw and weighted score, in the profile's
	// order; none when a filter set it aside.
	Scores []sched.ScoreExplained
	// Total is the weighted mean of the scores; Picked marks the pick.
	Total  float64
	Picked bool
}

// ReplicaExplained is one replica in an explanation.
type ReplicaExplained struct {
	ID string
	// Offered reports that the policy was offered the replica; Reason
	// says why not: "unhealthy", "ejected" or "full".
	Offered bool
	Reason  string
	// The replica's state as the policy saw it.
	InFlight, Pending, Running int
	KVUsage                    float64
	Fresh                      bool
	// Answered reports that the replica's actor answered the estimate
	// request within the deadline; otherwise it was priced from its
	// published state.
	Answered      bool
	QueuedPrefill time.Duration
	CachedTokens  int
	// From the policy's workings (policy.Explained), when offered.
	PricedTokens int
	Owner        bool
	Session      bool
	Guard        policy.Guard
	Estimate     cost.Estimate
	Score        float64
	Weight       uint64
}

// crash makes the actor panic, to exercise its supervision. Only tests send
// it.
type crash struct{}

func (*ReplicasChanged) routingMsg() {}
func (*Pick) routingMsg()            {}
func (*Gathered) routingMsg()        {}

// A Pick and its Gathered are the decision itself: short, never blocking,
// and waited for by their sender, who handles them when the actor is idle.
func (*Pick) Inline()        {}
func (*Gathered) Inline()    {}
func (*Explain) routingMsg() {}
func (*crash) routingMsg()   {}

// A Gathered can arrive after its routing actor stopped.
func (*Gathered) IgnoreDeadLetterLogging() {}

var (
	_ Message = (*ReplicasChanged)(nil)
	_ Message = (*Pick)(nil)
	_ Message = (*Gathered)(nil)
	_ Message = (*Explain)(nil)
	_ Message = (*crash)(nil)

	_ mailbox.Inline = (*Pick)(nil)
	_ mailbox.Inline = (*Gathered)(nil)
)

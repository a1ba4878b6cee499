package routing

import (
	"errors"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/inferrail/inferrail/model/cost"
	"github.com/inferrail/inferrail/model/policy"
)

// Explain asks what the model's policy would decide for a request now,
// without routing it: no lease is taken, nothing is assigned and the
// policy's state does not change. The actor sends one *Explanation on
// Answered (capacity 1) unless Deadline passed first.
type Explain struct {
	Request  policy.Request
	Deadline time.Time
	Answered chan *Explanation
}

func (*Explain) routingMsg() {}

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
	// Err is ErrNoReplica, ErrOverloaded, ErrNoExplain or ErrDeadline.
	Err error
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

func (a *routingActor) explain(ctx actor.Context, m *Explain) {
	if !time.Now().Before(m.Deadline) {
		return
	}
	now := a.st.Now()
	pick := &Pick{Request: m.Request, Deadline: m.Deadline}
	offered := a.offer(pick, now)
	if _, ok := a.st.Policy.(policy.Explainer); ok && a.st.Estimates && len(m.Request.Blocks) > 0 {
		if a.park(ctx, pick, offered, m) {
			return
		}
	}
	pd := &pending{cands: append([]policy.Candidate(nil), a.cands...), snaps: append(a.snaps[:0:0], a.snaps...), offered: offered, explain: m}
	clear(a.snaps)
	if a.st.Estimates {
		for i := range pd.cands {
			a.price(&pd.cands[i], pd.snaps[i], &m.Request, nil, now)
		}
	}
	a.explained(m, pd, now)
}

// explained answers an Explain from the priced candidates of pd.
func (a *routingActor) explained(m *Explain, pd *pending, now time.Time) {
	ex := a.explanation(&m.Request, pd, now)
	if time.Now().Before(m.Deadline) {
		select {
		case m.Answered <- ex:
		default:
		}
	}
}

// explanation explains what the policy makes of req over the priced
// candidates of pd, with its next draw, changing nothing.
func (a *routingActor) explanation(req0 *policy.Request, pd *pending, now time.Time) *Explanation {
	ex := &Explanation{Policy: a.st.name}
	byReplica := make(map[int]int, len(pd.cands))
	for i, c := range pd.cands {
		byReplica[c.Replica] = i
	}
	for i, r := range a.st.replicas {
		s := r.Snapshot()
		if !s.Serves(a.st.Model) {
			continue
		}
		re := ReplicaExplained{ID: s.ID, InFlight: s.Counters.InFlight(), Pending: s.Counters.Pending()}
		switch k, ok := byReplica[i]; {
		case ok:
			c := pd.cands[k]
			re.Offered = true
			re.Running, re.KVUsage, re.Fresh = c.Running, c.KVUsage, c.Fresh
			re.QueuedPrefill, re.CachedTokens = c.QueuedPrefill, c.CachedTokens
			if pd.gather != nil {
				_, re.Answered = pd.gather.Reply(k)
			}
		case !s.Healthy:
			re.Reason = "unhealthy"
		case s.Ejected(now):
			re.Reason = "ejected"
		default:
			re.Reason = "full"
		}
		ex.Replicas = append(ex.Replicas, re)
	}
	switch e, ok := a.st.Policy.(policy.Explainer); {
	case !ok:
		ex.Err = ErrNoExplain
	case len(pd.cands) == 0 && pd.offered == 0:
		ex.Err = ErrNoReplica
	case len(pd.cands) == 0:
		ex.Err = ErrOverloaded
	default:
		req := *req0
		if req.Now.IsZero() {
			req.Now = now
		}
		out, err := e.Explain(&req, pd.cands, a.peek())
		if err != nil {
			ex.Err = err
			break
		}
		ex.Decision = out.Decision
		for k, c := range out.Cands {
			id := a.st.replicas[pd.cands[k].Replica].Snapshot().ID
			for j := range ex.Replicas {
				if ex.Replicas[j].ID != id {
					continue
				}
				re := &ex.Replicas[j]
				re.PricedTokens, re.Owner, re.Session = c.PricedTokens, c.Owner, c.Session
				re.Guard, re.Estimate, re.Score, re.Weight = c.Guard, c.Estimate, c.Score, c.Weight
			}
		}
		if w := out.Winner; w >= 0 && w < len(pd.cands) {
			ex.Winner = a.st.replicas[pd.cands[w].Replica].Snapshot().ID
		}
	}
	return ex
}

// peek returns the policy's next draw without taking it.
func (a *routingActor) peek() uint64 {
	if a.st.Source == nil {
		return 0
	}
	c := *a.st.Source
	return c.Uint64()
}

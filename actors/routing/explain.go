package routing

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/inferrail/inferrail/model/policy"
	"github.com/inferrail/inferrail/model/route"
)

func (a *routingActor) explain(ctx actor.Context, m *Explain) {
	if !time.Now().Before(m.Deadline) {
		return
	}
	now := a.st.Now()
	offered := a.collect(nil, now)
	if _, ok := a.st.Policy.(policy.Explainer); ok && a.st.Estimates && len(m.Request.Blocks) > 0 {
		if a.park(ctx, m, &m.Request, offered, m, now) {
			return
		}
	}
	pd := &pending{cands: append([]policy.Candidate(nil), a.cands...), snaps: append(a.snaps[:0:0], a.snaps...), offered: offered, explain: m}
	clear(a.snaps)
	if a.st.Estimates {
		for i := range pd.cands {
			a.st.core.Price(&pd.cands[i], ledger(pd.snaps[pd.cands[i].Replica]), &m.Request, nil, now)
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
	case len(pd.cands) == 0:
		ex.Err = route.Unplaced(pd.offered)
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

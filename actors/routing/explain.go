package routing

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/inferrail/inferrail/model/policy"
	"github.com/inferrail/inferrail/model/route"
	"github.com/inferrail/inferrail/model/sched"
)

func (a *routingActor) explain(ctx actor.Context, m *Explain) {
	if !time.Now().Before(m.Deadline) {
		return
	}
	now := a.st.Now()
	offered := a.collect(nil, now)
	if a.explains() && a.st.Estimates && len(m.Request.Blocks) > 0 {
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
			_, re.Answered = pd.reply(k)
		case !s.Healthy:
			re.Reason = "unhealthy"
		case s.Ejected(now):
			re.Reason = "ejected"
		default:
			re.Reason = "full"
		}
		ex.Replicas = append(ex.Replicas, re)
	}
	req := *req0
	if req.Now.IsZero() {
		req.Now = now
	}
	switch p := a.st.Policy.(type) {
	case *sched.Scheduler:
		a.explainProfiles(ex, p, &req, pd)
	case policy.Explainer:
		if len(pd.cands) == 0 {
			ex.Err = route.Unplaced(pd.offered)
			break
		}
		out, err := p.Explain(&req, pd.cands, a.peek())
		if err != nil {
			ex.Err = err
			break
		}
		ex.Decision, ex.Workings = out.Decision, out.Workings
		a.workings(ex, pd, out.Cands)
		if w := out.Winner; w >= 0 && w < len(pd.cands) {
			ex.Winner = a.st.replicas[pd.cands[w].Replica].Snapshot().ID
		}
	default:
		ex.Err = ErrNoExplain
		if len(pd.cands) == 0 {
			ex.Err = route.Unplaced(pd.offered)
		}
	}
	return ex
}

// explains reports whether the actor's policy explains its decisions.
func (a *routingActor) explains() bool {
	switch a.st.Policy.(type) {
	case *sched.Scheduler, policy.Explainer:
		return true
	}
	return false
}

// explainProfiles explains a scheduling profile's decision: each profile
// it runs, with each plugin's effect per replica, and the primary
// profile's decision and workings in the policy's terms. It draws from a
// copy of the actor's source, so that the next decision picks what it
// names.
func (a *routingActor) explainProfiles(ex *Explanation, s *sched.Scheduler, req *policy.Request, pd *pending) {
	if len(pd.cands) == 0 {
		ex.Err = route.Unplaced(pd.offered)
		return
	}
	se, err := s.Explain(req, pd.cands, a.peekRand())
	id := func(k int) string { return a.st.replicas[pd.cands[k].Replica].Snapshot().ID }
	for _, pe := range se.Profiles {
		pr := ProfileExplained{Profile: pe.Profile, Picker: pe.Picker, Err: pe.Err}
		if pe.Winner >= 0 {
			pr.Winner = id(pe.Winner)
		}
		for k, r := range pe.Replicas {
			pr.Replicas = append(pr.Replicas, PluginsExplained{ID: id(k), Filter: r.Filter, Scores: r.Scores, Total: r.Total, Picked: r.Picked})
		}
		ex.Profiles = append(ex.Profiles, pr)
	}
	if err != nil {
		ex.Err = fmt.Errorf("%w: %w", route.ErrFilteredOut, err)
		return
	}
	pe := &se.Profiles[se.Primary]
	ex.Decision, ex.Workings = pe.Decision, pe.Workings
	w := make([]policy.Explained, len(pe.Replicas))
	for k := range pe.Replicas {
		w[k] = pe.Replicas[k].Workings
	}
	a.workings(ex, pd, w)
	ex.Winner = id(pe.Winner)
}

// workings copies the policy's workings of each candidate of pd (w, in
// pd.cands' order) into the explanation's replicas.
func (a *routingActor) workings(ex *Explanation, pd *pending, w []policy.Explained) {
	for k, c := range w {
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
}

// peekRand returns a copy of the actor's random source: what it draws is
// what the next decision draws, and drawing from it changes nothing.
func (a *routingActor) peekRand() *rand.Rand {
	if a.st.Source == nil {
		return rand.New(rand.NewPCG(0, 0))
	}
	c := *a.st.Source
	return rand.New(&c)
}

// peek returns the policy's next draw without taking it.
func (a *routingActor) peek() uint64 {
	if a.st.Source == nil {
		return 0
	}
	c := *a.st.Source
	return c.Uint64()
}

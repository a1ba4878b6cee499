package replica

import (
	"slices"
	"sync"
	"time"
)

// Budget enforces health.max_ejection_percent: failed requests may eject no
// more than that percent of a model's replicas that pass their health checks,
// so requests that make every engine fail cannot empty the pool. With the
// default 50 percent, one of two healthy replicas may be ejected, two of
// four, and never the only one.
//
// One Budget is shared by every replica actor of a fleet. Each actor joins
// when it starts, reports its probe verdict when it changes, asks TryEject
// before ejecting itself and leaves when it stops. A replica serving several
// models must fit every one of their budgets. Ejections end by time alone:
// a member counts as ejected while now is before the end TryEject granted.
//
// Budget is safe for concurrent use. One mutex guards it; it is taken only on
// those rare events, never on the request path.
type Budget struct {
	percent int

	mu      sync.Mutex
	members map[string]*budgetMember   // by replica id
	byModel map[string][]*budgetMember // by configured model, rebuilt on join and leave
}

type budgetMember struct {
	id      string
	owner   any // who joined it (JoinAs); LeaveAs by another leaves it
	models  []string
	healthy bool      // passes its health checks
	until   time.Time // end of its current or last ejection
}

// NewBudget returns an empty budget that lets failed requests eject at most
// percent (0 to 100) of each model's healthy replicas.
func NewBudget(percent int) *Budget {
	return &Budget{
		percent: min(max(percent, 0), 100),
		members: make(map[string]*budgetMember),
		byModel: make(map[string][]*budgetMember),
	}
}

// Join adds replica id serving models as healthy and not ejected, replacing
// whatever the budget knew of it: a restarted actor joins again as new.
func (b *Budget) Join(id string, models []string) { b.JoinAs(id, models, nil) }

// JoinAs is Join on behalf of owner (a replica's Handle), whose LeaveAs
// removes it only while no other owner has joined under the same id since:
// a member replaced by one with its id (a relabelled pod) must not leave
// the budget when the old one's actor stops after the new one started.
func (b *Budget) JoinAs(id string, models []string, owner any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if old := b.members[id]; old != nil {
		b.unindex(old)
	}
	m := &budgetMember{id: id, owner: owner, models: slices.Clone(models), healthy: true}
	b.members[id] = m
	for _, name := range m.models {
		b.byModel[name] = append(b.byModel[name], m)
	}
}

// LeaveAs removes replica id if owner was the last to join it.
func (b *Budget) LeaveAs(id string, owner any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if m := b.members[id]; m != nil && m.owner == owner {
		b.unindex(m)
		delete(b.members, id)
	}
}

func (b *Budget) unindex(m *budgetMember) {
	for _, name := range m.models {
		list := slices.DeleteFunc(b.byModel[name], func(x *budgetMember) bool { return x == m })
		if len(list) == 0 {
			delete(b.byModel, name)
		} else {
			b.byModel[name] = list
		}
	}
}

// SetHealthy records replica id's health check verdict.
func (b *Budget) SetHealthy(id string, healthy bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if m := b.members[id]; m != nil {
		m.healthy = healthy
	}
}

// TryEject ejects replica id until the given time if every model it serves
// can spare it at now, and reports whether it did. A replica that fails its
// health checks is out of rotation already, so ejecting it costs no budget.
func (b *Budget) TryEject(id string, until, now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	m := b.members[id]
	if m == nil {
		return false
	}
	if m.healthy {
		for _, name := range m.models {
			healthy, ejected := b.count(name, now, m)
			// This one is healthy and would be ejected too.
			if (ejected+1)*100 > b.percent*(healthy+1) {
				return false
			}
		}
	}
	m.until = until
	return true
}

// count returns the healthy replicas of model other than skip, and how many
// of those are ejected at now. b.mu is held.
func (b *Budget) count(model string, now time.Time, skip *budgetMember) (healthy, ejected int) {
	for _, x := range b.byModel[model] {
		if x == skip || !x.healthy {
			continue
		}
		healthy++
		if now.Before(x.until) {
			ejected++
		}
	}
	return healthy, ejected
}

// Count returns how many of model's replicas pass their health checks and how
// many of those are ejected at now.
func (b *Budget) Count(model string, now time.Time) (healthy, ejected int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.count(model, now, nil)
}

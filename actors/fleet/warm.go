package fleet

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/inferrail/inferrail/actors/replica"
	"github.com/inferrail/inferrail/model/dump"
)

// DumpIndex returns the index snapshot of every member (GET
// /admin/index/snapshot), in the order of Replicas: it asks every replica
// actor at once and waits at most timeout in all.
func (f *Fleet) DumpIndex(timeout time.Duration) (*dump.Snapshot, error) {
	v := f.view.Load()
	futures := make([]actor.Future, len(v.order))
	for i, m := range v.order {
		futures[i] = f.sys.Root.RequestFuture(m.pid, &replica.DumpIndex{}, timeout)
	}
	s := &dump.Snapshot{Replicas: make([]dump.Replica, 0, len(futures))}
	for i, fu := range futures {
		res, err := fu.Result()
		if err != nil {
			return nil, fmt.Errorf("fleet: replica %s: index snapshot: %w", v.order[i].h.ID(), err)
		}
		r, ok := res.(*dump.Replica)
		if !ok {
			return nil, fmt.Errorf("fleet: replica %s: index snapshot: answered %T", v.order[i].h.ID(), res)
		}
		s.Replicas = append(s.Replicas, *r)
	}
	return s, nil
}

// WarmIndex hands each member its part of a peer's snapshot s (by replica
// id) and returns the ids of those it warmed. Replicas of s that are not
// members are ignored. Sent before the gateway serves, every part is
// applied before the first estimate.
func (f *Fleet) WarmIndex(s *dump.Snapshot) []string {
	v := f.view.Load()
	var warmed []string
	for i := range s.Replicas {
		r := &s.Replicas[i]
		m, ok := v.byID[r.ID]
		if !ok {
			continue
		}
		f.sys.Root.Send(m.pid, &replica.WarmIndex{Replica: r})
		warmed = append(warmed, r.ID)
	}
	return warmed
}

// Warn raises code with msg on every member (the metric
// inferrail_replica_warning and /admin/replicas read it) and logs it once,
// for a condition of the whole instance, such as an index that started
// cold.
func (f *Fleet) Warn(log *slog.Logger, code replica.WarningCode, msg string, attrs ...any) {
	now := time.Now()
	for _, m := range f.view.Load().order {
		m.h.Snapshot().Warnings.Raise(nil, now, code, msg)
	}
	if log != nil {
		log.Warn(msg, append([]any{"warning", string(code)}, attrs...)...)
	}
}

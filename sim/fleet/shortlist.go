package fleet

import (
	"time"

	"github.com/inferrail/inferrail/model/policy"
	"github.com/inferrail/inferrail/model/prefix"
)

// The shortlist's memory, as the routing actor keeps it
// (actors/routing/estimate.go): the last recentOwners replicas each root
// prefix went to, for up to maxRecent roots before it starts over.
const (
	recentOwners = 4
	maxRecent    = 1 << 16
)

// shortlisting reports whether this decision asks only a shortlist: a
// cache-aware policy, a prompt with blocks, and more candidates than the
// fanout.
func (r *run) shortlisting() bool {
	return r.aware && r.cfg.Fanout > 0 && len(r.blocks) > 0 && len(r.cands) > r.cfg.Fanout
}

// shortlist takes the cache prediction away from the candidates the
// routing actor would not ask (routing.ask): it lists the hinted replicas
// and then the least loaded by their published queues (policy.Shortlist),
// and prices the rest from their queues alone, with nothing cached.
// r.cands holds every candidate with its estimate on entry.
func (r *run) shortlist(req *policy.Request, now time.Time) {
	if r.onShortlist != nil {
		full := append([]policy.Candidate(nil), r.cands...)
		draw := *r.pcg // a copy: the next Uint64 Pick will take
		r.onShortlist(req, full, draw.Uint64())
	}
	r.hinted = r.hints(r.hinted[:0], r.blocks)
	r.listed = policy.Shortlist(r.listed[:0], r.cands, r.hinted, r.cfg.Fanout, r.model)
	asked := r.hinted[:0] // reused: hinted is not read again
	for range r.cands {
		asked = append(asked, false)
	}
	for _, i := range r.listed {
		asked[i] = true
	}
	for i := range r.cands {
		if !asked[i] {
			r.cands[i].CachedTokens = 0
		}
	}
}

// roots returns the root prefixes a prompt's blocks are remembered under:
// its first 2 and its first 16 blocks (fewer when it has fewer).
func roots(blocks []prefix.Hash) (short, long prefix.Hash) {
	return blocks[min(len(blocks), 2)-1], blocks[min(len(blocks), 16)-1]
}

// remember records that a prompt with blocks went to the replica with key.
func (r *run) remember(blocks []prefix.Hash, key uint64) {
	if r.cfg.Fanout <= 0 || len(blocks) == 0 {
		return
	}
	if len(r.recent) >= maxRecent {
		clear(r.recent)
	}
	short, long := roots(blocks)
	for _, root := range [...]prefix.Hash{short, long} {
		old := r.recent[root]
		next := [recentOwners]uint64{key}
		k := 1
		for _, o := range old {
			if o != 0 && o != key && k < recentOwners {
				next[k] = o
				k++
			}
		}
		r.recent[root] = next
	}
}

// hints appends, for each candidate, whether it recently got the prompt's
// root prefix.
func (r *run) hints(dst []bool, blocks []prefix.Hash) []bool {
	short, long := roots(blocks)
	s, l := r.recent[short], r.recent[long]
	for i := range r.cands {
		c := &r.cands[i]
		h := c.Session
		for k := range recentOwners {
			if s[k] != 0 && s[k] == c.Key || l[k] != 0 && l[k] == c.Key {
				h = true
			}
		}
		dst = append(dst, h)
	}
	return dst
}

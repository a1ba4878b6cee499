package sched

import (
	"math/rand/v2"
	"time"

	"github.com/inferrail/inferrail/model/policy"
	"github.com/inferrail/inferrail/model/prefix"
)

// traffic is a seeded stream of decisions over one fleet whose state
// carries from one to the next: requests arrive and end, conversations come
// back, a few root prefixes are hot, engines report load near kappa, and
// each decision is offered a subset of the replicas (the others full or
// unhealthy), sometimes none.
type traffic struct {
	rng   *rand.Rand
	fleet []policy.Candidate
	live  []int // the fleet position of each request in flight
	roots [][]prefix.Hash
	convs []uint64
	now   time.Time
	// cands are the latest decision's candidates; at maps each to its
	// fleet position.
	cands []policy.Candidate
	at    []int
}

func newTraffic(seed uint64) *traffic {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	t := &traffic{rng: rng, now: time.Unix(1e6, 0)}
	roles := []string{"decode", "prefill", "both", ""}
	for i := range 1 + rng.IntN(12) {
		c := policy.Candidate{Replica: i, Key: rng.Uint64() | 1}
		if r := roles[rng.IntN(len(roles))]; r != "" {
			c.Labels = map[string]string{RoleLabel: r, "zone": []string{"a", "b"}[rng.IntN(2)]}
		}
		t.fleet = append(t.fleet, c)
	}
	for range 3 {
		t.roots = append(t.roots, blocks(rng, 8+rng.IntN(16)))
	}
	for range 24 {
		t.convs = append(t.convs, rng.Uint64()|1)
	}
	return t
}

func blocks(rng *rand.Rand, n int) []prefix.Hash {
	b := make([]prefix.Hash, n)
	for i := range b {
		b[i] = prefix.Hash{Hi: rng.Uint64(), Lo: rng.Uint64()}
	}
	return b
}

// next ends some requests, refreshes what the replicas report, and returns
// the next request and its candidates.
func (t *traffic) next() (*policy.Request, []policy.Candidate) {
	rng := t.rng
	t.now = t.now.Add(time.Duration(rng.IntN(15)) * time.Millisecond)
	for len(t.live) > 0 && rng.IntN(3) == 0 {
		k := rng.IntN(len(t.live))
		t.fleet[t.live[k]].InFlight--
		t.live[k] = t.live[len(t.live)-1]
		t.live = t.live[:len(t.live)-1]
	}
	req := &policy.Request{BlockSize: 16, Now: t.now, Key: rng.Uint64()}
	switch rng.IntN(4) {
	case 0: // unique, maybe shorter than a block
		req.Blocks = blocks(rng, rng.IntN(30))
	default: // a hot root and a unique tail
		req.Blocks = append(append([]prefix.Hash(nil), t.roots[rng.IntN(len(t.roots))]...), blocks(rng, rng.IntN(30))...)
	}
	req.PromptTokens = 16*len(req.Blocks) + rng.IntN(16)
	if rng.IntN(3) > 0 {
		req.SessionKey = t.convs[rng.IntN(len(t.convs))]
	}
	t.cands, t.at = t.cands[:0], t.at[:0]
	all := rng.IntN(3) > 0
	for i := range t.fleet {
		f := &t.fleet[i]
		f.Pending = rng.IntN(f.InFlight + 1)
		f.QueuedPrefill = time.Duration(rng.IntN(4*(f.Pending+1))) * 50 * time.Millisecond
		f.PendingTokens = rng.IntN(2000 * (f.Pending + 1))
		f.Running = f.InFlight - f.Pending
		f.Waiting = rng.IntN(4)
		f.KVUsage, f.Fresh = 0.75+0.25*rng.Float64(), rng.IntN(5) != 0
		f.CachedTokens = 16 * rng.IntN(len(req.Blocks)+1)
		f.Session = rng.IntN(20) == 0
		if all || rng.IntN(4) > 0 {
			t.cands = append(t.cands, *f)
			t.at = append(t.at, i)
		}
	}
	if rng.IntN(50) == 0 {
		t.cands, t.at = t.cands[:0], t.at[:0]
	}
	return req, t.cands
}

// routed records the latest decision's pick, a position in its candidates.
func (t *traffic) routed(k int) {
	i := t.at[k]
	t.fleet[i].InFlight++
	t.live = append(t.live, i)
}

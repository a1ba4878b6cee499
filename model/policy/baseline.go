package policy

import "math/rand/v2"

// The baseline policies: they look only at the gateway's own request counts,
// never at the prompt or the engines' caches. Each Pick is O(len(cands)), does
// not allocate, and draws its randomness from the rng the caller passes
// (the routing actor's source, seeded from routing.seed), so a fixed seed
// replays the same choices.

var (
	_ Policy = (*RoundRobin)(nil)
	_ Policy = (*Random)(nil)
	_ Policy = (*LeastRequest)(nil)
	_ Policy = (*P2C)(nil)
)

// RoundRobin picks the replicas in turn, in the order of their
// Candidate.Replica index: after replica r it picks the candidate with the
// smallest index above r, wrapping around. Replicas missing from one call's
// candidates (full, unhealthy, already tried) are skipped without disturbing
// the rotation of the others. The first call starts at a random candidate,
// so gateways side by side do not all start on the same replica.
//
// A RoundRobin keeps its position: it is owned by one routing actor and is
// not safe for concurrent use.
type RoundRobin struct {
	next    int  // the smallest Replica index preferred next
	started bool // next has been set
}

// Name returns "round_robin".
func (*RoundRobin) Name() string { return "round_robin" }

// Pick returns the next candidate in turn.
func (p *RoundRobin) Pick(_ *Request, cands []Candidate, rng *rand.Rand) (int, error) {
	if len(cands) == 0 {
		return -1, ErrNoCandidate
	}
	if !p.started {
		p.next, p.started = cands[rng.IntN(len(cands))].Replica, true
	}
	best, lowest := -1, 0
	for i := range cands {
		r := cands[i].Replica
		if r >= p.next && (best < 0 || r < cands[best].Replica) {
			best = i
		}
		if r < cands[lowest].Replica {
			lowest = i
		}
	}
	if best < 0 {
		best = lowest // wrap around
	}
	p.next = cands[best].Replica + 1
	return best, nil
}

// Random picks a candidate uniformly at random. It keeps no state and is
// safe for concurrent use (each caller passing its own rng).
type Random struct{}

// Name returns "random".
func (Random) Name() string { return "random" }

// Pick returns a uniformly random candidate.
func (Random) Pick(_ *Request, cands []Candidate, rng *rand.Rand) (int, error) {
	if len(cands) == 0 {
		return -1, ErrNoCandidate
	}
	return rng.IntN(len(cands)), nil
}

// LeastRequest picks the candidate with the fewest requests in flight, ties
// broken uniformly at random. It keeps no state and is safe for concurrent
// use (each caller passing its own rng).
type LeastRequest struct{}

// Name returns "least_request".
func (LeastRequest) Name() string { return "least_request" }

// Pick returns a candidate with the fewest requests in flight.
func (LeastRequest) Pick(_ *Request, cands []Candidate, rng *rand.Rand) (int, error) {
	if len(cands) == 0 {
		return -1, ErrNoCandidate
	}
	best, ties := 0, 1
	for i := 1; i < len(cands); i++ {
		switch n := cands[i].InFlight; {
		case n < cands[best].InFlight:
			best, ties = i, 1
		case n == cands[best].InFlight:
			ties++
		}
	}
	low := cands[best].InFlight
	return PickTie(rng, best, len(cands), ties, func(i int) bool { return cands[i].InFlight == low }), nil
}

// PickTie draws one of ties tied candidates uniformly with one random
// number: the first of them is at first, and tied(i) tells the others
// among first+1..n-1. One draw a decision, where drawing at each tie
// (reservoir sampling) took one per replica when all were idle, an
// eighth of a 256-replica decision. LeastRequest and sched's
// max-score-picker both break ties with it, so that a least_request
// profile decides as the policy does.
func PickTie(rng *rand.Rand, first, n, ties int, tied func(i int) bool) int {
	if ties <= 1 {
		return first
	}
	nth := rng.IntN(ties)
	for i := first + 1; i < n && nth > 0; i++ {
		if tied(i) {
			nth--
			if nth == 0 {
				return i
			}
		}
	}
	return first
}

// P2C is the power of two choices: it draws two distinct candidates at random
// and picks the one with fewer requests in flight, ties broken at random.
// Unlike LeastRequest it never herds onto the single least loaded replica,
// and it never picks a replica that has strictly more requests in flight
// than every other (Mitzenmacher, "The Power of Two Choices in Randomized
// Load Balancing", 2001). It keeps no state and is safe for concurrent use
// (each caller passing its own rng).
type P2C struct{}

// Name returns "p2c".
func (P2C) Name() string { return "p2c" }

// Pick returns the less loaded of two random candidates.
func (P2C) Pick(_ *Request, cands []Candidate, rng *rand.Rand) (int, error) {
	n := len(cands)
	switch n {
	case 0:
		return -1, ErrNoCandidate
	case 1:
		return 0, nil
	}
	i := rng.IntN(n)
	j := rng.IntN(n - 1)
	if j >= i {
		j++ // j is uniform over the others, so i != j
	}
	switch a, b := cands[i].InFlight, cands[j].InFlight; {
	case a < b:
		return i, nil
	case b < a:
		return j, nil
	case rng.IntN(2) == 0:
		return i, nil
	default:
		return j, nil
	}
}

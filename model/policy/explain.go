package policy

import (
	"math/bits"
	"time"

	"github.com/inferrail/inferrail/model/cost"
	"github.com/inferrail/inferrail/model/prefix"
)

// Explainer is a policy that can show its work: what it would pick on the
// same inputs, and why, without routing anything.
//
// The cache-aware policies draw exactly one rng.Uint64() per Pick on a
// non-empty cands and decide from it alone, so Explain(req, cands, draw)
// names the replica that Pick(req, cands, rng) picks when rng's next
// Uint64 is draw and nothing happened in between. Explain changes no state
// (no sketch, no session table): explaining never changes the next choice.
type Explainer interface {
	Policy
	Explain(req *Request, cands []Candidate, draw uint64) (Explanation, error)
}

// Guard names the load guard that set a candidate aside.
type Guard string

// The guards, as in the metric label routing_guards_total{guard}.
const (
	GuardNone        Guard = ""
	GuardBoundedLoad Guard = "bounded_load"
	GuardKVPressure  Guard = "kv_pressure"
)

// Steer names what decided a decision other than the lowest estimate, as
// in routing_steered_total{reason}.
type Steer string

// The steering reasons.
const (
	SteerNone Steer = ""
	// SteerSession: the conversation's last replica, while the guards
	// allowed it.
	SteerSession Steer = "session"
	// SteerHotPrefix: a hot prefix's owner that won only through the credit
	// for a prefix it did not hold yet.
	SteerHotPrefix Steer = "hot_prefix"
	// SteerNoPrefix: prefix_hash's power of two choices for a prompt with
	// no full block.
	SteerNoPrefix Steer = "no_prefix"
	// SteerCold: cost_model's cold-prefix rendezvous, a prompt no candidate
	// holds any of placed on the highest rendezvous weight for its first
	// block among the near-best, where the lowest estimate was another.
	SteerCold Steer = "cold_rendezvous"
)

// Term names the term of the estimate that put the winner furthest ahead
// of the runner-up.
type Term string

// The terms of TTFT = W + P + X.
const (
	TermNone     Term = ""
	TermQueue    Term = "queue"
	TermPrefill  Term = "prefill"
	TermTierLoad Term = "tier_load"
)

// Decision summarizes one decision. It is a value.
type Decision struct {
	// Winner is the position in cands of the chosen replica, -1 if none.
	Winner int
	// Steer says what decided it other than the best score or estimate.
	Steer Steer
	// Term is, for cost_model, the term that put the winner furthest ahead
	// of the runner-up (the best other candidate the guards allowed);
	// TermNone when there is no runner-up or the winner is ahead on none.
	Term Term
	// Cap is cost_model's bounded-load cap for this decision.
	Cap int
	// BoundedLoad and KVPressure count the candidates those guards set
	// aside; KVWaived reports that every candidate within the cap was
	// under KV pressure, so that guard was waived.
	BoundedLoad, KVPressure int
	KVWaived                bool
	// Owners is how many owners the prompt's root prefix has when it is
	// hot (cost_model), else 0.
	Owners int
}

// Explained is what a policy saw of one candidate and made of it. It is a
// value.
type Explained struct {
	// Replica, InFlight, CachedTokens and QueuedPrefill are the candidate's.
	Replica       int
	InFlight      int
	CachedTokens  int
	QueuedPrefill time.Duration
	// PricedTokens is the cached tokens cost_model priced: CachedTokens,
	// or more for a hot prefix's owner credited with the prefix.
	PricedTokens int
	// Owner reports a hot prefix's owner; Session the conversation's last
	// replica.
	Owner, Session bool
	// Estimate is cost_model's estimate; Recompute the price it adds for
	// the prefill the candidate would compute beyond the least
	// (CostModelParams.RecomputeWeight).
	Estimate  cost.Estimate
	Recompute time.Duration
	// MissesSLO reports that cost_model predicts the candidate to miss
	// the request's SLO.
	MissesSLO bool
	// Guard is the guard that set it aside, if any.
	Guard Guard
	// Score is kv_aware's score.
	Score float64
	// Weight is prefix_hash's rendezvous weight for the prompt's prefix.
	Weight uint64
}

// Explanation is a decision with its workings, per candidate in cands'
// order. It is a fresh value the caller owns.
type Explanation struct {
	Policy string
	// Workings names the parts of each Explained the policy filled in
	// beyond the candidate's own fields, for a view to show.
	Workings Workings
	Decision
	Cands []Explained
}

// Workings names parts of Explained that a policy's explanation fills in.
type Workings uint8

// The workings.
const (
	// WorkingsEstimate: Estimate, PricedTokens, Owner and Guard
	// (cost_model).
	WorkingsEstimate Workings = 1 << iota
	// WorkingsScore: Score (kv_aware).
	WorkingsScore
	// WorkingsWeight: Weight (prefix_hash).
	WorkingsWeight
)

// mix is the splitmix64 finalizer, a bijection on uint64.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// candKey is the stable key a candidate is hashed by.
func candKey(c *Candidate) uint64 {
	if c.Key != 0 {
		return c.Key
	}
	return uint64(c.Replica) ^ 0xa0761d6478bd642f
}

// hashKey folds a block hash into 64 bits.
func hashKey(h prefix.Hash) uint64 { return h.Lo ^ mix(h.Hi) }

// hrw is the rendezvous weight of key for prefix root (Thaler and
// Ravishankar, "Using Name-Based Mappings to Increase Hit Rates", 1998):
// each prefix goes to the replica of highest weight, so removing a replica
// moves only its own prefixes. Distinct keys get distinct weights.
func hrw(root, key uint64) uint64 { return mix(root ^ mix(key)) }

// tieRank orders tied candidates by chance: uniform in the draw, fixed for
// a given draw and position.
func tieRank(draw uint64, i int) uint64 { return mix(draw ^ mix(uint64(i)+0x9e3779b97f4a7c15)) }

// index maps x uniformly onto [0, n) (Lemire's multiply-shift).
func index(x uint64, n int) int {
	hi, _ := bits.Mul64(x, uint64(n))
	return int(hi)
}

// blockSize is the request's block size, 16 when unset.
func blockSize(req *Request) int {
	if req.BlockSize > 0 {
		return req.BlockSize
	}
	return 16
}

// p2cDraw is the power of two choices decided by one draw: two distinct
// candidates, the one with fewer in flight, ties by chance.
func p2cDraw(cands []Candidate, draw uint64) int {
	n := len(cands)
	if n == 1 {
		return 0
	}
	x := mix(draw)
	i := index(draw, n)
	j := index(x, n-1)
	if j >= i {
		j++
	}
	switch a, b := cands[i].InFlight, cands[j].InFlight; {
	case a < b:
		return i
	case b < a:
		return j
	case x&1 == 0:
		return i
	default:
		return j
	}
}

// kthLargest returns the k-th largest of x (1 ≤ k ≤ len(x)), reordering x.
// It is a quickselect, expected linear: cost_model needs only the k-th
// rendezvous weight, and sorting 256 of them per decision was a tenth of a
// 256-replica decision.
func kthLargest(x []uint64, k int) uint64 {
	want := len(x) - k // the position it has in ascending order
	lo, hi := 0, len(x)-1
	for lo < hi {
		// Median of three as the pivot, so sorted input stays linear.
		mid := lo + (hi-lo)/2
		a, b, c := x[lo], x[mid], x[hi]
		pivot := max(min(a, b), min(max(a, b), c))
		// Hoare's partition: x[lo..j] ≤ pivot ≤ x[j+1..hi].
		i, j := lo-1, hi+1
		for {
			for i++; x[i] < pivot; i++ {
			}
			for j--; x[j] > pivot; j-- {
			}
			if i >= j {
				break
			}
			x[i], x[j] = x[j], x[i]
		}
		if want <= j {
			hi = j
		} else {
			lo = j + 1
		}
	}
	return x[want]
}

package route

import (
	"time"

	"github.com/inferrail/inferrail/model/cost"
	"github.com/inferrail/inferrail/model/policy"
)

// Shortlist chooses which candidates a routing actor asks for an estimate
// when asking every replica of a large fleet would cost more than the
// decision is worth. It appends to dst the positions in cands of at most k
// candidates: first the hinted ones (hinted[i]: the replica recently got the
// prompt's root prefix, or holds the conversation), then those with the
// lowest estimate for the prompt with nothing cached (their queued prefill
// and running requests as last published), ties to fewer in flight, then
// to the lower position. With k ≤ 0 or no more than k candidates it lists
// them all. The candidates left out are priced without a cache prediction,
// so they can still win on load; what they may lose is a cache hit the
// routing actor did not know of.
//
// hinted may be nil or shorter than cands (the rest are not hinted).
func Shortlist(dst []int, cands []policy.Candidate, hinted []bool, k int, m cost.Model) []int {
	if k <= 0 || len(cands) <= k {
		for i := range cands {
			dst = append(dst, i)
		}
		return dst
	}
	start := len(dst)
	for i := range cands {
		if i < len(hinted) && hinted[i] && len(dst)-start < k {
			dst = append(dst, i)
		}
	}
	// The least loaded of the rest, kept sorted in dst[best:] by insertion;
	// k is small (tens), so this is O(n·k) with no allocation.
	best := len(dst)
	if best-start == k {
		return dst
	}
	load := func(i int) time.Duration { return cands[i].Cost(&m).Queue(cands[i].QueuedPrefill, cands[i].Running) }
	less := func(i, j int) bool {
		li, lj := load(i), load(j)
		if li != lj {
			return li < lj
		}
		if cands[i].InFlight != cands[j].InFlight {
			return cands[i].InFlight < cands[j].InFlight
		}
		return i < j
	}
	for i := range cands {
		if i < len(hinted) && hinted[i] {
			continue
		}
		if len(dst)-start < k {
			dst = append(dst, i)
		} else if less(i, dst[len(dst)-1]) {
			dst[len(dst)-1] = i
		} else {
			continue
		}
		for j := len(dst) - 1; j > best && less(dst[j], dst[j-1]); j-- {
			dst[j], dst[j-1] = dst[j-1], dst[j]
		}
	}
	return dst
}

package route

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/inferrail/inferrail/model/cost"
	"github.com/inferrail/inferrail/model/policy"
	"github.com/inferrail/inferrail/model/prefix"
)

// Config is what a Core decides with. The Core owns Policy and Rand from
// then on: nothing else may use them.
type Config struct {
	// Policy chooses among the candidates.
	Policy policy.Policy
	// Rand is the policy's random source.
	Rand *rand.Rand
	// Cost prices the winner's prefill for its replica's queue, and the
	// candidates' load for the shortlist (routing.cost_model).
	Cost cost.Model
	// Fanout is routing.estimate_fanout: with more candidates than that,
	// only a shortlist is asked for an estimate (Ask); 0 asks all.
	Fanout int
}

// Core is one model's routing core: its policy, and its memory of where
// prompts recently went (the shortlist's hints) and of the assignments its
// replicas had not applied when they last answered (Price). It outlives
// the routing actor's restarts. Owned by one routing actor or simulation
// run; not safe for concurrent use.
type Core struct {
	Config
	// recent maps a root prefix (see roots) to the keys of the replicas
	// this core last sent it to, most recent first: the shortlist's hints.
	recent map[prefix.Hash][recentOwners]uint64
	// unapplied holds, per replica, the assignments this core made that
	// the replica had not applied when it last answered.
	unapplied map[Ledger][]assigned
	hinted    []bool // scratch for Ask
}

// New returns the core for cfg. It panics without a Policy or Rand.
func New(cfg Config) *Core {
	if cfg.Policy == nil || cfg.Rand == nil {
		panic("BUG: route.New: nil Policy or Rand")
	}
	return &Core{Config: cfg, recent: make(map[prefix.Hash][recentOwners]uint64), unapplied: make(map[Ledger][]assigned)}
}

// recentOwners is how many recent replicas are remembered per root prefix,
// and maxRecent how many root prefixes, before the memory starts over.
const (
	recentOwners = 4
	maxRecent    = 1 << 16
)

// maxUnapplied bounds the assignments remembered per replica. A replica
// that applies nothing for that long is stuck, and its published queue is
// what prices it.
const maxUnapplied = 256

// assigned is one assignment the core made that its replica had not
// applied when it last answered.
type assigned struct {
	seq     uint64
	prefill time.Duration
	chain   []prefix.Hash // the assigned prompt's blocks
}

// Ask returns the positions in cands of the candidates to ask for an
// estimate of req, appended to dst: nil when every candidate is to be
// asked (no more candidates than the fanout, or a prompt without blocks).
// For a shortlist (Shortlist) it first sets each candidate's queued
// prefill from its replica's published queue at now, which is what the
// shortlist ranks the unhinted ones by.
func (c *Core) Ask(dst []int, cands []policy.Candidate, views []View, req *policy.Request, now time.Time) []int {
	if c.Fanout <= 0 || len(cands) <= c.Fanout || len(req.Blocks) == 0 {
		return nil
	}
	for i := range cands {
		if l := views[cands[i].Replica].Ledger; l != nil {
			cands[i].QueuedPrefill = l.Queued(now)
		}
	}
	c.hinted = c.hints(c.hinted[:0], cands, req.Blocks)
	return Shortlist(dst, cands, c.hinted, c.Fanout, c.Cost)
}

// roots returns the root prefixes a prompt's blocks are remembered under:
// its first 2 and its first 16 blocks (fewer when it has fewer).
func roots(blocks []prefix.Hash) (short, long prefix.Hash) {
	return blocks[min(len(blocks), 2)-1], blocks[min(len(blocks), 16)-1]
}

// remember records that a prompt with blocks went to the replica with key.
func (c *Core) remember(blocks []prefix.Hash, key uint64) {
	if c.Fanout <= 0 || len(blocks) == 0 {
		return
	}
	if len(c.recent) >= maxRecent {
		clear(c.recent)
	}
	short, long := roots(blocks)
	for _, r := range [...]prefix.Hash{short, long} {
		old := c.recent[r]
		next := [recentOwners]uint64{key}
		k := 1
		for _, o := range old {
			if o != 0 && o != key && k < recentOwners {
				next[k] = o
				k++
			}
		}
		c.recent[r] = next
	}
}

// hints appends, for each candidate, whether it recently got the prompt's
// root prefix or is the conversation's.
func (c *Core) hints(dst []bool, cands []policy.Candidate, blocks []prefix.Hash) []bool {
	short, long := roots(blocks)
	s, l := c.recent[short], c.recent[long]
	for i := range cands {
		cand := &cands[i]
		h := cand.Session
		for k := 0; k < recentOwners && !h; k++ {
			h = s[k] != 0 && s[k] == cand.Key || l[k] != 0 && l[k] == cand.Key
		}
		dst = append(dst, h)
	}
	return dst
}

// Price fills cand's predicted cache and queued prefill for req: from its
// replica's reply when r is not nil, else from the replica's published
// queue (nothing cached); then adds what this core assigned there that the
// replica had not applied yet, so that a burst of decisions between an
// estimate and its assignment does not herd onto the replica that looked
// idle. l is the replica's ledger; a replica without one is left as it is.
func (c *Core) Price(cand *policy.Candidate, l Ledger, req *policy.Request, r *Reply, now time.Time) {
	if l == nil {
		return
	}
	if r != nil {
		r.Fill(cand)
	} else {
		cand.QueuedPrefill = l.Queued(now)
	}
	cand.Unpredicted = r == nil && len(req.Blocks) > 0
	// Most replicas have applied all they were sent: no lookup when no
	// replica has anything outstanding, and no delete of a missing key.
	if len(c.unapplied) == 0 {
		return
	}
	recs, ok := c.unapplied[l]
	if !ok {
		return
	}
	applied := l.Applied()
	if r != nil {
		applied = max(applied, r.Applied)
	}
	k := 0
	for _, x := range recs {
		if x.seq > applied {
			recs[k] = x
			k++
		}
	}
	clear(recs[k:])
	recs = recs[:k]
	if len(recs) == 0 {
		delete(c.unapplied, l)
		return
	}
	c.unapplied[l] = recs
	bs := BlockSize(req)
	limit := 0
	if req.PromptTokens > 0 {
		limit = min(len(req.Blocks), (req.PromptTokens-1)/bs)
	}
	for _, x := range recs {
		cand.QueuedPrefill += x.prefill
		n := commonBlocks(x.chain, req.Blocks[:limit])
		cand.CachedTokens = max(cand.CachedTokens, n*bs)
	}
}

// BlockSize is req's block size: vLLM's default of 16 when unset.
func BlockSize(req *policy.Request) int {
	if req.BlockSize > 0 {
		return req.BlockSize
	}
	return 16
}

// commonBlocks counts the leading blocks two chains share. Chained hashes
// make the first difference final.
func commonBlocks(x, y []prefix.Hash) int {
	n := min(len(x), len(y))
	for i := 0; i < n; i++ {
		if x[i] != y[i] {
			return i
		}
	}
	return n
}

// Choose runs the policy over cands for req and offers its pick to take,
// which reports whether the caller could take the replica (the gateway
// takes a lease on its counters). A pick it could not take is dropped and
// the policy runs again among the rest. It returns the candidates of the
// final run and the position of the pick taken; with none taken, the
// error for a decision among candidates from offered qualifying replicas
// (Unplaced), or the policy's policy.ErrNotAdmitted when it refuses the
// request for its SLO. cands is reordered in place.
//
// This is where the policy is called, with the request's time set by the
// caller (req.Now).
func (c *Core) Choose(req *policy.Request, cands []policy.Candidate, offered int, take func(*policy.Candidate) bool) ([]policy.Candidate, int, error) {
	for first := true; len(cands) > 0; first = false {
		k, err := c.Policy.Pick(req, cands, c.Rand)
		if err != nil && first && errors.Is(err, policy.ErrNoCandidate) {
			// Candidates there were, and the profile's filters kept none.
			return cands, -1, fmt.Errorf("%w: %w", ErrFilteredOut, err)
		}
		if errors.Is(err, policy.ErrNotAdmitted) {
			// No candidate can meet the request's SLO: the policy's
			// refusal is the answer, not a lack of replicas.
			return cands, -1, err
		}
		if err != nil || k < 0 || k >= len(cands) {
			break
		}
		if take(&cands[k]) {
			return cands, k, nil
		}
		last := len(cands) - 1
		cands[k] = cands[last]
		cands = cands[:last]
	}
	return cands, -1, Unplaced(offered)
}

// ranker is a policy that ranks the candidates of its latest pick, best
// first (sched.Scheduler.Ranked).
type ranker interface{ Ranked(dst []int) []int }

// Ranking appends to dst the positions in cands of the candidates ranked
// best first, right after Choose returned cands and k, the pick it took:
// k first, then the rest of the final run's candidates as the policy ranks
// them, when it ranks them. A policy that does not rank yields k alone.
// This is the endpoint picker's ordered fallback list.
func (c *Core) Ranking(dst []int, cands []policy.Candidate, k int) []int {
	start := len(dst)
	if r, ok := c.Policy.(ranker); ok {
		dst = r.Ranked(dst)
		ok = len(dst) > start && dst[start] == k
		for _, i := range dst[start:] {
			ok = ok && i >= 0 && i < len(cands)
		}
		if ok {
			return dst
		}
		dst = dst[:start]
	}
	return append(dst, k)
}

// Assignment is a winner's assignment: its number in the replica's ledger,
// the cost model's estimate for the prompt there, and the cached tokens it
// was predicted to hold.
type Assignment struct {
	Seq          uint64
	Estimate     cost.Estimate
	CachedTokens int
}

// Assign records that req went to the winner w, whose replica's ledger is
// l: it prices the prompt's prefill there (with the replica's own cost
// model when it has one), takes the assignment number,
// and remembers both the prompt's root prefix for the shortlist and the
// assignment until the replica reports it applied (Price). It reports false,
// recording nothing, for a replica without a ledger or a prompt without
// blocks.
func (c *Core) Assign(w *policy.Candidate, l Ledger, req *policy.Request) (Assignment, bool) {
	if l == nil || len(req.Blocks) == 0 {
		return Assignment{}, false
	}
	est := w.Cost(&c.Cost).Estimate(req.PromptTokens, w.CachedTokens, w.QueuedPrefill, w.Running)
	a := Assignment{Seq: l.Next(), Estimate: est, CachedTokens: min(w.CachedTokens, req.PromptTokens)}
	c.remember(req.Blocks, w.Key)
	if recs := c.unapplied[l]; len(recs) < maxUnapplied {
		c.unapplied[l] = append(recs, assigned{seq: a.Seq, prefill: est.Prefill, chain: req.Blocks})
	}
	return a, true
}

// Keep forgets the unapplied assignments of every replica whose ledger is
// not in live: replicas that left the model's set apply nothing.
func (c *Core) Keep(live []Ledger) {
	if len(c.unapplied) == 0 {
		return
	}
	set := make(map[Ledger]bool, len(live))
	for _, l := range live {
		set[l] = true
	}
	for l := range c.unapplied {
		if !set[l] {
			delete(c.unapplied, l)
		}
	}
}

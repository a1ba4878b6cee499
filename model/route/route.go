package route

import (
	"errors"
	"time"

	"github.com/inferrail/inferrail/model/cost"

	"github.com/inferrail/inferrail/model/estimate"
	"github.com/inferrail/inferrail/model/policy"
)

// The routing errors: a decision's outcome when no replica was chosen. They
// are declared here only; the routing actors answer them and the fleet
// returns them as they are, for the front end to map to HTTP.
var (
	// ErrNoReplica: no replica serving the model is healthy, not ejected
	// and not already tried by the request.
	ErrNoReplica = errors.New("routing: no healthy replica")
	// ErrOverloaded: such replicas exist, but every one is at its
	// max_concurrency or max_pending cap.
	ErrOverloaded = errors.New("routing: every replica is full")
	// ErrDeadline: the decision's deadline passed before a replica was
	// chosen.
	ErrDeadline = errors.New("routing: deadline passed")
	// ErrFilteredOut: the scheduling profile's filters set every
	// candidate aside (a label selector no replica matches, say). The
	// error the core returns wraps the profile's, which names the filter.
	ErrFilteredOut = errors.New("routing: the scheduling profile's filters set every replica aside")
)

// View is one replica as a decision sees it, built by the caller from its
// state at the decision: the gateway from the replica's published snapshot,
// the simulator from its engine. A View is a value; the core keeps none.
type View struct {
	// ID is the replica id, which a request's already-tried list names.
	ID string
	// Key is policy.ReplicaKey(ID). Only read for a detailed collection.
	Key uint64
	// Serves reports that the replica serves the model being routed.
	Serves bool
	// Healthy is the active health check's verdict.
	Healthy bool
	// Ejected reports that the replica is passively ejected at the
	// decision's time.
	Ejected bool
	// Room reports that the replica has room under its max_concurrency
	// and max_pending breakers.
	Room bool
	// InFlight and Pending are the gateway's counts of requests routed
	// there, and of those still waiting for a response head.
	InFlight, Pending int
	// Fresh reports that the engine's load report is within load.max_age:
	// Running and KVUsage are then its running requests and KV cache use.
	// Only read for a detailed collection.
	Fresh   bool
	Running int
	KVUsage float64
	// Waiting is the engine's waiting requests while Fresh. Only read for
	// a detailed collection.
	Waiting int
	// Shared reports that the engine serves another router's requests
	// too (policy.Candidate.Shared). Only read for a detailed collection.
	Shared bool
	// PendingTokens is the replica's published count of the tokens to
	// compute of the requests routed there that await their first byte
	// (policy.Candidate.PendingTokens). Only read for a detailed
	// collection.
	PendingTokens int
	// Labels are the replica's configured labels (llm-d.ai/role and the
	// like), read by the label filters. Read only.
	Labels map[string]string
	// Ledger is the replica's published assignment numbers and prefill
	// queue; nil for a replica that keeps none, which is then not priced.
	Ledger Ledger
	// Model is the replica's own cost model, fitted online, or nil
	// (policy.Candidate.Model). Only read for a detailed collection.
	Model *cost.Model
	// Calibrating reports that the replica fits its cost model online
	// (routing.cost_model: auto), with a fit in Model or none yet.
	Calibrating bool
}

// PoolFits prices each calibrating replica that has no fit of its own yet
// with the mean of its fitted peers' (pooled), when any has one; only
// replicas that serve the model count. Priced
// with the configured values instead, a replica still without a fit looks
// as fast as configured next to peers that measured themselves slower, so
// it draws the traffic, and a busy replica has no lone request to measure:
// it stays unfitted while it is overloaded (in the fleet simulator, mix
// on three engines twice as slow as configured: p99 TTFT 1.8 s against
// 1.1 s for a hand calibration). Peers that measured themselves faster
// make the opposite trap: it looks slow, gets nothing, and never measures.
// pooled must outlive the decision; views are changed in place.
func PoolFits(views []View, pooled *cost.Model) {
	n := 0
	var sum cost.Model
	for i := range views {
		if m := views[i].Model; views[i].Serves && views[i].Calibrating && m != nil {
			n++
			sum.PrefillTokenSecs += m.PrefillTokenSecs
			sum.PrefillPairSecs += m.PrefillPairSecs
			sum.PrefillFixedSecs += m.PrefillFixedSecs
			sum.DecodeStepSecs += m.DecodeStepSecs
			sum.DecodeInterferenceSecs = m.DecodeInterferenceSecs
			sum.DecodeTokenSecs = m.DecodeTokenSecs
		}
	}
	if n == 0 || n == len(views) {
		return
	}
	f := float64(n)
	*pooled = cost.Model{PrefillTokenSecs: sum.PrefillTokenSecs / f, PrefillPairSecs: sum.PrefillPairSecs / f,
		PrefillFixedSecs: sum.PrefillFixedSecs / f, DecodeStepSecs: sum.DecodeStepSecs / f,
		DecodeInterferenceSecs: sum.DecodeInterferenceSecs, DecodeTokenSecs: sum.DecodeTokenSecs}
	for i := range views {
		if v := &views[i]; v.Serves && v.Calibrating && v.Model == nil {
			v.Model = pooled
		}
	}
}

// Ledger is what a replica publishes of its assignments and prefill queue
// for the core: *replica.Shadow in the gateway, the simulated replica in
// sim/cluster. Its identity (the interface value) names the replica in the
// core's memory of unapplied assignments.
type Ledger interface {
	// Next takes the replica's next assignment number.
	Next() uint64
	// Applied is the last assignment number the replica applied.
	Applied() uint64
	// Queued is the replica's prefill queue at now, as last published.
	Queued(now time.Time) time.Duration
}

// Reply is one replica's answer to an estimate request: its estimate, with
// the last assignment it had applied when it answered.
type Reply struct {
	estimate.Reply
	Applied uint64
}

// Collect appends to dst the candidates among views: the replicas that
// serve the model, pass their health checks, are not ejected, were not
// tried (exclude lists the ids tried) and have room. Candidate.Replica is
// the replica's position in views. When every healthy replica serving the
// model is ejected, tried or not, which the ejection budget allows only
// when health changed after the ejections, it offers the ejected ones
// instead, so that the pool never empties. It returns the candidates and
// how many replicas qualified before the room check (0 means
// ErrNoReplica, more ErrOverloaded, when no candidate is left).
//
// Every candidate carries its replica's labels. detail adds what the
// cache-aware policies and the scheduling profiles' load plugins read (and
// what prices a decision for the shadow policies): each candidate's key,
// its pending tokens, its running requests (the engine's while its report
// is fresh, else those past their first byte), and its waiting requests
// and KV usage.
func Collect(dst []policy.Candidate, views []View, exclude []string, detail bool) ([]policy.Candidate, int) {
	dst, offered, live := collect(dst, views, exclude, detail, false)
	if live == 0 {
		dst, offered, _ = collect(dst[:0], views, exclude, detail, true)
	}
	return dst, offered
}

// collect appends the qualifying replicas that are ejected (or not, as
// ejected says) to dst[:len(dst)]. It returns how many qualified before the
// room check, and how many serve the model, pass their health checks and
// are not ejected, tried or not.
func collect(dst []policy.Candidate, views []View, exclude []string, detail, ejected bool) (out []policy.Candidate, offered, live int) {
	for i := range views {
		v := &views[i]
		if !v.Healthy || !v.Serves {
			continue
		}
		if !v.Ejected {
			live++
		}
		if v.Ejected != ejected || tried(exclude, v.ID) {
			continue
		}
		offered++
		if !v.Room {
			continue
		}
		// Filled in place: a candidate built apart and appended was
		// copied whole, the collection's largest cost at 256 replicas.
		dst = append(dst, policy.Candidate{})
		candidate(&dst[len(dst)-1], i, v, detail)
	}
	return dst, offered, live
}

// candidate sets c, a zero Candidate, to view v of replica i.
func candidate(c *policy.Candidate, i int, v *View, detail bool) {
	c.Replica, c.InFlight, c.Pending, c.Labels = i, v.InFlight, v.Pending, v.Labels
	if !detail {
		return
	}
	c.Key, c.PendingTokens, c.Shared, c.Model = v.Key, v.PendingTokens, v.Shared, v.Model
	c.Running = max(c.InFlight-c.Pending, 0)
	if v.Fresh {
		c.Running, c.KVUsage, c.Waiting, c.Fresh = v.Running, v.KVUsage, v.Waiting, true
	}
}

func tried(exclude []string, id string) bool {
	for _, x := range exclude {
		if x == id {
			return true
		}
	}
	return false
}

// Unplaced is the error of a decision that chose no replica among
// candidates collected from offered qualifying replicas.
func Unplaced(offered int) error {
	if offered == 0 {
		return ErrNoReplica
	}
	return ErrOverloaded
}

package decisionlog

import (
	"errors"

	"github.com/inferrail/inferrail/actors/routing"
)

// Decision is a routing decision explained, as JSON: what POST
// /admin/explain answers and what each decision log line holds, beside
// what describes the request.
type Decision struct {
	Policy    string    `json:"policy"`
	Winner    *string   `json:"winner"`
	DecidedBy *string   `json:"decided_by"`
	Steer     *string   `json:"steered_by"`
	Cap       int       `json:"bounded_load_cap,omitempty"`
	Owners    int       `json:"hot_prefix_owners,omitempty"`
	KVWaived  bool      `json:"kv_pressure_waived,omitempty"`
	Error     *string   `json:"error"`
	Replicas  []Replica `json:"replicas"`
}

// Replica is one replica of a Decision: whether it was offered and why
// not, its state as the policy saw it, and what the policy made of it.
type Replica struct {
	Replica      string    `json:"replica"`
	Offered      bool      `json:"offered"`
	Reason       *string   `json:"not_offered_because"`
	InFlight     int       `json:"in_flight"`
	Pending      int       `json:"pending"`
	Running      int       `json:"running"`
	KVUsage      *float64  `json:"kv_usage"`
	Answered     bool      `json:"answered_in_time"`
	CachedTokens int       `json:"cached_tokens"`
	PricedTokens int       `json:"priced_cached_tokens"`
	QueuedSecs   float64   `json:"queued_secs"`
	HotOwner     bool      `json:"hot_prefix_owner,omitempty"`
	Session      bool      `json:"session,omitempty"`
	Guard        *string   `json:"guard"`
	Estimate     *Estimate `json:"estimate"`
	KVAwareScore *float64  `json:"score,omitempty"`
	PrefixWeight *uint64   `json:"rendezvous_weight,omitempty"`
}

// Estimate is cost_model's estimated time to first token and its terms.
type Estimate struct {
	Queue   float64 `json:"queue_secs"`
	Prefill float64 `json:"prefill_secs"`
	Tier    float64 `json:"tier_secs"`
	TTFT    float64 `json:"ttft_secs"`
}

func strPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// View turns a routing actor's explanation into its JSON shape.
func View(ex *routing.Explanation) Decision {
	out := Decision{Policy: ex.Policy, Winner: strPtr(ex.Winner), Replicas: make([]Replica, 0, len(ex.Replicas))}
	switch {
	case errors.Is(ex.Err, routing.ErrNoExplain):
		out.Error = strPtr("policy " + ex.Policy + " does not explain its decisions; the replicas are as it would see them")
	case ex.Err != nil:
		out.Error = strPtr(ex.Err.Error())
	default:
		out.DecidedBy, out.Steer = strPtr(string(ex.Decision.Term)), strPtr(string(ex.Decision.Steer))
		out.Cap, out.Owners, out.KVWaived = ex.Decision.Cap, ex.Decision.Owners, ex.Decision.KVWaived
	}
	for _, r := range ex.Replicas {
		v := Replica{Replica: r.ID, Offered: r.Offered, Reason: strPtr(r.Reason), InFlight: r.InFlight, Pending: r.Pending,
			Running: r.Running, Answered: r.Answered, CachedTokens: r.CachedTokens, PricedTokens: r.PricedTokens,
			QueuedSecs: r.QueuedPrefill.Seconds(), HotOwner: r.Owner, Session: r.Session, Guard: strPtr(string(r.Guard))}
		if r.Fresh {
			u := r.KVUsage
			v.KVUsage = &u
		}
		if r.Offered && ex.Err == nil {
			switch ex.Policy {
			case "cost_model":
				e := r.Estimate
				v.Estimate = &Estimate{Queue: e.Queue.Seconds(), Prefill: e.Prefill.Seconds(), Tier: e.Tier.Seconds(), TTFT: e.Total().Seconds()}
			case "kv_aware":
				sc := r.Score
				v.KVAwareScore = &sc
			case "prefix_hash":
				w := r.Weight
				v.PrefixWeight = &w
			}
		}
		out.Replicas = append(out.Replicas, v)
	}
	return out
}

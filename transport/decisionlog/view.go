package decisionlog

import (
	"errors"

	"github.com/inferrail/inferrail/actors/routing"
	"github.com/inferrail/inferrail/model/policy"
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
	// Profiles are the scheduling profiles the decision ran, with each
	// plugin's effect on each replica offered.
	Profiles []Profile `json:"profiles,omitempty"`
}

// Profile is one scheduling profile's run: per replica offered, the filter
// that set it aside, or each scorer's raw and weighted score and the
// total; and the pick.
type Profile struct {
	Profile  string          `json:"profile"`
	Picker   string          `json:"picker"`
	Winner   *string         `json:"winner"`
	Error    *string         `json:"error,omitempty"`
	Replicas []ReplicaPlugin `json:"replicas"`
}

// ReplicaPlugin is what one profile's plugins made of one replica.
type ReplicaPlugin struct {
	Replica  string  `json:"replica"`
	Filter   *string `json:"filtered_by"`
	Scores   []Score `json:"scores,omitempty"`
	Total    float64 `json:"total"`
	Selected bool    `json:"picked"`
}

// Score is one scorer's score of a replica: as the scorer gave it, the
// profile's weight for it, and its part of the total (the score clamped to
// [0, 1] times the weight's share of the profile's weights).
type Score struct {
	Scorer   string  `json:"scorer"`
	Raw      float64 `json:"raw"`
	Weight   float64 `json:"weight"`
	Weighted float64 `json:"weighted"`
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
			if ex.Workings&policy.WorkingsEstimate != 0 {
				e := r.Estimate
				v.Estimate = &Estimate{Queue: e.Queue.Seconds(), Prefill: e.Prefill.Seconds(), Tier: e.Tier.Seconds(), TTFT: e.Total().Seconds()}
			}
			if ex.Workings&policy.WorkingsScore != 0 {
				sc := r.Score
				v.KVAwareScore = &sc
			}
			if ex.Workings&policy.WorkingsWeight != 0 {
				w := r.Weight
				v.PrefixWeight = &w
			}
		}
		out.Replicas = append(out.Replicas, v)
	}
	for _, p := range ex.Profiles {
		pv := Profile{Profile: p.Profile, Picker: p.Picker, Winner: strPtr(p.Winner), Replicas: make([]ReplicaPlugin, 0, len(p.Replicas))}
		if p.Err != nil {
			pv.Error = strPtr(p.Err.Error())
		}
		for _, r := range p.Replicas {
			rv := ReplicaPlugin{Replica: r.ID, Filter: strPtr(r.Filter), Total: r.Total, Selected: r.Picked}
			for _, sc := range r.Scores {
				rv.Scores = append(rv.Scores, Score{Scorer: sc.Scorer, Raw: sc.Raw, Weight: sc.Weight, Weighted: sc.Weighted})
			}
			pv.Replicas = append(pv.Replicas, rv)
		}
		out.Profiles = append(out.Profiles, pv)
	}
	return out
}

package routing

import (
	"strconv"

	"github.com/VictoriaMetrics/metrics"

	"github.com/inferrail/inferrail/model/policy"
)

type actorMetrics struct {
	misses, decisions                   *metrics.Counter
	filteredOut                         *metrics.Counter
	boundedLoad, kvPressure, kvWaived   *metrics.Counter
	steerSession, steerHot, steerPrefix *metrics.Counter
	steerCold                           *metrics.Counter
}

func newActorMetrics(set *metrics.Set, model, pol string) *actorMetrics {
	c := func(name, labels string) *metrics.Counter {
		return set.GetOrCreateCounter(name + `{model="` + model + `"` + labels + `}`)
	}
	return &actorMetrics{
		misses:       c("inferrail_estimate_deadline_misses_total", ""),
		decisions:    c("inferrail_estimate_gathers_total", ""),
		filteredOut:  c("inferrail_routing_filtered_out_total", `,policy=`+strconv.Quote(pol)),
		boundedLoad:  c("inferrail_routing_guards_total", `,guard="bounded_load"`),
		kvPressure:   c("inferrail_routing_guards_total", `,guard="kv_pressure"`),
		kvWaived:     c("inferrail_routing_guards_total", `,guard="kv_waived"`),
		steerSession: c("inferrail_routing_steered_total", `,reason="session"`),
		steerHot:     c("inferrail_routing_steered_total", `,reason="hot_prefix"`),
		steerPrefix:  c("inferrail_routing_steered_total", `,reason="no_prefix"`),
		steerCold:    c("inferrail_routing_steered_total", `,reason="`+string(policy.SteerCold)+`"`),
	}
}

// summarizer is a policy that summarizes its latest decision:
// policy.CostModel, and a scheduling profile (its cost_model plugins' part).
type summarizer interface{ Last() policy.Decision }

// count records the cost model's guards and steering for the decision just
// made.
func (a *routingActor) count() {
	m := a.st.m
	if p, ok := a.st.Policy.(summarizer); ok {
		d := p.Last()
		if d.BoundedLoad > 0 {
			m.boundedLoad.Inc()
		}
		if d.KVPressure > 0 {
			m.kvPressure.Inc()
		}
		if d.KVWaived {
			m.kvWaived.Inc()
		}
		switch d.Steer {
		case policy.SteerSession:
			m.steerSession.Inc()
		case policy.SteerHotPrefix:
			m.steerHot.Inc()
		case policy.SteerCold:
			m.steerCold.Inc()
		}
	}
}

package fleet

import (
	"time"

	"github.com/inferrail/inferrail/config"
	"github.com/inferrail/inferrail/model/cost"
)

// costModel is a model's configured cost model (routing.cost_model, or
// the model's own), without its auto switch.
func costModel(c config.CostModel) cost.Model {
	return cost.Model{PrefillTokenSecs: c.PrefillTokenSecs, PrefillPairSecs: c.PrefillPairSecs,
		PrefillFixedSecs: c.PrefillFixedSecs, DecodeInterferenceSecs: c.DecodeInterferenceSecs,
		DecodeTokenSecs: c.DecodeTokenSecs}
}

// calibrate sets each member's online calibration (replica.Shadow.
// SetCalibration): the configured cost model of the first model it serves
// whose cost model is auto, or none, which turns its calibration off and
// prices it with the configured values again.
func (st *state) calibrate(v *view) {
	auto := make(map[string]*cost.Model)
	for _, ms := range st.models {
		if ms.auto && auto[ms.name] == nil {
			m := ms.costModel
			auto[ms.name] = &m
		}
	}
	for _, m := range v.order {
		var start *cost.Model
		for _, name := range m.h.Snapshot().Models {
			if start = auto[name]; start != nil {
				break
			}
		}
		m.h.Shadow().SetCalibration(start)
	}
}

// ReportCached gives the replica the cached tokens its engine reported in
// the attempt's usage (prompt_tokens_details.cached_tokens), before Done:
// they confirm the attempt's cache prediction, and with it its prefill's
// sample for the replica's online fit. Call it from the goroutine that
// calls Done.
func (d Decision) ReportCached(tokens int) {
	if d.attempt != nil && tokens >= 0 {
		d.attempt.EngineCached = tokens + 1
	}
}

// ReportFirstToken gives the replica the time the first event of the
// attempt's streamed response arrived, before Done: its time to first
// token, which the replica's online fit measures prefills by. A response
// not streamed has none (its head comes after its last token). Call it
// from the goroutine that calls Done.
func (d Decision) ReportFirstToken(at time.Time) {
	if d.attempt != nil {
		d.attempt.FirstToken = at
	}
}

package cluster

import (
	"time"

	"github.com/inferrail/inferrail/model/cost"
	"github.com/inferrail/inferrail/model/estimate"
	"github.com/inferrail/inferrail/sim/engine"
)

// FitEvery is how many requests routed to a replica go between the points
// of its fit's trace (Result.Fits).
const FitEvery = 10

// FitPoint is a replica's online fit after Requests requests were routed
// there, at virtual time At: the model in effect and its state.
type FitPoint struct {
	Requests int
	At       time.Duration
	Model    cost.Model
	Stats    cost.OnlineStats
}

// engine returns replica i's engine config: Engine, with its latency model
// from EngineOverrides when it has one.
func (c *Config) engine(i int) engine.Config {
	e := c.Engine
	if l, ok := c.EngineOverrides[i]; ok {
		e.Latency = l
	}
	return e
}

// calibrate feeds the fit of the shadow that routed f, at its first byte
// now, as the gateway's replica actor does: the prediction held when the
// instance follows the engine's events, else when the engine's cached
// tokens agree with it.
func (r *run) calibrate(f *inflight, rec *Record, now time.Time) {
	sh := f.sh
	if sh.est.Fit == nil || !f.assigned {
		return
	}
	exact := r.cfg.KVEvents || estimate.Agrees(rec.PredictedTokens, rec.CachedTokens, r.bs)
	if _, ok := sh.est.Calibrate(f.timing, exact, now); ok {
		sh.model, sh.fitted = sh.est.Fit.InEffect()
	}
}

// trace adds the fit in effect at now to the trace, after sh.routed
// requests.
func (sh *shadow) trace(now time.Time) {
	sh.fits = append(sh.fits, FitPoint{Requests: sh.routed, At: now.Sub(epoch), Model: sh.est.Fit.Model(), Stats: sh.est.Fit.Stats()})
}

// changeSpeed applies a speed change: the engine's prefill parameters are
// multiplied by its factor.
func (r *run) changeSpeed(s SpeedChange) {
	e := r.reps[s.Replica].eng
	l := r.cfg.engine(s.Replica).Latency
	for _, done := range r.speeds[:r.speed] {
		if done.Replica == s.Replica {
			l = scaleLatency(l, done.Factor)
		}
	}
	e.SetLatency(scaleLatency(l, s.Factor))
}

// scaleLatency multiplies l's prefill parameters by f.
func scaleLatency(l engine.Latency, f float64) engine.Latency {
	l.PrefillToken = time.Duration(float64(l.PrefillToken) * f)
	l.PrefillPair *= f
	l.PrefillFixed = time.Duration(float64(l.PrefillFixed) * f)
	return l
}

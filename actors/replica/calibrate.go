package replica

import (
	"fmt"
	"time"

	"github.com/inferrail/inferrail/model/cost"
	"github.com/inferrail/inferrail/model/estimate"
)

// Online calibration (routing.cost_model: auto, issue 30). The fleet sets
// a replica's configured starting point on its Shadow (SetCalibration) for
// as long as one of the models it serves has auto on; the actor takes it
// up at its next assignment or scrape, keeps the fit (estimate.Replica.Fit)
// and publishes it (Shadow.Fit), and the routing actors of those models
// price the replica with it. A replica serving
// several models (adapters of one base model, one engine) fits once, from
// the configured values of the first of them with auto on.

// Fit is a replica's online calibration as its actor last published it.
// Immutable once published.
type Fit struct {
	// Model is the model in effect (cost.Online.InEffect): the configured
	// values until the fit has enough spread, or while it is poor.
	Model cost.Model
	// Configured are the values it started from.
	Configured cost.Model
	// Stats are the fit's counts, age and error.
	Stats cost.OnlineStats
	// Fitted reports that Model is the fit rather than the configured
	// values.
	Fitted bool
}

// calibNoSpread is how many accepted samples without a fit raise
// WarnFitNoSpread. A poor fit (cost.OnlineStats.Poor) raises WarnFitPoor.
const calibNoSpread = 4 * cost.OnlineWindow

// SetCalibration sets the configured cost model a replica's online fit
// starts from, or nil to turn its calibration off (the configured values
// price it again). m is the shadow's from then on. Safe for concurrent use:
// the fleet sets it as configs apply, and the actor picks it up at its next
// assignment.
func (s *Shadow) SetCalibration(m *cost.Model) {
	if old := s.calib.Load(); old == nil && m == nil || old != nil && m != nil && *old == *m {
		return
	}
	s.calib.Store(m)
}

// Fit returns the replica's published calibration, nil while it has none
// (or s is nil).
func (s *Shadow) Fit() *Fit {
	if s == nil {
		return nil
	}
	return s.fit.Load()
}

// Priced returns the cost model a calibrated replica is priced with: its
// fit's, nil while the configured values price it.
func (f *Fit) Priced() *cost.Model {
	if f == nil || !f.Fitted {
		return nil
	}
	return &f.Model
}

// syncCalibration takes up the calibration the fleet set: a new starting
// point restarts the fit, nil drops it; a change of the decode interference
// alone keeps it.
func (a *replicaActor) syncCalibration() {
	want := a.shadow.calib.Load()
	if want == a.calibFrom {
		return
	}
	a.calibFrom = want
	switch {
	case want == nil:
		a.est.Fit = nil
		a.shadow.fit.Store(nil)
		a.warnings.Clear(a.log, WarnFitNoSpread)
		a.warnings.Clear(a.log, WarnFitPoor)
		return
	case a.est.Fit != nil && samePrefill(a.est.Fit.Prior(), *want):
		a.est.Fit.SetDecodeInterference(want.DecodeInterferenceSecs)
		a.est.Fit.SetDecodeToken(want.DecodeTokenSecs)
	default:
		a.est.Fit = cost.NewOnline(*want)
		a.warnings.Clear(a.log, WarnFitNoSpread)
		a.warnings.Clear(a.log, WarnFitPoor)
	}
	a.publishFit()
}

// samePrefill reports whether x and y have the same a, b and d.
func samePrefill(x, y cost.Model) bool {
	return x.PrefillTokenSecs == y.PrefillTokenSecs && x.PrefillPairSecs == y.PrefillPairSecs &&
		x.PrefillFixedSecs == y.PrefillFixedSecs
}

// timeAttempt starts measuring an attempt just added to the queue, when
// the replica calibrates.
func (a *replicaActor) timeAttempt(at *Attempt, now time.Time) {
	a.syncCalibration()
	if a.est.Fit == nil || at.Price != nil {
		// A decision made without an estimate has no prediction of its
		// own to check the sample's c against.
		return
	}
	at.timing = a.est.Time(at.Tokens, at.Cached, at.Running, now)
	at.exactAtAssign = a.mode == IndexExact
}

// settleSample feeds the fit the prefill of an attempt that ended well,
// from its first streamed token, when its cache prediction held: the index
// followed the engine's events at its assignment, or the engine's cached
// tokens agree with it.
func (a *replicaActor) settleSample(at *Attempt) {
	if at == nil || a.est.Fit == nil || at.timing.At.IsZero() || at.FirstToken.IsZero() {
		return
	}
	exact := at.exactAtAssign || at.EngineCached > 0 && estimate.Agrees(at.Cached, at.EngineCached-1, at.BlockSize)
	if _, ok := a.est.Calibrate(at.timing, exact, at.FirstToken); ok {
		a.publishFit()
	}
}

// publishFit publishes the fit in effect, and raises or clears the
// calibration warnings.
func (a *replicaActor) publishFit() {
	o := a.est.Fit
	if o == nil {
		return
	}
	st := o.Stats()
	now := a.cfg.Now()
	m, fitted := o.InEffect()
	f := &Fit{Model: m, Configured: o.Prior(), Stats: st, Fitted: fitted}
	if !st.Fitted && st.Samples >= calibNoSpread {
		a.warnings.RaiseNew(a.log, now, WarnFitNoSpread, fmt.Sprintf("cost_model auto: %d prefills measured and none "+
			"varied enough in computed and cached tokens to fit a, b and d; the configured values price the replica", st.Samples),
			"replica", a.id)
	} else if st.Fitted {
		a.warnings.Clear(a.log, WarnFitNoSpread)
	}
	if st.Poor {
		a.warnings.RaiseNew(a.log, now, WarnFitPoor, fmt.Sprintf("cost_model auto: the fitted prefill explains the "+
			"replica's measured prefills with a relative error of %.0f%% (above %.0f%%): the prefill times vary for "+
			"reasons the model does not price (other clients of the engine, preemptions); the configured values "+
			"price the replica", 100*st.RelError, 100*cost.PoorError), "replica", a.id)
	} else {
		a.warnings.Clear(a.log, WarnFitPoor)
	}
	a.shadow.fit.Store(f)
}

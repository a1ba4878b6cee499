package admin

import (
	"github.com/valyala/fasthttp"

	"github.com/inferrail/inferrail/model/shadow"
)

// Trials is what /admin/shadow reads: *fleet.Fleet.
type Trials interface {
	Trials() []shadow.Report
}

// WithTrials turns on GET /admin/shadow; call it before Serve.
func (s *Server) WithTrials(src Trials) *Server {
	s.trials = src
	return s
}

// shadowsView is the answer of /admin/shadow: every model with shadow
// policies, and what the numbers are worth.
type shadowsView struct {
	Caveat string            `json:"caveat"`
	Models []shadowModelView `json:"models"`
}

type shadowModelView struct {
	Model string `json:"model"`
	// Dropped counts decisions left out of the shadow because its worker
	// was behind.
	Dropped uint64             `json:"dropped"`
	Shadows []shadowPolicyView `json:"shadows"`
}

type shadowPolicyView struct {
	Policy    string  `json:"policy"`
	Decisions int64   `json:"decisions"`
	Agreement float64 `json:"agreement"`
	Faster    float64 `json:"faster"`
	Slower    float64 `json:"slower"`
	// MeanGain is the mean of the routing pick's estimated time to first
	// token less the shadow pick's: positive when the shadow's picks are
	// priced sooner.
	MeanGain float64 `json:"mean_estimated_gain_seconds"`
}

// trial answers GET /admin/shadow: per model, each shadow policy's
// decisions, its agreement with the routing policy, the shares of its picks
// priced faster and slower, and the mean estimated gain. A gateway without
// shadow policies answers an empty list.
func (s *Server) trial(ctx *fasthttp.RequestCtx) {
	out := shadowsView{Caveat: shadow.Caveat, Models: []shadowModelView{}}
	for _, r := range s.trials.Trials() {
		mv := shadowModelView{Model: r.Model, Dropped: r.Dropped, Shadows: make([]shadowPolicyView, 0, len(r.Shadows))}
		for _, p := range r.Shadows {
			mv.Shadows = append(mv.Shadows, shadowPolicyView{Policy: p.Policy, Decisions: p.Decisions, Agreement: p.Agreement,
				Faster: p.Faster, Slower: p.Slower, MeanGain: p.MeanGain.Seconds()})
		}
		out.Models = append(out.Models, mv)
	}
	writeJSON(ctx, out)
}

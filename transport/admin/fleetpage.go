package admin

import (
	_ "embed"
	"sort"

	"github.com/valyala/fasthttp"

	"github.com/inferrail/inferrail/config"
	"github.com/inferrail/inferrail/model/flow"
	"github.com/inferrail/inferrail/transport/decisionlog"
)

// fleetPage is GET /admin/: the fleet page, plain HTML and JavaScript
// that loads nothing from outside and reads the admin API the page is
// served beside (/admin/replicas, /admin/index, /admin/models,
// /admin/decisions, POST /admin/explain).
//
//go:embed fleet.html
var fleetPage []byte

// Current is the config in effect and its generation, for GET
// /admin/models: the reloader (Configs), or the config the gateway started
// with when there is no file to reload.
type Current interface {
	Current() (*config.Config, uint64)
}

// Decisions keeps the last sampled routing decisions, for GET
// /admin/decisions: *decisionlog.Writer.
type Decisions interface {
	Recent() []decisionlog.Record
}

// WithModels turns on GET /admin/models; call it before Serve.
func (s *Server) WithModels(c Current) *Server {
	s.current = c
	return s
}

// WithDecisions turns on GET /admin/decisions; call it before Serve.
func (s *Server) WithDecisions(d Decisions) *Server {
	s.decisions = d
	return s
}

// modelView is one model on /admin/models: how it is routed.
type modelView struct {
	Name    string   `json:"name"`
	Aliases []string `json:"aliases"`
	// Split is each arm of its traffic, one at 100 without an A/B split;
	// an arm is a policy or a scheduling profile (profile true).
	Split []armView `json:"split"`
	// Shadows are the policies that pick for every request without routing.
	Shadows   []string `json:"shadows"`
	Tokenizer string   `json:"tokenizer"`
	BlockSize int      `json:"block_size"`
	SLO       sloView  `json:"slo"`
}

// sloView is a model's latency objective: its default (models[].slo),
// and how the requests that carried one ended since the gateway started
// (inferrail_slo_requests_total).
type sloView struct {
	// DefaultTTFT and DefaultTPOT are the default, in seconds; 0 for none.
	DefaultTTFT float64 `json:"default_ttft_secs"`
	DefaultTPOT float64 `json:"default_tpot_secs"`
	// Results counts the requests by result (flow.SLOResults), Requests
	// all of them.
	Results  map[string]uint64 `json:"results"`
	Requests uint64            `json:"requests"`
	// Attainment is the share of Requests that met their objective; null
	// when none was counted.
	Attainment *float64 `json:"attainment"`
}

// slo is model m's sloView.
func (s *Server) slo(m *config.Model) sloView {
	v := sloView{DefaultTTFT: m.SLO.TTFT.Seconds(), DefaultTPOT: m.SLO.TPOT.Seconds(), Results: map[string]uint64{}}
	if s.met == nil {
		return v
	}
	n := s.met.Model(m.Name).SLOCounts()
	for i, res := range flow.SLOResults {
		v.Results[res] = n[i]
		v.Requests += n[i]
	}
	if v.Requests > 0 {
		a := float64(v.Results[flow.SLOMet]) / float64(v.Requests)
		v.Attainment = &a
	}
	return v
}

type armView struct {
	Policy  string `json:"policy"`
	Percent int    `json:"percent"`
	Profile bool   `json:"profile"`
}

func (s *Server) models(ctx *fasthttp.RequestCtx) {
	c, gen := s.current.Current()
	out := struct {
		Generation uint64      `json:"generation"`
		Models     []modelView `json:"models"`
	}{Generation: gen, Models: []modelView{}}
	for i := range c.Models {
		m := &c.Models[i]
		r := c.RoutingFor(m)
		v := modelView{Name: m.Name, Aliases: append([]string{}, m.Aliases...), Shadows: r.Shadow,
			Tokenizer: m.Tokenizer, BlockSize: m.BlockSize, SLO: s.slo(m)}
		for pol, pct := range r.Split {
			p, _ := c.Profile(m, pol)
			v.Split = append(v.Split, armView{Policy: pol, Percent: pct, Profile: p != nil})
		}
		sort.Slice(v.Split, func(i, j int) bool {
			if v.Split[i].Percent != v.Split[j].Percent {
				return v.Split[i].Percent > v.Split[j].Percent
			}
			return v.Split[i].Policy < v.Split[j].Policy
		})
		out.Models = append(out.Models, v)
	}
	writeJSON(ctx, out)
}

func (s *Server) recentDecisions(ctx *fasthttp.RequestCtx) {
	d := s.decisions.Recent()
	if d == nil {
		d = []decisionlog.Record{}
	}
	writeJSON(ctx, struct {
		Decisions []decisionlog.Record `json:"decisions"`
	}{d})
}

// isPage reports a GET or HEAD of the fleet page, which needs no admin
// token (the API it reads does).
func isPage(ctx *fasthttp.RequestCtx) bool {
	p, m := string(ctx.Path()), string(ctx.Method())
	return (p == "/admin/" || p == "/admin") && (m == "GET" || m == "HEAD")
}

func (s *Server) page(ctx *fasthttp.RequestCtx) {
	ctx.SetContentType("text/html; charset=utf-8")
	// Nothing from elsewhere: scripts and styles are inline, requests go
	// to this origin only.
	ctx.Response.Header.Set("Content-Security-Policy",
		"default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src 'self' data:")
	ctx.Response.Header.Set("Cache-Control", "no-store")
	ctx.SetBody(fleetPage)
}

// Package admin serves the gateway's admin port: GET /metrics for
// Prometheus and VictoriaMetrics, GET /admin/replicas (with the discovery
// sources, WithSources), GET /admin/index
// (each replica's KV index and event stream), GET /admin/index/snapshot
// (the indexes themselves, for a peer's warm start; WithIndexSnapshot) and GET /admin/shadow (each
// shadow policy against the routing policy) for operators, and
// GET /admin/ (the fleet page, built in: each replica, each model's
// routing, the last sampled decisions and an explain box), GET
// /admin/models and GET /admin/decisions (the last sampled decisions), and
// POST /admin/explain/v1/chat/completions (or /v1/completions), which
// answers what the routing policy would do with a request, routing nothing
// (?policy=NAME: what that arm of an A/B split would do). With a live
// config (WithConfig): GET /admin/config, PATCH /admin/config (a JSON
// merge patch of the config in effect) and POST /admin/reload.
// With WithAuth every route needs the admin token or a client certificate
// (auth.admin); without, keep server.admin_listen on localhost or a private
// network. GET /admin/config shows secrets redacted.
//
// A Server owns its fasthttp server; Serve and Shutdown are its lifecycle.
package admin

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"sort"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/inferrail/inferrail/actors/fleet"
	"github.com/inferrail/inferrail/actors/replica"
	"github.com/inferrail/inferrail/config"
	"github.com/inferrail/inferrail/transport/auth"
	"github.com/inferrail/inferrail/transport/telemetry"
)

// Fleet is what the admin port reads.
type Fleet interface {
	Replicas() []*replica.Snapshot
}

// Sources is what /admin/replicas shows of the discovery sources
// (*fleet.Fleet).
type Sources interface {
	Sources() []fleet.Source
}

// WithSources adds the discovery sources to /admin/replicas; call it
// before Serve.
func (s *Server) WithSources(src Sources) *Server {
	s.sources = src
	return s
}

// Configs is the gateway's live config, for GET and PATCH /admin/config
// and POST /admin/reload.
type Configs interface {
	// Current returns the config in effect and its generation.
	Current() (*config.Config, uint64)
	// Reload rereads the config file and applies it.
	Reload() Reload
	// Patch applies a JSON merge patch to the config in effect. The patch
	// is decoded JSON, numbers as json.Number, and is Patch's once passed.
	Patch(patch map[string]any) Reload
}

// Reload is the outcome of one reload attempt, as POST /admin/reload
// answers it.
type Reload struct {
	// Result is applied, unchanged or rejected.
	Result string `json:"result"`
	// Generation names the config in effect afterwards.
	Generation uint64 `json:"generation"`
	// Changed names the sections that differ from the config in effect.
	Changed []string `json:"changed,omitempty"`
	// Error says why the reload was rejected.
	Error string `json:"error,omitempty"`
	// Patched is set while the config in effect is the file's with
	// PATCH /admin/config applied; the file's next edit replaces it.
	Patched bool `json:"patched,omitempty"`
}

// WithConfig turns on GET and PATCH /admin/config and POST /admin/reload;
// call it before Serve.
func (s *Server) WithConfig(c Configs) *Server {
	s.configs = c
	return s
}

// Server is the admin HTTP server.
type Server struct {
	configs   Configs
	sources   Sources
	current   Current
	decisions Decisions
	fleet     Fleet
	indexes   Indexes
	met       *telemetry.Registry
	ex        *ExplainOptions
	trials    Trials
	auth      *auth.Guard
	srv       *fasthttp.Server
}

// WithExplain turns on /admin/explain; call it before Serve.
func (s *Server) WithExplain(o ExplainOptions) *Server {
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	s.ex = &o
	s.srv.ReadTimeout = o.Timeout
	if o.MaxBody > 0 {
		s.srv.MaxRequestBodySize = o.MaxBody
	}
	return s
}

// New returns an admin server for fleet and its metrics.
func New(fleet Fleet, met *telemetry.Registry) *Server {
	s := &Server{fleet: fleet, met: met}
	s.srv = &fasthttp.Server{
		Handler:     s.handle,
		Name:        "inferrail-admin",
		ReadTimeout: 10 * time.Second,
		IdleTimeout: time.Minute,
		Logger:      quiet{},
	}
	return s
}

type quiet struct{}

func (quiet) Printf(string, ...any) {}

// Serve serves ln until Shutdown.
func (s *Server) Serve(ln net.Listener) error {
	if err := s.srv.Serve(ln); err != nil && !errors.Is(err, net.ErrClosed) {
		return err
	}
	return nil
}

// Shutdown stops the server, waiting for requests in flight until ctx ends.
func (s *Server) Shutdown(ctx context.Context) error { return s.srv.ShutdownWithContext(ctx) }

func (s *Server) handle(ctx *fasthttp.RequestCtx) {
	if isPage(ctx) {
		// The fleet page holds no data, only the script that reads the
		// admin API with the token the user gives it, so a browser, which
		// cannot send a bearer token with a page load, can open it.
		s.page(ctx)
		return
	}
	if !s.authorize(ctx) {
		return
	}
	if p := string(ctx.Path()); strings.HasPrefix(p, explainPrefix+"/") {
		s.explain(ctx, p[len(explainPrefix):])
		return
	}
	if string(ctx.Path()) == "/admin/reload" && s.configs != nil {
		s.reload(ctx)
		return
	}
	if string(ctx.Path()) == "/admin/config" && string(ctx.Method()) == "PATCH" && s.configs != nil {
		s.patch(ctx)
		return
	}
	if m := string(ctx.Method()); m != "GET" && m != "HEAD" {
		// After ctx.Error, which resets the response headers.
		ctx.Error(`{"error":{"message":"Method Not Allowed","type":"Method Not Allowed","param":null,"code":405}}`, fasthttp.StatusMethodNotAllowed)
		ctx.SetContentType("application/json")
		if string(ctx.Path()) == "/admin/config" && s.configs != nil {
			ctx.Response.Header.Set("Allow", "GET, HEAD, PATCH")
		} else {
			ctx.Response.Header.Set("Allow", "GET, HEAD")
		}
		return
	}
	switch string(ctx.Path()) {
	case "/metrics":
		ctx.SetContentType("text/plain; version=0.0.4; charset=utf-8")
		s.met.WritePrometheus(ctx)
	case "/admin/replicas":
		s.replicas(ctx)
	case "/admin/models":
		if s.current == nil {
			s.notFound(ctx)
			return
		}
		s.models(ctx)
	case "/admin/decisions":
		if s.decisions == nil {
			s.notFound(ctx)
			return
		}
		s.recentDecisions(ctx)
	case "/admin/index":
		s.index(ctx)
	case SnapshotPath:
		if s.indexes == nil {
			s.notFound(ctx)
			return
		}
		s.snapshot(ctx)
	case "/admin/config":
		if s.configs == nil {
			s.notFound(ctx)
			return
		}
		c, gen := s.configs.Current()
		m, err := c.Redacted()
		if err != nil {
			writeErr(ctx, fasthttp.StatusInternalServerError, "InternalServerError", err.Error())
			return
		}
		writeJSON(ctx, map[string]any{"generation": gen, "config": m})
	case "/admin/shadow":
		if s.trials == nil {
			s.notFound(ctx)
			return
		}
		s.trial(ctx)
	default:
		s.notFound(ctx)
	}
}

// reload answers POST /admin/reload: 200 with the outcome when the config
// was applied or unchanged, 422 when it was rejected.
func (s *Server) reload(ctx *fasthttp.RequestCtx) {
	if string(ctx.Method()) != "POST" {
		ctx.Response.Header.Set("Allow", "POST")
		writeErr(ctx, fasthttp.StatusMethodNotAllowed, "Method Not Allowed", "Method Not Allowed")
		return
	}
	r := s.configs.Reload()
	writeJSON(ctx, r)
	if r.Result == "rejected" {
		ctx.SetStatusCode(fasthttp.StatusUnprocessableEntity)
	}
}

func (s *Server) notFound(ctx *fasthttp.RequestCtx) {
	ctx.Error(`{"error":{"message":"Not Found","type":"Not Found","param":null,"code":404}}`, fasthttp.StatusNotFound)
	ctx.SetContentType("application/json")
}

// replicaView is one replica on /admin/replicas.
type replicaView struct {
	ID           string     `json:"id"`
	URL          string     `json:"url"`
	Models       []string   `json:"models"`
	Healthy      bool       `json:"healthy"`
	Ejected      bool       `json:"ejected"`
	EjectedUntil *time.Time `json:"ejected_until"`
	Ejections    int        `json:"ejections"`
	InFlight     int        `json:"in_flight"`
	Pending      int        `json:"pending"`
	Restarts     int        `json:"restarts"`
	// Engine is the engine's last /metrics report, with its age; null
	// before the first readable scrape.
	Engine *engineView `json:"engine"`
	// PromptTokensChecked counts the responses whose usage.prompt_tokens
	// was compared with the gateway tokenizer's count of the same prompt;
	// PromptTokensAgreement is the share of them that agreed, null before
	// the first (inferrail_prompt_tokens_checked_total and
	// inferrail_prompt_tokens_mismatch_total, summed over models).
	PromptTokensChecked   uint64   `json:"prompt_tokens_checked"`
	PromptTokensAgreement *float64 `json:"prompt_tokens_agreement"`
	// Warnings are the ways routing on the replica does not work as
	// configured, each with the likely cause; empty when there are none.
	Warnings []replica.Warning `json:"warnings"`
	// IndexMode is how its cache prediction is fed: exact while it follows
	// its engine's KV events in step, else approximate (GET /admin/index).
	IndexMode replica.IndexMode `json:"index_mode"`
	// Prediction is how its cache predictions compared with the cached
	// tokens its engine reported (inferrail_prediction_total).
	Prediction predictionView `json:"prediction"`
	// CostModel is the prefill model in effect on the replica
	// (routing.cost_model: auto).
	CostModel costModelView `json:"cost_model"`
}

// costModelView is a replica's cost model: whether it calibrates online
// (a model it serves has routing.cost_model: auto), whether its own fit
// ("auto") or the configured values ("configured") price it, and, while it
// calibrates, the a, b and d in effect (and the decode step the fit
// prices apart, cost.Model.DecodeStepSecs) with the fit's age (samples since
// it last changed by 5% or more), relative RMS error over its window,
// samples and dropped outliers.
type costModelView struct {
	Calibrating      bool     `json:"calibrating"`
	InEffect         string   `json:"in_effect"`
	PrefillTokenSecs *float64 `json:"prefill_token_secs,omitempty"`
	PrefillPairSecs  *float64 `json:"prefill_pair_secs,omitempty"`
	PrefillFixedSecs *float64 `json:"prefill_fixed_secs,omitempty"`
	DecodeStepSecs   *float64 `json:"decode_step_secs,omitempty"`
	AgeSamples       int      `json:"age_samples"`
	RelError         *float64 `json:"rel_error"`
	Samples          int      `json:"samples"`
	Outliers         int      `json:"outliers"`
}

// costModelOf is r's costModelView.
func costModelOf(r *replica.Snapshot) costModelView {
	v := costModelView{InEffect: "configured"}
	var f *replica.Fit
	if r.Shadow != nil {
		f = r.Shadow.Fit()
	}
	if f == nil {
		return v
	}
	m, st := f.Model, f.Stats
	v.Calibrating = true
	if f.Fitted {
		v.InEffect = "auto"
	}
	v.PrefillTokenSecs, v.PrefillPairSecs, v.PrefillFixedSecs = &m.PrefillTokenSecs, &m.PrefillPairSecs, &m.PrefillFixedSecs
	v.DecodeStepSecs = &m.DecodeStepSecs
	v.AgeSamples, v.Samples, v.Outliers = st.Age, st.Samples, st.Outliers
	if st.Fitted {
		e := st.RelError
		v.RelError = &e
	}
	return v
}

// predictionView is a replica's prediction accuracy: counts by result,
// and over the compared ones the exact share and the predicted and
// delivered hit rates (cached over prompt tokens), null before the first;
// and the engine's own hit rate from its prefix-cache counters
// (vllm:prefix_cache_hits over vllm:prefix_cache_queries, since the
// engine started), null when it reports none.
type predictionView struct {
	Exact            uint64   `json:"exact"`
	Over             uint64   `json:"over"`
	Under            uint64   `json:"under"`
	Unknown          uint64   `json:"unknown"`
	Exactness        *float64 `json:"exactness"`
	PredictedHitRate *float64 `json:"predicted_hit_rate"`
	DeliveredHitRate *float64 `json:"delivered_hit_rate"`
	EngineHitRate    *float64 `json:"engine_hit_rate"`
}

// share is a/b, or null when b is 0.
func share(a, b float64) *float64 {
	if b <= 0 {
		return nil
	}
	r := a / b
	return &r
}

func (s *Server) prediction(r *replica.Snapshot) predictionView {
	a := s.met.Accuracy(r.ID)
	v := predictionView{Exact: a.Exact, Over: a.Over, Under: a.Under, Unknown: a.Unknown,
		Exactness:        share(float64(a.Exact), float64(a.Exact+a.Over+a.Under)),
		PredictedHitRate: share(float64(a.PredictedCached), float64(a.PromptTokens)),
		DeliveredHitRate: share(float64(a.DeliveredCached), float64(a.PromptTokens))}
	if !r.LoadAt.IsZero() {
		v.EngineHitRate = share(r.Load.PrefixHits, r.Load.PrefixQueries)
	}
	return v
}

type engineView struct {
	Kind          string  `json:"kind"`
	Running       float64 `json:"running"`
	Waiting       float64 `json:"waiting"`
	KVUsage       float64 `json:"kv_usage"`
	PrefixQueries float64 `json:"prefix_cache_queries"`
	PrefixHits    float64 `json:"prefix_cache_hits"`
	Preemptions   float64 `json:"preemptions"`
	KVCapacity    int     `json:"kv_capacity_blocks"`
	AgeMillis     float64 `json:"age_ms"`
	Failing       bool    `json:"scrape_failing"`
	Restarts      int     `json:"engine_restarts"`
}

// sourceView is one discovery source on /admin/replicas.
type sourceView struct {
	Name string `json:"name"`
	// Members counts its replicas in the fleet now.
	Members int `json:"members"`
	// Updated is when it last passed its endpoints on; null before.
	Updated *time.Time `json:"updated"`
	// Failing says why it cannot refresh (with the likely cause), null
	// when it can; its members are its last good set meanwhile.
	Failing      *string    `json:"failing"`
	FailingSince *time.Time `json:"failing_since"`
}

func (s *Server) replicas(ctx *fasthttp.RequestCtx) {
	now := time.Now()
	snaps := s.fleet.Replicas()
	sort.Slice(snaps, func(i, j int) bool { return snaps[i].ID < snaps[j].ID })
	out := struct {
		Replicas []replicaView `json:"replicas"`
		// Discovery lists the discovery sources (Kubernetes, the endpoint
		// file), when the gateway runs any.
		Discovery []sourceView `json:"discovery,omitempty"`
	}{Replicas: make([]replicaView, 0, len(snaps))}
	if s.sources != nil {
		for _, src := range s.sources.Sources() {
			v := sourceView{Name: src.Name, Members: src.Members}
			if !src.Updated.IsZero() {
				v.Updated = &src.Updated
			}
			if src.Failing != "" {
				v.Failing, v.FailingSince = &src.Failing, &src.Since
			}
			out.Discovery = append(out.Discovery, v)
		}
	}
	for _, r := range snaps {
		v := replicaView{ID: r.ID, URL: r.URL, Models: r.Models, Healthy: r.Healthy, Ejected: r.Ejected(now),
			Ejections: r.Ejections, InFlight: r.Counters.InFlight(), Pending: r.Counters.Pending(), Restarts: r.Restarts,
			Warnings: r.Warnings.List(), IndexMode: r.IndexMode, Prediction: s.prediction(r), CostModel: costModelOf(r)}
		checked, mismatched := s.met.PromptChecks(r.ID)
		if v.PromptTokensChecked = checked; checked > 0 {
			a := float64(checked-min(mismatched, checked)) / float64(checked)
			v.PromptTokensAgreement = &a
		}
		if v.Ejected {
			t := r.EjectedUntil
			v.EjectedUntil = &t
		}
		if !r.LoadAt.IsZero() {
			l := r.Load
			v.Engine = &engineView{Kind: l.Engine, Running: l.Running, Waiting: l.Waiting, KVUsage: l.KVUsage,
				PrefixQueries: l.PrefixQueries, PrefixHits: l.PrefixHits, Preemptions: l.Preemptions,
				KVCapacity: l.KVCapacityBlocks, AgeMillis: float64(now.Sub(r.LoadAt).Microseconds()) / 1000,
				Failing: r.LoadFailing, Restarts: r.EngineRestarts}
		}
		out.Replicas = append(out.Replicas, v)
	}
	writeJSON(ctx, out)
}

// writeJSON answers with v as indented JSON, or a 500 in the OpenAI error
// shape if it does not marshal.
func writeJSON(ctx *fasthttp.RequestCtx, v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		writeErr(ctx, fasthttp.StatusInternalServerError, "InternalServerError", err.Error())
		return
	}
	ctx.SetContentType("application/json")
	ctx.SetBody(append(b, '\n'))
}

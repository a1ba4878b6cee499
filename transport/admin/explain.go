package admin

import (
	"encoding/json"
	"errors"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/inferrail/inferrail/actors/routing"
	"github.com/inferrail/inferrail/model/openai"
	"github.com/inferrail/inferrail/model/policy"
	"github.com/inferrail/inferrail/transport/frontend"
)

// Explainer is what /admin/explain asks: *fleet.Fleet.
type Explainer interface {
	Resolve(name string) (model string, ok bool)
	Explain(model string, req policy.Request, deadline time.Time) (*routing.Explanation, error)
}

// ExplainOptions turn on POST /admin/explain/v1/chat/completions and
// /admin/explain/v1/completions.
type ExplainOptions struct {
	Fleet     Explainer
	Tokenizer frontend.Tokenizer // nil: requests are explained without a prompt
	// Timeout bounds reading the body and answering, as server.request_timeout
	// on the client port; MaxBody is server.max_request_body_bytes.
	Timeout time.Duration
	MaxBody int
}

// explainPrefix is the path prefix of the explain routes.
const explainPrefix = "/admin/explain"

// explainView is the answer of /admin/explain.
type explainView struct {
	Model        string        `json:"model"`
	Policy       string        `json:"policy"`
	PromptTokens int           `json:"prompt_tokens"`
	Blocks       int           `json:"blocks"`
	Tokenized    bool          `json:"tokenized"`
	Winner       *string       `json:"winner"`
	DecidedBy    *string       `json:"decided_by"`
	Steer        *string       `json:"steered_by"`
	Cap          int           `json:"bounded_load_cap,omitempty"`
	Owners       int           `json:"hot_prefix_owners,omitempty"`
	KVWaived     bool          `json:"kv_pressure_waived,omitempty"`
	Error        *string       `json:"error"`
	Replicas     []explainedRe `json:"replicas"`
}

type explainedRe struct {
	Replica      string        `json:"replica"`
	Offered      bool          `json:"offered"`
	Reason       *string       `json:"not_offered_because"`
	InFlight     int           `json:"in_flight"`
	Pending      int           `json:"pending"`
	Running      int           `json:"running"`
	KVUsage      *float64      `json:"kv_usage"`
	Answered     bool          `json:"answered_in_time"`
	CachedTokens int           `json:"cached_tokens"`
	PricedTokens int           `json:"priced_cached_tokens"`
	QueuedSecs   float64       `json:"queued_secs"`
	HotOwner     bool          `json:"hot_prefix_owner,omitempty"`
	Session      bool          `json:"session,omitempty"`
	Guard        *string       `json:"guard"`
	Estimate     *estimateView `json:"estimate"`
	KVAwareScore *float64      `json:"score,omitempty"`
	PrefixWeight *uint64       `json:"rendezvous_weight,omitempty"`
}

type estimateView struct {
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

// explain answers POST /admin/explain/v1/...: what the model's policy would
// do with the request now, routing nothing.
func (s *Server) explain(ctx *fasthttp.RequestCtx, path string) {
	if s.ex == nil {
		notFound(ctx)
		return
	}
	if string(ctx.Method()) != "POST" {
		ctx.Response.Header.Set("Allow", "POST")
		writeErr(ctx, fasthttp.StatusMethodNotAllowed, "Method Not Allowed", "Method Not Allowed")
		return
	}
	chat := path == "/v1/chat/completions"
	if !chat && path != "/v1/completions" {
		notFound(ctx)
		return
	}
	body := ctx.PostBody()
	f, err := openai.FindModel(body)
	if err != nil {
		writeErr(ctx, fasthttp.StatusBadRequest, openai.TypeBadRequestError, "The request body is not a JSON object.")
		return
	}
	model, ok := s.ex.Fleet.Resolve(f.Name)
	if !ok {
		writeErr(ctx, fasthttp.StatusNotFound, "NotFoundError", "The model `"+f.Name+"` does not exist.")
		return
	}
	deadline := time.Now().Add(s.ex.Timeout)
	req, p, tokenized := frontend.PolicyRequest(s.ex.Tokenizer, model, chat,
		ctx.Request.Header.Peek("X-Session-Id"), body, "explain", deadline)
	ex, err := s.ex.Fleet.Explain(model, req, deadline)
	if err != nil {
		writeErr(ctx, fasthttp.StatusServiceUnavailable, "ServiceUnavailableError", "The routing actor did not answer: "+err.Error())
		return
	}
	out := explainView{Model: model, Policy: ex.Policy, PromptTokens: p.Tokens, Blocks: len(p.Blocks), Tokenized: tokenized,
		Winner: strPtr(ex.Winner), Replicas: make([]explainedRe, 0, len(ex.Replicas))}
	if ex.Err != nil {
		out.Error = strPtr(ex.Err.Error())
	} else {
		out.DecidedBy, out.Steer = strPtr(string(ex.Decision.Term)), strPtr(string(ex.Decision.Steer))
		out.Cap, out.Owners, out.KVWaived = ex.Decision.Cap, ex.Decision.Owners, ex.Decision.KVWaived
	}
	for _, r := range ex.Replicas {
		v := explainedRe{Replica: r.ID, Offered: r.Offered, Reason: strPtr(r.Reason), InFlight: r.InFlight, Pending: r.Pending,
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
				v.Estimate = &estimateView{Queue: e.Queue.Seconds(), Prefill: e.Prefill.Seconds(), Tier: e.Tier.Seconds(), TTFT: e.Total().Seconds()}
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
	if errors.Is(ex.Err, routing.ErrNoExplain) {
		out.Error = strPtr("policy " + ex.Policy + " does not explain its decisions; the replicas are as it would see them")
	}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		writeErr(ctx, fasthttp.StatusInternalServerError, "InternalServerError", err.Error())
		return
	}
	ctx.SetContentType("application/json")
	ctx.SetBody(append(b, '\n'))
}

func notFound(ctx *fasthttp.RequestCtx) {
	writeErr(ctx, fasthttp.StatusNotFound, "Not Found", "Not Found")
}

// writeErr answers in the OpenAI error shape vLLM uses.
func writeErr(ctx *fasthttp.RequestCtx, code int, typ, msg string) {
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": code}})
	ctx.SetStatusCode(code)
	ctx.SetContentType("application/json")
	ctx.SetBody(b)
}

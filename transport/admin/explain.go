package admin

import (
	"encoding/json"
	"errors"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/inferrail/inferrail/actors/fleet"
	"github.com/inferrail/inferrail/actors/routing"
	"github.com/inferrail/inferrail/config"
	"github.com/inferrail/inferrail/model/openai"
	"github.com/inferrail/inferrail/model/policy"
	"github.com/inferrail/inferrail/transport/decisionlog"
	"github.com/inferrail/inferrail/transport/frontend"
)

// Explainer is what /admin/explain asks: *fleet.Fleet.
type Explainer interface {
	Resolve(name string) (model string, ok bool)
	Explain(model, pol string, req policy.Request, deadline time.Time) (*routing.Explanation, error)
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

// explainView is the answer of /admin/explain: the request, then the
// decision in the decision log's shape.
type explainView struct {
	Model        string `json:"model"`
	PromptTokens int    `json:"prompt_tokens"`
	Blocks       int    `json:"blocks"`
	Tokenized    bool   `json:"tokenized"`
	decisionlog.Decision
}

// explainMembers are what explain reads of a body before asking: its model
// and its user (the conversation key, as the gateway reads it).
var explainMembers = []openai.Member{{Key: "model", Value: true}, {Key: "user", Value: true}}

// explain answers POST /admin/explain/v1/...: what the model's policy would
// do with the request now, routing nothing. Of a model with an A/B split it
// explains the arm the request falls in, or with ?policy=NAME that arm.
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
	switch path {
	case "/v1/chat/completions", "/v1/completions", "/v1/messages", "/v1/responses":
	default:
		notFound(ctx)
		return
	}
	body := ctx.PostBody()
	var fs [2]openai.ModelField
	err := openai.FindMembers(body, explainMembers, fs[:])
	f := fs[0]
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
	var live *config.Config // the models' default SLOs, when known
	if s.current != nil {
		live, _ = s.current.Current()
	}
	slo, e := frontend.RequestSLO(live, model, frontend.SLOHeaders(&ctx.Request.Header))
	if e != nil {
		writeErr(ctx, e.Status, e.Type, e.Message)
		return
	}
	req, p, tokenized := frontend.PreparePolicy(s.ex.Tokenizer, model, path,
		ctx.Request.Header.Peek("X-Session-Id"), body, fs[1], "explain", deadline)
	req.SLO = slo
	pol := string(ctx.QueryArgs().Peek("policy"))
	ex, err := s.ex.Fleet.Explain(model, pol, req, deadline)
	if errors.Is(err, fleet.ErrUnknownPolicy) {
		writeErr(ctx, fasthttp.StatusBadRequest, openai.TypeBadRequestError,
			"The model `"+model+"` is not routed by a policy `"+pol+"`.")
		return
	}
	if err != nil {
		writeErr(ctx, fasthttp.StatusServiceUnavailable, "ServiceUnavailableError", "The routing actor did not answer: "+err.Error())
		return
	}
	out := explainView{Model: model, PromptTokens: p.Tokens, Blocks: len(p.Blocks), Tokenized: tokenized, Decision: decisionlog.View(ex)}
	writeJSON(ctx, out)
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

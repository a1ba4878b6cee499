package sim

import (
	"github.com/valyala/fasthttp"

	"github.com/inferrail/inferrail/model/openai"
	"github.com/inferrail/inferrail/model/token"
)

// detokenize answers vLLM's POST /detokenize: the body validated as
// DetokenizeRequest, the model checked, the ids decoded by the simulator's
// vocabulary (token.Sim.Decode, which the gateway also answers with).
func (inst *instance) detokenize(ctx *fasthttp.RequestCtx) {
	if err := openai.CheckContentType(string(ctx.Request.Header.ContentType())); err != nil {
		writeError(ctx, asAPIError(err))
		return
	}
	req, err := openai.ParseDetokenize(ctx.PostBody())
	if err != nil {
		writeError(ctx, asAPIError(err))
		return
	}
	if inst.resolveModel(req.Model) == "" {
		writeError(ctx, openai.ModelNotFound(req.Model))
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, openai.AppendDetokenize(nil, token.Sim{}.Decode(req.Tokens)))
}

// render answers vLLM's POST /v1/chat/completions/render (chat) and
// /v1/completions/render: the body prepared as for generation, up to the
// context-length check, and returned as a GenerateRequest (a list of one
// for completions; this simulator serves one prompt per request). The
// sampling parameters are those of a request that sets none but
// max_tokens and stream (openai.AppendRender). Ids past the vocabulary are
// not refused here: in vLLM the engine refuses them, and render stops
// before the engine.
func (inst *instance) render(ctx *fasthttp.RequestCtx, chat bool) {
	r, e := inst.prepare(ctx, chat)
	if e != nil {
		writeError(ctx, e)
		return
	}
	f, _ := openai.FindModel(ctx.PostBody())
	out := openai.Render{TokenIDs: r.prompt, MaxTokens: r.maxParam, Model: r.model,
		ModelSet: f.Found && ctx.PostBody()[f.Start] == '"', Stream: r.stream, StreamOptions: r.opts,
		CacheSalt: r.salt, Priority: r.priority}
	if r.maxParam == 0 {
		// No cap given: vLLM's get_max_tokens leaves the rest of the context.
		out.MaxTokens = inst.opts.Engine.MaxModelLen - len(r.prompt)
	}
	if chat {
		out.RequestID = "chatcmpl-" + openai.RandomID(runtimeRand{})
		writeJSON(ctx, fasthttp.StatusOK, openai.AppendRender(nil, &out))
		return
	}
	out.RequestID = "cmpl-" + openai.RandomID(runtimeRand{})
	writeJSON(ctx, fasthttp.StatusOK, openai.AppendRenderList(nil, []openai.Render{out}))
}

package sim

import (
	"strconv"

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
// for completions, one per prompt of a batch). The
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
	modelSet := f.Found && ctx.PostBody()[f.Start] == '"'
	one := func(p *request) openai.Render {
		out := openai.Render{TokenIDs: p.prompt, MaxTokens: p.maxParam, Model: p.model,
			ModelSet: modelSet, Stream: p.stream, StreamOptions: p.opts,
			CacheSalt: p.salt, Priority: p.priority}
		if p.maxParam == 0 {
			// No cap given: vLLM's get_max_tokens leaves the rest of the context.
			out.MaxTokens = inst.opts.Engine.MaxModelLen - len(p.prompt)
		}
		return out
	}
	if chat {
		out := one(r)
		out.RequestID = "chatcmpl-" + openai.RandomID(runtimeRand{})
		writeJSON(ctx, fasthttp.StatusOK, openai.AppendRender(nil, &out))
		return
	}
	// A batch of prompts renders as one GenerateRequest each, their ids
	// the request's with the prompt's index, as vLLM numbers a batch's
	// sub-requests.
	base := "cmpl-" + openai.RandomID(runtimeRand{})
	if r.batch == nil {
		out := one(r)
		out.RequestID = base
		writeJSON(ctx, fasthttp.StatusOK, openai.AppendRenderList(nil, []openai.Render{out}))
		return
	}
	outs := make([]openai.Render, len(r.batch))
	for i, p := range r.batch {
		outs[i] = one(p)
		outs[i].RequestID = base + "-" + strconv.Itoa(i)
	}
	writeJSON(ctx, fasthttp.StatusOK, openai.AppendRenderList(nil, outs))
}

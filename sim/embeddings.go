package sim

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/inferrail/inferrail/model/openai"
	"github.com/inferrail/inferrail/model/token"
)

// embeddingDims is the length of the simulator's embeddings.
const embeddingDims = 8

// embeddings answers POST /v1/embeddings in the shape of vLLM's
// EmbeddingResponse (vllm/entrypoints/pooling/embed/protocol.py): one
// deterministic vector per input, and usage with the prompt's tokens. An
// embedding is computed at once, outside the engine's batch: it holds no
// KV cache to route on.
func (inst *instance) embeddings(ctx *fasthttp.RequestCtx) {
	if err := openai.CheckContentType(string(ctx.Request.Header.ContentType())); err != nil {
		writeError(ctx, asAPIError(err))
		return
	}
	var req struct {
		Model string          `json:"model"`
		Input json.RawMessage `json:"input"`
	}
	if err := json.Unmarshal(ctx.PostBody(), &req); err != nil || req.Input == nil {
		writeError(ctx, &openai.Error{Status: 400, Type: openai.TypeBadRequest, Message: "input: Field required"})
		return
	}
	model := inst.resolveModel(req.Model)
	if model == "" {
		writeError(ctx, openai.ModelNotFound(req.Model))
		return
	}
	var prompts [][]uint32
	var one string
	var many []string
	var ids []uint32
	var batch [][]uint32
	switch {
	case json.Unmarshal(req.Input, &one) == nil:
		prompts = [][]uint32{token.Sim{}.Encode(nil, one)}
	case json.Unmarshal(req.Input, &many) == nil:
		for _, s := range many {
			prompts = append(prompts, token.Sim{}.Encode(nil, s))
		}
	case json.Unmarshal(req.Input, &ids) == nil:
		prompts = [][]uint32{ids}
	case json.Unmarshal(req.Input, &batch) == nil:
		prompts = batch
	default:
		writeError(ctx, &openai.Error{Status: 400, Type: openai.TypeBadRequest, Message: "input: Input should be a valid string or list"})
		return
	}
	total := 0
	b := append(make([]byte, 0, 256), `{"id":"embd-`...)
	b = append(b, openai.RandomID(runtimeRand{})...)
	b = append(b, `","object":"list","created":`...)
	b = strconv.AppendInt(b, time.Now().Unix(), 10)
	b = append(b, `,"model":`...)
	b = strconv.AppendQuote(b, model)
	b = append(b, `,"data":[`...)
	for i, p := range prompts {
		if len(p) == 0 {
			writeError(ctx, &openai.Error{Status: 400, Type: openai.TypeBadRequestError, Message: "The prompt must not be empty."})
			return
		}
		total += len(p)
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"index":`...)
		b = strconv.AppendInt(b, int64(i), 10)
		b = append(b, `,"object":"embedding","embedding":[`...)
		seed := seedOf(p)
		for d := range embeddingDims {
			if d > 0 {
				b = append(b, ',')
			}
			seed = seed*6364136223846793005 + 1442695040888963407
			b = strconv.AppendFloat(b, float64(int64(seed>>40)%2000-1000)/1000, 'f', -1, 64)
		}
		b = append(b, "]}"...)
	}
	b = append(b, `],"usage":{"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(total), 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, int64(total), 10)
	b = append(b, `,"completion_tokens":0,"prompt_tokens_details":null}}`...)
	writeJSON(ctx, fasthttp.StatusOK, b)
}

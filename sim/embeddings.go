package sim

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
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
		Model  string          `json:"model"`
		Input  json.RawMessage `json:"input"`
		Format *string         `json:"encoding_format"`
	}
	if err := json.Unmarshal(ctx.PostBody(), &req); err != nil || req.Input == nil {
		writeError(ctx, &openai.Error{Status: 400, Type: openai.TypeBadRequest, Message: "input: Field required"})
		return
	}
	// encoding_format: "float" (the default) or "base64", the float32
	// values' little-endian bytes in base64, as vLLM encodes them (its
	// embed_dtype float32, native byte order on the hosts it runs on), which
	// the openai SDKs ask for by default.
	b64 := req.Format != nil && *req.Format == "base64"
	if req.Format != nil && !b64 && *req.Format != "float" {
		writeError(ctx, &openai.Error{Status: 400, Type: openai.TypeBadRequest,
			Message: "encoding_format: Input should be 'float' or 'base64'"})
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
	vecs := make([][embeddingDims]float64, len(prompts))
	for i, p := range prompts {
		if len(p) == 0 {
			writeError(ctx, &openai.Error{Status: 400, Type: openai.TypeBadRequestError, Message: "The prompt must not be empty."})
			return
		}
		total += len(p)
		vecs[i] = embedding(p)
	}
	id := "embd-" + openai.RandomID(runtimeRand{})
	writeJSON(ctx, fasthttp.StatusOK, appendEmbeddings(make([]byte, 0, 256), id, time.Now().Unix(), model, vecs, b64, total))
}

// appendEmbeddings writes vLLM's EmbeddingResponse (JSONResponse of its
// model_dump) of vecs, computed from tokens prompt tokens. vLLM's
// embeddings are float32: a float one is the tensor's tolist(), each
// value the float32 written as Python's repr of the double; a base64 one
// the float32 values' little-endian bytes (its embed_dtype float32,
// native byte order on the hosts it runs on).
func appendEmbeddings(b []byte, id string, created int64, model string, vecs [][embeddingDims]float64, b64 bool, tokens int) []byte {
	b = append(b, `{"id":`...)
	b = strconv.AppendQuote(b, id)
	b = append(b, `,"object":"list","created":`...)
	b = strconv.AppendInt(b, created, 10)
	b = append(b, `,"model":`...)
	b = appendText(b, model)
	b = append(b, `,"data":[`...)
	for i, vec := range vecs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"index":`...)
		b = strconv.AppendInt(b, int64(i), 10)
		b = append(b, `,"object":"embedding","embedding":`...)
		if b64 {
			var raw [4 * embeddingDims]byte
			for d, v := range vec {
				binary.LittleEndian.PutUint32(raw[4*d:], math.Float32bits(float32(v)))
			}
			b = append(b, '"')
			b = base64.StdEncoding.AppendEncode(b, raw[:])
			b = append(b, `"}`...)
			continue
		}
		b = append(b, '[')
		for d, v := range vec {
			if d > 0 {
				b = append(b, ',')
			}
			b = appendPyFloat(b, float64(float32(v)))
		}
		b = append(b, "]}"...)
	}
	b = append(b, `],"usage":{"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(tokens), 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, int64(tokens), 10)
	return append(b, `,"completion_tokens":0,"prompt_tokens_details":null}}`...)
}

// appendPyFloat writes v as Python's float repr does for the values an
// embedding holds (|v| <= 1, 0 or at least 1e-4): the shortest digits
// that round-trip, with ".0" on an integral value.
func appendPyFloat(b []byte, v float64) []byte {
	start := len(b)
	b = strconv.AppendFloat(b, v, 'f', -1, 64)
	for _, c := range b[start:] {
		if c == '.' {
			return b
		}
	}
	return append(b, ".0"...)
}

// embedding is prompt p's deterministic vector.
func embedding(p []uint32) (vec [embeddingDims]float64) {
	seed := seedOf(p)
	for d := range vec {
		seed = seed*6364136223846793005 + 1442695040888963407
		vec[d] = float64(int64(seed>>40)%2000-1000) / 1000
	}
	return vec
}

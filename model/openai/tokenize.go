package openai

import (
	"math"
	"slices"
	"strconv"
)

// Paths of the vLLM endpoints this file's bodies belong to, for the
// gateway's route table and the simulator alike: /tokenize and
// /detokenize (vllm/entrypoints/serve/tokenize/api_router.py) and the
// render endpoints (vllm/entrypoints/serve/render/api_router.py).
const (
	PathTokenize         = "/tokenize"
	PathDetokenize       = "/detokenize"
	PathChatRender       = "/v1/chat/completions/render"
	PathCompletionRender = "/v1/completions/render"
)

// Detokenize is a parsed POST /detokenize body (vLLM's DetokenizeRequest,
// vllm/entrypoints/serve/tokenize/protocol.py @ 030ea52e: model: str | None,
// tokens: list[int] with 0 <= id <= 2**63-1, further fields ignored).
type Detokenize struct {
	Model string // "" when absent or null: the server's model
	// Tokens are the ids, in order, of those below 2**32: the ones a
	// tokenizer can hold. Wide says some id was past that; vLLM's Rust
	// tokenizer cannot convert those, so only an engine can answer.
	Tokens []uint32
	Wide   bool
}

// ParseDetokenize parses and validates a /detokenize body as vLLM's
// DetokenizeRequest does, every field error at once; each error is an
// *Error with status 400 in the shape vLLM's validation handler renders.
func ParseDetokenize(body []byte) (Detokenize, error) {
	var f fields
	b, err := scan(body, &f)
	if err != nil {
		return Detokenize{}, err
	}
	d := decoder{b: b}
	var out Detokenize
	out.Model, _ = d.str("body.model", f[fModel], true)
	s := f[fTokens]
	switch s.kind {
	case kNone:
		d.fail("body.tokens", msgRequired)
	case kArray:
		out.Tokens = make([]uint32, 0, 64)
		each(b, s, func(i int, v span) {
			loc := "body.tokens." + strconv.Itoa(i)
			n, msg, ok := intValue(b, v)
			switch {
			case msg != "":
				d.fail(loc, msg)
			case !ok:
				d.fail(loc, msgInt)
			case n < 0:
				d.fail(loc, "Input should be greater than or equal to 0")
			case n > math.MaxUint32:
				out.Wide = true
			default:
				out.Tokens = append(out.Tokens, uint32(n))
			}
		})
	default:
		d.fail("body.tokens", msgList)
	}
	if len(d.errs) > 0 {
		return Detokenize{}, validationErrors(d.errs, "")
	}
	return out, nil
}

// AppendDetokenize appends vLLM's /detokenize answer, DetokenizeResponse
// dumped by its JSONResponse: {"prompt":"..."}.
func AppendDetokenize(dst []byte, text string) []byte {
	dst = append(dst, `{"prompt":`...)
	dst = appendString(dst, text)
	return append(dst, '}')
}

// Render is one prompt as vLLM's render endpoints return it: a
// GenerateRequest (vllm/entrypoints/serve/disagg/protocol.py @ 06408932,
// built by ServingRender in vllm/entrypoints/serve/render/serving.py @
// 0001948b). A plain value; AppendRender only reads it.
type Render struct {
	RequestID string   // "chatcmpl-" or "cmpl-" + RandomID: vLLM draws a fresh one
	TokenIDs  []uint32 // the rendered prompt's ids
	MaxTokens int      // sampling_params.max_tokens, as get_max_tokens settles it
	Model     string
	ModelSet  bool // the body named a model; null otherwise, as vLLM dumps it
	Stream    bool
	// StreamOptions is dumped only when Stream is set, as vLLM passes it.
	StreamOptions StreamOptions
	CacheSalt     string // null when ""
	Priority      int64
}

// AppendRender appends r as GenerateRequest.model_dump() goes through
// vLLM's JSONResponse, fields in declaration order: request_id, token_ids,
// features (null: text only), sampling_params, model, stream,
// stream_options, cache_salt, priority, kv_transfer_params.
//
// sampling_params is SamplingParams (vllm/sampling_params.py @ 00388f65), a
// msgspec struct with omit_defaults, for a request that sets no sampling
// field of its own on an engine without generation-config defaults: after
// __post_init__ the fields off their defaults are stop, stop_token_ids and
// bad_words (None becomes []), max_tokens (unless 16), output_kind (DELTA
// when streaming, FINAL_ONLY otherwise, as to_sampling_params sets it),
// skip_clone (to_sampling_params sets it) and skip_reading_prefix_cache
// (None becomes false). This is read from the source; no capture of a
// render answer confirms it.
func AppendRender(dst []byte, r *Render) []byte {
	dst = append(dst, `{"request_id":`...)
	dst = appendString(dst, r.RequestID)
	dst = append(dst, `,"token_ids":[`...)
	for i, id := range r.TokenIDs {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = strconv.AppendUint(dst, uint64(id), 10)
	}
	dst = append(dst, `],"features":null,"sampling_params":{"stop":[],"stop_token_ids":[]`...)
	if r.MaxTokens != 16 {
		dst = append(dst, `,"max_tokens":`...)
		dst = strconv.AppendInt(dst, int64(r.MaxTokens), 10)
	}
	kind := byte('2') // RequestOutputKind.FINAL_ONLY
	if r.Stream {
		kind = '1' // DELTA
	}
	dst = append(dst, `,"output_kind":`...)
	dst = append(dst, kind)
	dst = append(dst, `,"skip_clone":true,"bad_words":[],"skip_reading_prefix_cache":false},"model":`...)
	if r.ModelSet {
		dst = appendString(dst, r.Model)
	} else {
		dst = append(dst, "null"...)
	}
	dst = strconv.AppendBool(append(dst, `,"stream":`...), r.Stream)
	dst = append(dst, `,"stream_options":`...)
	if o := r.StreamOptions; r.Stream && o.Set {
		dst = strconv.AppendBool(append(dst, `{"include_usage":`...), o.IncludeUsage)
		dst = strconv.AppendBool(append(dst, `,"continuous_usage_stats":`...), o.ContinuousUsageStats)
		dst = append(dst, '}')
	} else {
		dst = append(dst, "null"...)
	}
	dst = append(dst, `,"cache_salt":`...)
	dst = appendNullString(dst, r.CacheSalt)
	dst = strconv.AppendInt(append(dst, `,"priority":`...), r.Priority, 10)
	return append(dst, `,"kv_transfer_params":null}`...)
}

// AppendRenderList appends the answer of /v1/completions/render: one
// GenerateRequest per prompt, in a JSON list.
func AppendRenderList(dst []byte, rs []Render) []byte {
	dst = append(dst, '[')
	for i := range rs {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = AppendRender(dst, &rs[i])
	}
	return append(dst, ']')
}

// OnlyMembers reports whether body is a JSON object whose top-level members
// are all named in allowed (allowed must be sorted). A gateway uses it to
// answer only the bodies whose every field it reproduces.
func OnlyMembers(body []byte, allowed []string) bool {
	r := reader{b: body}
	r.ws()
	if r.i >= len(r.b) || r.b[r.i] != '{' {
		return false
	}
	ok := true
	r.object(func(k, _ span) {
		name := decodeString(body[k.start:k.end])
		if _, found := slices.BinarySearch(allowed, name); !found {
			ok = false
		}
	})
	return ok && r.err == nil
}

// Package openai is the OpenAI wire format as vLLM's OpenAI-compatible server
// speaks it: request parsing and validation for /v1/chat/completions and
// /v1/completions, and byte-exact response bodies, stream chunks, usage,
// errors, model cards and /version.
//
// openai owns the bytes on the wire and nothing else: it starts no
// goroutines, does no I/O and keeps no mutable globals (only immutable lookup
// tables). Time and randomness come from the caller (created timestamps,
// RandomID's source). Parsed requests are plain values owned by the caller;
// a Stream is immutable after NewChatStream / NewCompletionStream and safe
// for concurrent use.
//
// # Which vLLM
//
// The target is the vLLM line captured in ../shared/reference/vllm.md §5:
// the v0.26.0 non-streaming chat capture fixes the response shape, and the
// rest follows vllm-project/vllm sources read for this package:
//
//   - vllm/entrypoints/openai/chat_completion/protocol.py @ 002032ee2b18
//   - vllm/entrypoints/openai/completion/protocol.py @ 002032ee2b18
//   - vllm/entrypoints/openai/chat_completion/serving.py @ 006c49d485f9
//   - vllm/entrypoints/openai/completion/serving.py @ 030ea52effcb
//   - vllm/entrypoints/generate/base/protocol.py @ 022e555dbb75 (StreamOptions,
//     DeltaMessage, validate_cache_salt)
//   - vllm/entrypoints/openai/engine/protocol.py @ 040a2cc2a629 (ErrorInfo,
//     ModelCard, ModelPermission, UsageInfo)
//   - vllm/frontend/entrypoints/serve/exception_handling/{error_response.py,
//     handlers/validation.py, handlers/http.py} @ 055e47c28003
//   - vllm/entrypoints/openai/fingerprint.py @ 362c535e38f4
//
// Non-streaming bodies are Starlette JSONResponse(model_dump()):
// json.dumps(ensure_ascii=False, separators=(",", ":")), every field present,
// None as null. Stream chunks are pydantic model_dump_json(exclude_unset=True):
// only fields the server passed, in declaration order. Neither escapes <, >, &,
// U+2028 or non-ASCII; the one place that does (ensure_ascii=True, with
// ", " and ": " separators) is an error sent inside a stream, see
// AppendStreamError.
//
// # Request handling order
//
// vLLM validates in three stages, and an HTTP layer reproduces its status
// codes by calling this package in the same order:
//
//  1. CheckContentType, then ParseChat / ParseCompletion: what FastAPI and the
//     pydantic request model reject (400, type "Bad Request").
//  2. The model check (404 ModelNotFound), done by the caller.
//  3. (*ChatRequest).Check / (*CompletionRequest).Check: what vLLM's
//     SamplingParams reject (400, type "BadRequestError"), then the features
//     this simulator does not implement (n > 1, best_of > 1, logprobs, echo,
//     prompt batches).
package openai

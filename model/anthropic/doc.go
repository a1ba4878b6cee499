// Package anthropic reads Anthropic Messages API requests
// (POST /v1/messages and /v1/messages/count_tokens) the way vLLM's
// Anthropic entrypoint does (vllm/entrypoints/anthropic/protocol.py,
// serving.py and inline_system.py @ a8c3bdb20f5d): it validates the body,
// then converts it into the OpenAI chat request vLLM renders with the
// model's chat template, so that the gateway's chat path (model/prompt)
// computes the very tokens and block hashes the engine will. It also reads
// the usage of Messages responses and writes errors in Anthropic's shape.
//
// anthropic starts no goroutines, does no I/O and keeps no globals; every
// function is safe for concurrent use, and a Request is owned by its
// caller.
package anthropic

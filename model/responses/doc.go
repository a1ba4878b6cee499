// Package responses reads OpenAI Responses API requests (POST
// /v1/responses) the way vLLM's Responses entrypoint does
// (vllm/entrypoints/openai/responses: protocol.py ResponsesRequest,
// utils.py construct_input_messages and construct_tool_dicts, serving.py
// _make_request): it validates the body, then converts its instructions,
// input items and function tools into the OpenAI chat request vLLM renders
// with the model's chat template, so that the gateway's chat path
// (model/prompt) computes the very tokens and block hashes the engine
// will. It also reads the usage and the id of Responses answers, whole or
// streamed.
//
// A request that continues a stored response (previous_response_id) is
// rendered by vLLM with that response's conversation, which lives only in
// the engine that stored it; ToChat does not pretend to know it.
//
// responses starts no goroutines, does no I/O and keeps no globals; every
// function is safe for concurrent use, and a Request is owned by its
// caller.
package responses

#!/usr/bin/env python3
"""Regenerates the Messages wire fixtures in this directory (wire_*.txt).

Run from this directory with Python 3.11+ and pydantic 2 (2.13.4 was used):
    python3 gen_fixtures.py

The classes below mirror vLLM's Anthropic response models field for field
(names, order, types, defaults), from vllm-project/vllm
vllm/entrypoints/anthropic/protocol.py @ a8c3bdb20f5dd558bbb813e1644b82830e63dcbb
(AnthropicError, AnthropicErrorResponse, AnthropicUsage, AnthropicContentBlock,
AnthropicDelta, AnthropicStreamEvent, AnthropicMessagesResponse,
AnthropicContextManagement, AnthropicCountTokensResponse). Each fixture is built
as vllm/entrypoints/anthropic/serving.py @ a8c3bdb20f5d builds it
(_build_anthropic_usage, messages_full_converter, message_stream_converter over a
chat stream with include_usage and continuous_usage_stats, as
_handle_streaming_options asks) and serialized as vLLM serializes it
(api_router.py @ 01540b75e3b1):
  * a message: JSONResponse(model_dump(exclude_none=True)) =
    json.dumps(..., ensure_ascii=False, allow_nan=False, separators=(",", ":"))
  * count_tokens: the same; errors: JSONResponse(model_dump()) (no exclude)
  * stream events: "event: NAME\\ndata: " + model_dump_json(exclude_unset=True)
    + "\\n\\n" (message_stop also exclude_none); vLLM sends no ping.
Where vLLM is silent the shape agrees with Anthropic's published Messages API
(docs.anthropic.com/en/api/messages, .../messages-streaming). The Go tests
(wire_test.go) compare the package's writers with these bytes; they never run
Python.
"""
import json
from typing import Any, Literal

from pydantic import BaseModel


class AnthropicError(BaseModel):
    type: str
    message: str


class AnthropicErrorResponse(BaseModel):
    type: Literal["error"] = "error"
    error: AnthropicError


class AnthropicUsage(BaseModel):
    input_tokens: int
    output_tokens: int
    cache_creation_input_tokens: int | None = None
    cache_read_input_tokens: int | None = None


class AnthropicContentBlock(BaseModel):
    type: Literal["text", "image", "tool_use", "tool_result", "tool_reference", "thinking",
                  "redacted_thinking"]
    text: str | None = None
    source: dict[str, Any] | None = None
    id: str | None = None
    tool_use_id: str | None = None
    name: str | None = None
    input: dict[str, Any] | None = None
    content: str | list[dict[str, Any]] | None = None
    is_error: bool | None = None
    tool_name: str | None = None
    thinking: str | None = None
    signature: str | None = None
    data: str | None = None


class AnthropicDelta(BaseModel):
    type: Literal["text_delta", "input_json_delta", "thinking_delta", "signature_delta"] | None = None
    text: str | None = None
    thinking: str | None = None
    partial_json: str | None = None
    signature: str | None = None
    stop_reason: Literal["end_turn", "max_tokens", "stop_sequence", "tool_use"] | None = None
    stop_sequence: str | None = None


class AnthropicStreamEvent(BaseModel):
    type: Literal["message_start", "message_delta", "message_stop", "content_block_start",
                  "content_block_delta", "content_block_stop", "ping", "error"]
    message: "AnthropicMessagesResponse | None" = None
    delta: AnthropicDelta | None = None
    content_block: AnthropicContentBlock | None = None
    index: int | None = None
    error: AnthropicError | None = None
    usage: AnthropicUsage | None = None


class AnthropicMessagesResponse(BaseModel):
    id: str
    type: Literal["message"] = "message"
    role: Literal["assistant"] = "assistant"
    content: list[AnthropicContentBlock]
    model: str
    stop_reason: Literal["end_turn", "max_tokens", "stop_sequence", "tool_use"] | None = None
    stop_sequence: str | None = None
    usage: AnthropicUsage | None = None
    kv_transfer_params: dict[str, Any] | None = None
    ec_transfer_params: dict[str, Any] | None = None


AnthropicStreamEvent.model_rebuild()


class AnthropicContextManagement(BaseModel):
    original_input_tokens: int


class AnthropicCountTokensResponse(BaseModel):
    input_tokens: int
    context_management: AnthropicContextManagement | None = None


def build_usage(prompt_tokens, completion_tokens, cached_tokens=None):
    """_build_anthropic_usage over a UsageInfo; cached_tokens None when
    prompt_tokens_details is absent (details off, or a continuous-usage chunk)."""
    kwargs = {"output_tokens": completion_tokens or 0}
    input_tokens = prompt_tokens
    if cached_tokens is not None:
        input_tokens -= cached_tokens
        kwargs["cache_read_input_tokens"] = cached_tokens
    kwargs["input_tokens"] = max(0, input_tokens)
    return AnthropicUsage(**kwargs)


def json_response(content) -> bytes:  # starlette.responses.JSONResponse.render
    return json.dumps(content, ensure_ascii=False, allow_nan=False, indent=None,
                      separators=(",", ":")).encode("utf-8")


def event(data: str, name: str) -> bytes:  # serving.py wrap_data_with_event
    return f"event: {name}\ndata: {data}\n\n".encode("utf-8")


STOP_REASON = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use"}


def full(msg_id, model, content, finish_reason, stop_reason, usage) -> bytes:
    """messages_full_converter over a ChatCompletionResponse with one choice."""
    result = AnthropicMessagesResponse(id=msg_id, content=[], model=model, usage=usage,
                                       kv_transfer_params=None, ec_transfer_params=None)
    if finish_reason == "stop":
        if isinstance(stop_reason, str):
            result.stop_reason = "stop_sequence"
            result.stop_sequence = stop_reason
        else:
            result.stop_reason = "end_turn"
    elif finish_reason in ("length", "tool_calls"):
        result.stop_reason = STOP_REASON[finish_reason]
    blocks = []
    if content:
        blocks.append(AnthropicContentBlock(type="text", text=content))
    if not blocks:
        blocks.append(AnthropicContentBlock(type="text", text=""))
    result.content = blocks
    return json_response(result.model_dump(exclude_none=True))


def stream(msg_id, model, pieces, finish_reason, stop_reason, first_usage, final_usage) -> bytes:
    """message_stream_converter over the chat chunks of a text answer: the
    role chunk (empty content), one chunk per piece (the finish reason on the
    last, or on an empty finish chunk when there are none), the usage chunk,
    [DONE]."""
    out = []
    msg = AnthropicMessagesResponse(id=msg_id, type="message", role="assistant", content=[], model=model,
                                    stop_reason=None, stop_sequence=None, usage=first_usage)
    out.append(event(AnthropicStreamEvent(type="message_start", message=msg).model_dump_json(exclude_unset=True),
                     "message_start"))
    block_index = None
    for text in pieces:
        if text == "":
            continue
        if block_index is None:
            block_index = 0
            start = AnthropicStreamEvent(index=0, type="content_block_start",
                                         content_block=AnthropicContentBlock(type="text", text=""))
            out.append(event(start.model_dump_json(exclude_unset=True), "content_block_start"))
        delta = AnthropicStreamEvent(index=block_index, type="content_block_delta",
                                     delta=AnthropicDelta(type="text_delta", text=text))
        out.append(event(delta.model_dump_json(exclude_unset=True), "content_block_delta"))
    # the usage chunk (no choices): stop_and_flush, then message_delta
    if block_index is not None:
        stop = AnthropicStreamEvent(index=block_index, type="content_block_stop")
        out.append(event(stop.model_dump_json(exclude_unset=True), "content_block_stop"))
    if isinstance(stop_reason, str):
        d = AnthropicDelta(stop_reason="stop_sequence", stop_sequence=stop_reason)
    else:
        d = AnthropicDelta(stop_reason=STOP_REASON.get(finish_reason or "stop"), stop_sequence=None)
    md = AnthropicStreamEvent(type="message_delta", delta=d, usage=final_usage)
    out.append(event(md.model_dump_json(exclude_unset=True), "message_delta"))
    # [DONE]
    ms = AnthropicStreamEvent(type="message_stop")
    out.append(event(ms.model_dump_json(exclude_unset=True, exclude_none=True), "message_stop"))
    return b"".join(out)


FILES = {}


def fixture(name, source, payload: bytes):
    FILES[name] = (source, payload)


MSG_ID = "chatcmpl-a47c93077b0e387a"  # vLLM answers with the chat request's id
QWEN = "Qwen/Qwen3-8B"
HTML = '<b>Tom & Jerry</b> \u2014 \u201cquoted\u201d\nline\u2028sep\tend \\ "q" \x01\x7f caf\u00e9 \U0001F600'

fixture("wire_message.txt", "messages_full_converter, finish_reason stop with a stop token (end_turn), "
        "prompt token details off.",
        full(MSG_ID, QWEN, "Hello! How can I help you today?", "stop", 151645, build_usage(71, 9)))
fixture("wire_message_cached.txt", "messages_full_converter with --enable-prompt-tokens-details "
        "(cache_read_input_tokens, input_tokens less it), finish_reason length, text that needs escaping.",
        full(MSG_ID, QWEN, HTML, "length", None, build_usage(1200, 35, 1184)))
fixture("wire_message_empty.txt", "an empty completion: one empty text block, not [].",
        full(MSG_ID, QWEN, "", "length", None, build_usage(5, 0)))
fixture("wire_message_stop_sequence.txt", "finish_reason stop on a matched stop string.",
        full(MSG_ID, QWEN, "1, 2, 3", "stop", "\n\n", build_usage(12, 7)))

fixture("wire_stream.txt", "the whole event sequence of a streamed text answer, details on: message_start "
        "has the first chunk's continuous usage (no details yet), message_delta the final usage chunk's.",
        stream(MSG_ID, QWEN, ["Hello", "!", " \u201cok\u201d <3"], "stop", None,
               build_usage(33, 0), build_usage(33, 3, 16)))
fixture("wire_stream_length.txt", "a streamed answer cut by max_tokens, details off.",
        stream(MSG_ID, QWEN, ["a", "\n"], "length", None, build_usage(8, 0), build_usage(8, 2)))
fixture("wire_stream_empty.txt", "a streamed answer of no tokens: no content block.",
        stream(MSG_ID, QWEN, [], "length", None, build_usage(8, 0), build_usage(8, 0)))
fixture("wire_stream_stop_sequence.txt", "a stream stopped on a matched stop string.",
        stream(MSG_ID, QWEN, ["1, 2"], "stop", "\n\n", build_usage(12, 0), build_usage(12, 1)))

fixture("wire_count_tokens.txt", "count_tokens: JSONResponse(model_dump(exclude_none=True)).",
        json_response(AnthropicCountTokensResponse(
            input_tokens=42, context_management=AnthropicContextManagement(original_input_tokens=42)
        ).model_dump(exclude_none=True)))
fixture("wire_error.txt", "translate_error_response: JSONResponse(AnthropicErrorResponse.model_dump()).",
        json_response(AnthropicErrorResponse(error=AnthropicError(
            type="BadRequestError", message="max_tokens: <must be> > 0 & \u2028 caf\u00e9")).model_dump()))

if __name__ == "__main__":
    import pydantic
    for name, (source, payload) in FILES.items():
        with open(name, "wb") as f:
            f.write(f"# generated by gen_fixtures.py (pydantic {pydantic.VERSION}); {source}\n".encode())
            f.write(payload + b"\n")
    print(f"wrote {len(FILES)} fixtures")

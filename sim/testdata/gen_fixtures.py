#!/usr/bin/env python3
"""Regenerates the simulator's wire fixtures in this directory (wire_*.txt):
the Responses API and embeddings answers.

Run from this directory with Python 3.11+ and pydantic 2 (2.13.4 was used):
    python3 gen_fixtures.py

The classes below mirror, field for field (names, order, defaults):
  * vLLM's Responses models, vllm-project/vllm
    vllm/entrypoints/openai/responses/protocol.py @ c0bc59655a40
    (InputTokensDetails, OutputTokensDetails, ResponseUsage, ResponsesResponse and
    ResponsesResponse.from_request);
  * the openai python package's types they build on, openai/openai-python
    src/openai/types/responses/ (ResponseOutputMessage without the newer
    `phase` field, ResponseOutputText, ResponseTextDeltaEvent,
    ResponseTextDoneEvent @ 3e19420bd6d5, the content-part, output-item and
    created/in_progress/completed events) and types/shared/reasoning.py, with
    openai's BaseModel extra="allow";
  * vLLM's embedding models, vllm/entrypoints/pooling/embed/protocol.py
    (EmbeddingResponseData, EmbeddingResponse) with UsageInfo from
    engine/protocol.py @ 040a2cc2a629.
The stream is built as vllm/entrypoints/openai/responses/simple_streaming_events.py
@ 25af204a63a4 builds a plain text answer (the part added with logprobs [], the
text done with logprobs [], the part done without logprobs, the message done
carrying the extra annotations and logprobs it is constructed with) and numbered
as the api router numbers it. Serialization, as vLLM does it:
  * a response: JSONResponse(model_dump()) = json.dumps(..., ensure_ascii=False,
    separators=(",", ":"))
  * stream events: "event: TYPE\\ndata: " + model_dump_json(indent=None) + "\\n\\n"
  * embeddings: JSONResponse(model_dump()); a float embedding is the float32
    tensor's tolist(), so each value is a float32 written as Python's repr of
    the double; base64 is the float32 little-endian bytes.
The Go tests (wire_test.go) compare the simulator's writers with these bytes;
they never run Python.
"""
import base64
import json
import struct
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class OpenAIBaseModel(BaseModel):  # vLLM's and openai's: extra fields kept
    model_config = ConfigDict(extra="allow")


# ---- openai.types.responses ----
class ResponseOutputText(OpenAIBaseModel):
    annotations: list[Any]
    text: str
    type: Literal["output_text"]
    logprobs: list[Any] | None = None


class ResponseOutputMessage(OpenAIBaseModel):
    id: str
    content: list[ResponseOutputText]
    role: Literal["assistant"]
    status: Literal["in_progress", "completed", "incomplete"]
    type: Literal["message"]


class FunctionTool(OpenAIBaseModel):  # openai types/responses/function_tool.py @ 306e7b696a38
    name: str
    parameters: dict[str, object] | None = None
    strict: bool | None = None
    type: Literal["function"]
    description: str | None = None


class IncompleteDetails(OpenAIBaseModel):
    reason: Literal["max_output_tokens", "content_filter"] | None = None


class Reasoning(OpenAIBaseModel):
    effort: str | None = None
    generate_summary: str | None = None
    summary: str | None = None


# ---- vLLM responses/protocol.py ----
class InputTokensDetails(OpenAIBaseModel):
    cached_tokens: int
    input_tokens_per_turn: list[int] = Field(default_factory=list)
    cached_tokens_per_turn: list[int] = Field(default_factory=list)


class OutputTokensDetails(OpenAIBaseModel):
    reasoning_tokens: int = 0
    tool_output_tokens: int = 0
    output_tokens_per_turn: list[int] = Field(default_factory=list)
    tool_output_tokens_per_turn: list[int] = Field(default_factory=list)


class ResponseUsage(OpenAIBaseModel):
    input_tokens: int
    input_tokens_details: InputTokensDetails
    output_tokens: int
    output_tokens_details: OutputTokensDetails
    total_tokens: int


class ResponsesResponse(OpenAIBaseModel):
    id: str
    created_at: int
    incomplete_details: IncompleteDetails | None = None
    instructions: str | None = None
    metadata: dict[str, str] | None = None
    model: str
    object: Literal["response"] = "response"
    output: list[ResponseOutputMessage]
    parallel_tool_calls: bool
    temperature: float
    tool_choice: Any
    tools: list[Any]
    top_p: float
    background: bool
    max_output_tokens: int
    max_tool_calls: int | None = None
    previous_response_id: str | None = None
    prompt: Any | None = None
    reasoning: Reasoning | None = None
    service_tier: Literal["auto", "default", "flex", "scale", "priority"]
    status: str
    text: Any | None = None
    top_logprobs: int | None = None
    truncation: Literal["auto", "disabled"]
    usage: ResponseUsage | None = None
    user: str | None = None
    input_messages: Any | None = None
    output_messages: Any | None = None


# ---- openai stream events (vLLM overrides response with ResponsesResponse) ----
class ResponseCreatedEvent(OpenAIBaseModel):
    response: ResponsesResponse
    sequence_number: int
    type: Literal["response.created"]


class ResponseInProgressEvent(OpenAIBaseModel):
    response: ResponsesResponse
    sequence_number: int
    type: Literal["response.in_progress"]


class ResponseCompletedEvent(OpenAIBaseModel):
    response: ResponsesResponse
    sequence_number: int
    type: Literal["response.completed"]


class ResponseOutputItemAddedEvent(OpenAIBaseModel):
    item: ResponseOutputMessage
    output_index: int
    sequence_number: int
    type: Literal["response.output_item.added"]


class ResponseOutputItemDoneEvent(OpenAIBaseModel):
    item: ResponseOutputMessage
    output_index: int
    sequence_number: int
    type: Literal["response.output_item.done"]


class ResponseContentPartAddedEvent(OpenAIBaseModel):
    content_index: int
    item_id: str
    output_index: int
    part: ResponseOutputText
    sequence_number: int
    type: Literal["response.content_part.added"]


class ResponseContentPartDoneEvent(OpenAIBaseModel):
    content_index: int
    item_id: str
    output_index: int
    part: ResponseOutputText
    sequence_number: int
    type: Literal["response.content_part.done"]


class ResponseTextDeltaEvent(OpenAIBaseModel):
    content_index: int
    delta: str
    item_id: str
    logprobs: list[Any]
    output_index: int
    sequence_number: int
    type: Literal["response.output_text.delta"]


class ResponseTextDoneEvent(OpenAIBaseModel):
    content_index: int
    item_id: str
    logprobs: list[Any]
    output_index: int
    sequence_number: int
    text: str
    type: Literal["response.output_text.done"]


# ---- vLLM pooling/embed/protocol.py, engine/protocol.py ----
class PromptTokenUsageInfo(OpenAIBaseModel):
    cached_tokens: int | None = None
    multimodal_tokens: dict[str, int] | None = None


class UsageInfo(OpenAIBaseModel):
    prompt_tokens: int = 0
    total_tokens: int = 0
    completion_tokens: int | None = 0
    prompt_tokens_details: PromptTokenUsageInfo | None = None


class EmbeddingResponseData(OpenAIBaseModel):
    index: int
    object: str = "embedding"
    embedding: list[float] | str


class EmbeddingResponse(OpenAIBaseModel):
    id: str
    object: str = "list"
    created: int
    model: str
    data: list[EmbeddingResponseData]
    usage: UsageInfo


def json_response(model) -> bytes:  # starlette.responses.JSONResponse.render
    return json.dumps(model.model_dump(), ensure_ascii=False, allow_nan=False, indent=None,
                      separators=(",", ":")).encode("utf-8")


def sse(ev) -> bytes:  # responses api_router _convert_stream_to_sse_events
    return f"event: {ev.type}\ndata: {ev.model_dump_json(indent=None)}\n\n".encode("utf-8")


FILES = {}


def fixture(name, source, payload: bytes):
    FILES[name] = (source, payload)


RESP_ID = "resp_0123456789abcdef0123456789abcdef"
MSG_ID = "msg_0123456789abcdef0123456789abcdef"
CREATED = 1753106400
QWEN = "Qwen/Qwen3-8B"
HTML = '<b>Tom & Jerry</b> \u2014 \u201cquoted\u201d\nline\u2028sep\tend \\ "q" \x01\x7f caf\u00e9 \U0001F600'


def response(status, text, prompt, n, cached, done, instructions=None, max_out=8, background=False,
             previous=None, reasoning=None, user=None, tools=()):
    """ResponsesResponse.from_request for a request that sets no sampling
    parameters (temperature and top_p 1.0, tool_choice auto, no tools, no logprobs)."""
    output, usage = [], None
    if done:
        content = [ResponseOutputText(annotations=[], text=text, type="output_text", logprobs=None)] if text else []
        output = [ResponseOutputMessage(id=MSG_ID, content=content, role="assistant", status="completed",
                                        type="message")]
        usage = ResponseUsage(input_tokens=prompt, input_tokens_details=InputTokensDetails(cached_tokens=cached),
                              output_tokens=n, output_tokens_details=OutputTokensDetails(),
                              total_tokens=prompt + n)
    return ResponsesResponse(
        id=RESP_ID, created_at=CREATED,
        incomplete_details=IncompleteDetails(reason="max_output_tokens") if status == "incomplete" else None,
        instructions=instructions, metadata=None, model=QWEN, output=output, input_messages=None,
        output_messages=None, parallel_tool_calls=True, temperature=1.0, tool_choice="auto",
        tools=[FunctionTool(**t) for t in tools],
        top_p=1.0, background=background, max_output_tokens=max_out, max_tool_calls=None,
        previous_response_id=previous, prompt=None, reasoning=reasoning, service_tier="auto", status=status,
        text=None, top_logprobs=None, truncation="disabled", user=user, usage=usage)


fixture("wire_response.txt", "a finished response, nothing cached.",
        json_response(response("completed", "Hello there.", 40, 3, 0, True)))
fixture("wire_response_incomplete.txt",
        "cut by max_output_tokens (incomplete_details), cached prompt, instructions, a previous response, "
        "reasoning echoed, user, text that needs escaping.",
        json_response(response("incomplete", HTML, 1200, 8, 1184, True, instructions="Be <brief> & kind.",
                               previous="resp_fedcba9876543210fedcba9876543210",
                               reasoning=Reasoning(effort="low", generate_summary=None, summary="auto"),
                               user="u-1")))
TOOLS = [
    {"type": "function", "name": "read", "description": "Read a file <path> & say \u00e9",
     "parameters": {"type": "object", "properties": {"path": {"type": "string", "maxLength": 1.5e3}},
                    "required": ["path"]}},
    {"type": "function", "name": "ls", "parameters": {"type": "object"}, "strict": True},
]
fixture("wire_response_tools.txt", "function tools echoed as FunctionTool dumps (absent fields null, "
        "parameters as the dict Python read: compact, in order, 1.5e3 as 1500.0).",
        json_response(response("completed", "ok", 60, 1, 0, True, tools=TOOLS)))
fixture("wire_response_queued.txt", "a background response answered at once: queued, no output, no usage.",
        json_response(response("queued", "", 40, 0, 0, False, background=True, max_out=32728)))


def stream(pieces, status, prompt, cached):
    seq = 0
    out = []

    def num():
        nonlocal seq
        seq += 1
        return seq - 1

    first = response("in_progress", "", prompt, 0, 0, False)
    out.append(sse(ResponseCreatedEvent(response=first, sequence_number=num(), type="response.created")))
    out.append(sse(ResponseInProgressEvent(response=first, sequence_number=num(), type="response.in_progress")))
    out.append(sse(ResponseOutputItemAddedEvent(
        type="response.output_item.added", sequence_number=num(), output_index=0,
        item=ResponseOutputMessage(id=MSG_ID, type="message", role="assistant", content=[], status="in_progress"))))
    out.append(sse(ResponseContentPartAddedEvent(
        type="response.content_part.added", sequence_number=num(), output_index=0, item_id=MSG_ID,
        content_index=0, part=ResponseOutputText(type="output_text", text="", annotations=[], logprobs=[]))))
    for p in pieces:
        out.append(sse(ResponseTextDeltaEvent(
            type="response.output_text.delta", sequence_number=num(), content_index=0, output_index=0,
            item_id=MSG_ID, delta=p, logprobs=[])))
    text = "".join(pieces)
    out.append(sse(ResponseTextDoneEvent(
        type="response.output_text.done", item_id=MSG_ID, sequence_number=num(), output_index=0,
        content_index=0, text=text, logprobs=[])))
    out.append(sse(ResponseContentPartDoneEvent(
        type="response.content_part.done", sequence_number=num(), item_id=MSG_ID, output_index=0,
        content_index=0, part=ResponseOutputText(text=text, type="output_text", annotations=[]))))
    out.append(sse(ResponseOutputItemDoneEvent(
        type="response.output_item.done", sequence_number=num(), output_index=0,
        item=ResponseOutputMessage(
            type="message", role="assistant",
            content=[ResponseOutputText(text=text, type="output_text", annotations=[])],
            status="completed", id=MSG_ID, annotations=[], logprobs=[]))))
    final = response(status, text, prompt, len(pieces), cached, True)
    out.append(sse(ResponseCompletedEvent(response=final, sequence_number=num(), type="response.completed")))
    return b"".join(out)


fixture("wire_response_stream.txt", "the events of a streamed text answer, finished, part of the prompt cached.",
        stream(["Hi", " \u201cthere\u201d", " <3"], "completed", 40, 16))

# ---- embeddings ----
VEC = [0.123, -1.0, 0.0, 0.5, -0.999, 0.001, 0.25, -0.333]


def f32(v):
    return struct.unpack("<f", struct.pack("<f", v))[0]


def embeddings(vectors, b64, prompt_tokens):
    data = []
    for i, v in enumerate(vectors):
        if b64:
            emb = base64.b64encode(b"".join(struct.pack("<f", x) for x in v)).decode()
        else:
            emb = [f32(x) for x in v]
        data.append(EmbeddingResponseData(index=i, embedding=emb))
    return json_response(EmbeddingResponse(
        id="embd-5c0ffee5c0ffee00", created=CREATED, model=QWEN, data=data,
        usage=UsageInfo(prompt_tokens=prompt_tokens, total_tokens=prompt_tokens)))


fixture("wire_embeddings.txt", "encoding_format float: float32 values as Python floats.",
        embeddings([VEC], False, 5))
fixture("wire_embeddings_base64.txt", "encoding_format base64, two inputs.",
        embeddings([VEC, list(reversed(VEC))], True, 9))

if __name__ == "__main__":
    import pydantic
    for name, (source, payload) in FILES.items():
        with open(name, "wb") as f:
            f.write(f"# generated by gen_fixtures.py (pydantic {pydantic.VERSION}); {source}\n".encode())
            f.write(payload + b"\n")
    print(f"wrote {len(FILES)} fixtures")

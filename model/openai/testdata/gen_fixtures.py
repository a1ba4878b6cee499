#!/usr/bin/env python3
"""Regenerates the wire fixtures in this directory.

Run from this directory with Python 3.11+ and pydantic 2 (2.13.4 was used):
    python3 gen_fixtures.py

The classes below mirror vLLM's response models field for field (names,
order, types, defaults, serializers), from vllm-project/vllm:
  chat_completion/protocol.py  @ 002032ee2b18 (ChatMessage, ChatCompletionResponse*,
                                                ChatCompletionStreamResponse)
  completion/protocol.py       @ 002032ee2b18 (CompletionResponse*, CompletionStreamResponse)
  generate/base/protocol.py    @ 022e555dbb75 (DeltaMessage, PerRequestMetrics)
  engine/protocol.py           @ 040a2cc2a629 (ErrorInfo, ErrorResponse, ModelCard,
                                                ModelPermission, ModelList, UsageInfo)
  serve/tokenize/protocol.py   @ 030ea52effcb (TokenizeResponse, DetokenizeResponse)
PromptTokenUsageInfo carries cached_tokens and multimodal_tokens, as a v0.23.1
capture shows (vllm.md 5.4). Each fixture is built the way vLLM's serving code
builds it (chat_completion/serving.py @ 006c49d485f9, completion/serving.py @
030ea52effcb) and serialized the way vLLM serializes it:
  * non-streaming bodies: Starlette JSONResponse(model_dump()) =
    json.dumps(..., ensure_ascii=False, allow_nan=False, separators=(",", ":"))
  * stream chunks: "data: " + model_dump_json(exclude_unset=True) + "\\n\\n"
  * usage chunks: chat exclude_unset+exclude_none, completion exclude_none
  * stream errors: json.dumps(ErrorResponse.model_dump()) (default separators,
    ensure_ascii=True)
The Go tests compare the package's output with these bytes; they never run
Python.
"""
import json
import time
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_serializer


class OpenAIBaseModel(BaseModel):
    model_config = ConfigDict(extra="allow")


class ErrorInfo(OpenAIBaseModel):
    message: str
    type: str
    param: str | None = None
    code: int


class ErrorResponse(OpenAIBaseModel):
    error: ErrorInfo


class ModelPermission(OpenAIBaseModel):
    id: str
    object: str = "model_permission"
    created: int = Field(default_factory=lambda: int(time.time()))
    allow_create_engine: bool = False
    allow_sampling: bool = True
    allow_logprobs: bool = True
    allow_search_indices: bool = False
    allow_view: bool = True
    allow_fine_tuning: bool = False
    organization: str = "*"
    group: str | None = None
    is_blocking: bool = False


class ModelCard(OpenAIBaseModel):
    id: str
    object: str = "model"
    created: int = Field(default_factory=lambda: int(time.time()))
    owned_by: str = "vllm"
    root: str | None = None
    parent: str | None = None
    max_model_len: int | None = None
    permission: list[ModelPermission] = Field(default_factory=list)


class ModelList(OpenAIBaseModel):
    object: str = "list"
    data: list[ModelCard] = Field(default_factory=list)


class PromptTokenUsageInfo(OpenAIBaseModel):
    cached_tokens: int | None = None
    multimodal_tokens: dict[str, int] | None = None


class UsageInfo(OpenAIBaseModel):
    prompt_tokens: int = 0
    total_tokens: int = 0
    completion_tokens: int | None = 0
    prompt_tokens_details: PromptTokenUsageInfo | None = None


class PerRequestMetrics(OpenAIBaseModel):
    time_to_first_token_ms: float | None = None


class ChatMessage(OpenAIBaseModel):
    role: str
    content: str | None = None
    refusal: str | None = None
    annotations: Any | None = None
    audio: Any | None = None
    function_call: Any | None = None
    tool_calls: list[Any] = Field(default_factory=list)
    reasoning: str | None = None

    @model_serializer(mode="wrap")
    def _serialize(self, handler):
        data = handler(self)
        if len(data.get("tool_calls", [])) == 0:
            data.pop("tool_calls", None)
        return data


class ChatCompletionResponseChoice(OpenAIBaseModel):
    index: int
    message: ChatMessage
    logprobs: Any | None = None
    finish_reason: str | None = "stop"
    stop_reason: int | str | None = None
    token_ids: list[int] | None = None
    routed_experts: str | None = None


class ChatCompletionResponse(OpenAIBaseModel):
    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[ChatCompletionResponseChoice]
    service_tier: str | None = None
    system_fingerprint: str | None = None
    usage: UsageInfo
    prompt_logprobs: Any | None = None
    prompt_token_ids: list[int] | None = None
    prompt_text: str | None = None
    kv_transfer_params: dict[str, Any] | None = None
    ec_transfer_params: dict[str, Any] | None = None
    metrics: PerRequestMetrics | None = None


class DeltaMessage(OpenAIBaseModel):
    role: str | None = None
    content: str | None = None
    reasoning: str | None = None
    tool_calls: list[Any] = Field(default_factory=list)

    @model_serializer(mode="wrap")
    def _serialize(self, handler):
        data = handler(self)
        if len(data.get("tool_calls", [])) == 0:
            data.pop("tool_calls", None)
        return data


class ChatCompletionResponseStreamChoice(OpenAIBaseModel):
    index: int
    delta: DeltaMessage
    logprobs: Any | None = None
    finish_reason: str | None = None
    stop_reason: int | str | None = None
    token_ids: list[int] | None = None


class ChatCompletionStreamResponse(OpenAIBaseModel):
    id: str
    object: Literal["chat.completion.chunk"] = "chat.completion.chunk"
    created: int
    model: str
    choices: list[ChatCompletionResponseStreamChoice]
    usage: UsageInfo | None = Field(default=None)
    system_fingerprint: str | None = None
    prompt_token_ids: list[int] | None = None
    prompt_text: str | None = None
    metrics: PerRequestMetrics | None = None


class CompletionResponseChoice(OpenAIBaseModel):
    index: int
    text: str
    logprobs: Any | None = None
    finish_reason: str | None = None
    stop_reason: int | str | None = None
    token_ids: list[int] | None = None
    prompt_logprobs: Any | None = None
    prompt_token_ids: list[int] | None = None
    routed_experts: str | None = None


class CompletionResponse(OpenAIBaseModel):
    id: str
    object: Literal["text_completion"] = "text_completion"
    created: int
    model: str
    choices: list[CompletionResponseChoice]
    service_tier: str | None = None
    system_fingerprint: str | None = None
    usage: UsageInfo
    kv_transfer_params: dict[str, Any] | None = None
    ec_transfer_params: dict[str, Any] | None = None
    metrics: PerRequestMetrics | None = None


class CompletionResponseStreamChoice(OpenAIBaseModel):
    index: int
    text: str
    logprobs: Any | None = None
    finish_reason: str | None = None
    stop_reason: int | str | None = None
    prompt_token_ids: list[int] | None = None
    token_ids: list[int] | None = None


class CompletionStreamResponse(OpenAIBaseModel):
    id: str
    object: str = "text_completion"
    created: int
    model: str
    choices: list[CompletionResponseStreamChoice]
    usage: UsageInfo | None = Field(default=None)
    system_fingerprint: str | None = None
    metrics: PerRequestMetrics | None = None


class TokenizeResponse(OpenAIBaseModel):
    count: int
    max_model_len: int
    tokens: list[int]
    token_strs: list[str] | None = None


class DetokenizeResponse(OpenAIBaseModel):
    prompt: str


def json_response(model) -> bytes:  # starlette.responses.JSONResponse.render
    return json.dumps(model.model_dump(), ensure_ascii=False, allow_nan=False,
                      indent=None, separators=(",", ":")).encode("utf-8")


def sse(data: str) -> bytes:
    return f"data: {data}\n\n".encode("utf-8")


FILES = {}


def fixture(name: str, source: str, payload: bytes):
    FILES[name] = (source, payload)


CHAT_ID = "chatcmpl-a47c93077b0e387a"  # id of the v0.26.0 capture (vllm.md 5.1)
CMPL_ID = "cmpl-5c0ffee5c0ffee00"
CREATED = 1753106400
FP = "vllm-0.26.0-2844599c"  # fingerprint of the v0.26.0 capture
GPT = "openai/gpt-oss-120b"
QWEN = "Qwen/Qwen3-8B"
HTML = '<b>Tom & Jerry</b> \u2014 \u201cquoted\u201d\nline\u2028sep\tend \\ "q" \x01\x7f caf\u00e9 \U0001F600'

# ---- non-streaming chat (chat_completion_full_generator) ----
fixture("chat_completion.txt",
        "v0.26.0 capture (vllm.md 5.1) with the simulator's content: content text and reasoning null "
        "instead of the capture's null content and reasoning text; id, model, finish_reason, usage and "
        "system_fingerprint as captured; created chosen.",
        json_response(ChatCompletionResponse(
            id=CHAT_ID, created=CREATED, model=GPT,
            choices=[ChatCompletionResponseChoice(
                index=0, message=ChatMessage(role="assistant", reasoning=None, content="Hello! How can I help you today?"),
                logprobs=None, finish_reason="length", stop_reason=None, token_ids=None, routed_experts=None)],
            usage=UsageInfo(prompt_tokens=71, completion_tokens=16, total_tokens=87),
            system_fingerprint=FP, prompt_logprobs=None, prompt_token_ids=None, prompt_text=None,
            kv_transfer_params=None, ec_transfer_params=None, metrics=None)))

usage_cached = UsageInfo(prompt_tokens=1200, completion_tokens=35, total_tokens=1235)
usage_cached.prompt_tokens_details = PromptTokenUsageInfo(cached_tokens=1184)
fixture("chat_completion_cached.txt",
        "ChatCompletionResponse as chat_completion_full_generator builds it with "
        "--enable-prompt-tokens-details, a stop-string stop_reason, --fingerprint-mode none "
        "(system_fingerprint null) and content that needs escaping.",
        json_response(ChatCompletionResponse(
            id="chatcmpl-0123456789abcdef", created=CREATED, model=QWEN,
            choices=[ChatCompletionResponseChoice(
                index=0, message=ChatMessage(role="assistant", reasoning=None, content=HTML),
                logprobs=None, finish_reason="stop", stop_reason="</answer>", token_ids=None, routed_experts=None)],
            usage=usage_cached, system_fingerprint=None, prompt_logprobs=None, prompt_token_ids=None,
            prompt_text=None, kv_transfer_params=None, ec_transfer_params=None, metrics=None)))

# ---- non-streaming completion (request_output_to_completion_response) ----
u = UsageInfo(prompt_tokens=7, completion_tokens=2, total_tokens=9)
u.prompt_tokens_details = PromptTokenUsageInfo(cached_tokens=0)
fixture("completion.txt",
        "CompletionResponse as request_output_to_completion_response builds it, prompt tokens details "
        "enabled with nothing cached, stop-token stop_reason.",
        json_response(CompletionResponse(
            id=CMPL_ID, created=CREATED, model=QWEN,
            choices=[CompletionResponseChoice(
                index=0, text=" Paris.", logprobs=None, finish_reason="stop", stop_reason=151645,
                prompt_logprobs=None, prompt_token_ids=None, token_ids=None, routed_experts=None)],
            usage=u, system_fingerprint=FP, kv_transfer_params=None, ec_transfer_params=None, metrics=None)))

# ---- chat stream (chat_completion_stream_generator) ----


def chat_chunk(choice, **kw):
    return ChatCompletionStreamResponse(id=CHAT_ID, object="chat.completion.chunk", created=CREATED,
                                        choices=[choice], model=QWEN, **kw)


def role_chunk(usage=None):
    c = chat_chunk(ChatCompletionResponseStreamChoice(index=0, delta=DeltaMessage(role="assistant", content=""),
                                                      logprobs=None, finish_reason=None),
                   prompt_token_ids=None, prompt_text=None)
    if usage is not None:
        c.usage = usage
    return sse(c.model_dump_json(exclude_unset=True))


fixture("chat_chunk_role.txt", "first chunk of chat_completion_stream_generator (role, empty content).",
        role_chunk())
fixture("chat_chunk_role_continuous.txt",
        "first chunk with stream_options.continuous_usage_stats (usage with completion_tokens 0).",
        role_chunk(UsageInfo(prompt_tokens=33, completion_tokens=0, total_tokens=33)))


def content_chunk(text, usage=None):
    c = chat_chunk(ChatCompletionResponseStreamChoice(index=0, delta=DeltaMessage(content=text), logprobs=None,
                                                      finish_reason=None, token_ids=None))
    if usage is not None:
        c.usage = usage
    return sse(c.model_dump_json(exclude_unset=True))


fixture("chat_chunk_content.txt", "token-by-token chunk (finish_reason None branch).", content_chunk(" fast"))
fixture("chat_chunk_content_escape.txt", "content chunk whose text needs JSON escaping.", content_chunk(HTML))
fixture("chat_chunk_content_continuous.txt",
        "content chunk with continuous usage; same shape as the capture in vLLM PR #45678 "
        "(which had return_token_ids on).",
        content_chunk(" fast", UsageInfo(prompt_tokens=16, completion_tokens=20, total_tokens=36)))


def finish_chunk(text, reason, stop_reason, fingerprint=None, usage=None):
    c = chat_chunk(ChatCompletionResponseStreamChoice(index=0, delta=DeltaMessage(content=text), logprobs=None,
                                                      finish_reason=reason, stop_reason=stop_reason, token_ids=None))
    if fingerprint is not None:  # only when no usage chunk follows
        c.system_fingerprint = fingerprint
    if usage is not None:
        c.usage = usage
    return sse(c.model_dump_json(exclude_unset=True))


fixture("chat_chunk_finish.txt", "finish chunk without include_usage: carries system_fingerprint.",
        finish_chunk("", "stop", None, fingerprint=FP))
fixture("chat_chunk_finish_usage.txt",
        "finish chunk with include_usage (the usage chunk carries the fingerprint); last text and a stop "
        "token id ride on it.",
        finish_chunk("!", "stop", 151645))
fixture("chat_chunk_finish_continuous.txt", "finish chunk with continuous usage, finish_reason length.",
        finish_chunk(".", "length", None, usage=UsageInfo(prompt_tokens=16, completion_tokens=21, total_tokens=37)))


def chat_usage_chunk(usage, fp):
    c = ChatCompletionStreamResponse(id=CHAT_ID, object="chat.completion.chunk", created=CREATED, choices=[],
                                     model=QWEN, usage=usage, system_fingerprint=fp, metrics=None)
    return sse(c.model_dump_json(exclude_unset=True, exclude_none=True))


fixture("chat_chunk_usage.txt", "final usage chunk, prompt tokens details disabled.",
        chat_usage_chunk(UsageInfo(prompt_tokens=16, completion_tokens=20, total_tokens=36,
                                   prompt_tokens_details=None), FP))
uc = UsageInfo(prompt_tokens=16, completion_tokens=20, total_tokens=36)
uc.prompt_tokens_details = PromptTokenUsageInfo(cached_tokens=0, multimodal_tokens=None)
fixture("chat_chunk_usage_cached.txt",
        "final usage chunk with --enable-prompt-tokens-details and nothing cached (cached_tokens 0 is sent).",
        chat_usage_chunk(uc, FP))

# ---- completion stream (completion_stream_generator) ----


def cmpl_chunk(text, reason=None, stop_reason=None, fingerprint=None, usage=None):
    c = CompletionStreamResponse(id=CMPL_ID, object="text_completion", created=CREATED, model=QWEN,
                                 choices=[CompletionResponseStreamChoice(
                                     index=0, text=text, logprobs=None, finish_reason=reason,
                                     stop_reason=stop_reason, prompt_token_ids=None, token_ids=None)])
    if fingerprint is not None:
        c.system_fingerprint = fingerprint
    if usage is not None:
        c.usage = usage
    return sse(c.model_dump_json(exclude_unset=True))


fixture("completion_chunk_content.txt", "completion stream chunk.", cmpl_chunk(" Paris"))
fixture("completion_chunk_content_continuous.txt", "completion chunk with continuous usage.",
        cmpl_chunk(" Paris", usage=UsageInfo(prompt_tokens=7, completion_tokens=1, total_tokens=8)))
fixture("completion_chunk_finish.txt", "completion finish chunk without include_usage (fingerprint).",
        cmpl_chunk(".", "length", None, fingerprint=FP))
fixture("completion_chunk_finish_usage.txt", "completion finish chunk with include_usage, stop string.",
        cmpl_chunk("", "stop", "\n\n"))


def cmpl_usage_chunk(usage, fp):
    c = CompletionStreamResponse(id=CMPL_ID, created=CREATED, model=QWEN, choices=[], usage=usage,
                                 system_fingerprint=fp, metrics=None)
    return sse(c.model_dump_json(exclude_unset=False, exclude_none=True))


fixture("completion_chunk_usage.txt", "completion usage chunk, details disabled, --fingerprint-mode none.",
        cmpl_usage_chunk(UsageInfo(prompt_tokens=7, completion_tokens=2, total_tokens=9), None))
ucc = UsageInfo(prompt_tokens=7, completion_tokens=2, total_tokens=9)
ucc.prompt_tokens_details = PromptTokenUsageInfo(cached_tokens=4)
fixture("completion_chunk_usage_cached.txt", "completion usage chunk with prompt tokens details.",
        cmpl_usage_chunk(ucc, FP))

fixture("done.txt", "the event that ends every stream.", b"data: [DONE]\n\n")

# ---- errors ----
fixture("error_model_not_found.txt",
        "_check_model for an unknown model (vllm.md 5.5): 404 NotFoundError, param model.",
        json_response(ErrorResponse(error=ErrorInfo(message="The model `gpt-4` does not exist.",
                                                    type="NotFoundError", param="model", code=404))))
fixture("error_max_tokens.txt",
        "real body captured 2026-09-04 from vLLM serving openai/gpt-oss-20b (quoted in a public repo): "
        "VLLMValidationError from SamplingParams through create_error_response.",
        json_response(ErrorResponse(error=ErrorInfo(
            message="max_tokens must be at least 1, got -46771. (parameter=max_tokens, value=-46771)",
            type="BadRequestError", param="max_tokens", code=400))))
fixture("error_body_parse.txt",
        "FastAPI HTTPException for an undecodable body through vLLM's http_exception_handler.",
        json_response(ErrorResponse(error=ErrorInfo(message="There was an error parsing the body",
                                                    type="Bad Request", param=None, code=400))))
fixture("error_stream.txt",
        "create_streaming_error_response: json.dumps(ErrorResponse.model_dump()) with default separators "
        "and ensure_ascii.",
        sse(json.dumps(ErrorResponse(error=ErrorInfo(message="boom: " + HTML, type="BadRequestError",
                                                     param="max_tokens", code=400)).model_dump())))

# ---- models and version ----
fixture("models.txt",
        "GET /v1/models: ModelList of a base model card and a LoRA card (parent set, max_model_len null).",
        json_response(ModelList(data=[
            ModelCard(id=QWEN, created=CREATED, root="/models/Qwen3-8B", max_model_len=32768,
                      permission=[ModelPermission(id="modelperm-9f3b2c1d0e4a5b6c", created=CREATED)]),
            ModelCard(id="sql-lora", created=CREATED, root="/adapters/sql-lora", parent=QWEN,
                      permission=[ModelPermission(id="modelperm-0a1b2c3d4e5f6a7b", created=CREATED)]),
        ])))
fixture("version.txt", "GET /version: JSONResponse({'version': VLLM_VERSION}).",
        json.dumps({"version": "0.26.0"}, ensure_ascii=False, separators=(",", ":")).encode())

# ---- /tokenize and /detokenize (serve/tokenize: JSONResponse(model_dump())) ----
fixture("tokenize.txt", "TokenizeResponse without return_token_strs (token_strs null).",
        json_response(TokenizeResponse(count=3, max_model_len=40960, tokens=[151644, 872, 198], token_strs=None)))
fixture("tokenize_empty.txt", "TokenizeResponse of an empty prompt.",
        json_response(TokenizeResponse(count=0, max_model_len=8, tokens=[], token_strs=None)))
fixture("detokenize.txt", "DetokenizeResponse whose text needs escaping.",
        json_response(DetokenizeResponse(prompt=HTML)))

for name, (source, payload) in FILES.items():
    with open(name, "wb") as f:
        f.write(b"# Generated by gen_fixtures.py; do not edit.\n")
        f.write(b"# Source: " + source.encode() + b"\n")
        f.write(payload + b"\n")
print(f"wrote {len(FILES)} fixtures")

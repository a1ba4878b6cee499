#!/usr/bin/env python3
"""Regenerates validation_golden.jsonl: what vLLM's request models decide for
a corpus of request bodies (accepted, or rejected with which param).

Run from this directory with pydantic 2 (2.13.4 was used):
    python3 gen_validation.py

The models mirror the type-checked subset of vLLM's ChatCompletionRequest and
CompletionRequest (chat_completion/protocol.py and completion/protocol.py @
002032ee2b18; StreamOptions and validate_cache_salt from
generate/base/protocol.py @ 022e555dbb75) with their mode="before" validators
copied in definition order, so pydantic runs them as vLLM's server does.
messages is simplified to list[dict]; the corpus only sends valid messages.
Body handling mirrors FastAPI + vLLM's validation_exception_handler
(frontend/entrypoints/serve/exception_handling/handlers/validation.py @
055e47c28003): JSON errors -> param "body.<pos>", undecodable body -> no
param, non-object -> "body", pydantic errors -> the VLLMValidationError's
parameter, else the first error's loc without pydantic's internal markers.
"""
import json
import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


class VLLMValidationError(ValueError):
    def __init__(self, message, *, parameter=None, value=None):
        super().__init__(message)
        self.parameter = parameter
        self.value = value


class Base(BaseModel):
    model_config = ConfigDict(extra="allow")


class StreamOptions(Base):
    include_usage: bool | None = False
    continuous_usage_stats: bool | None = False


def validate_cache_salt(cache_salt):
    if cache_salt is None:
        return
    if not isinstance(cache_salt, str) or not cache_salt:
        raise VLLMValidationError("Parameter 'cache_salt' must be a non-empty string if provided.", parameter="cache_salt")
    if len(cache_salt) > 128 or any(c in frozenset("@/\\\x00") for c in cache_salt):
        raise VLLMValidationError("bad salt", parameter="cache_salt")


StopParam = str | list[str] | None


# Fields in vLLM's declaration order: pydantic reports field errors in that
# order, and vLLM's handler takes the first error's loc as param.
class Chat(Base):
    messages: list[dict[str, Any]]
    model: str | None = None
    frequency_penalty: float | None = None
    logit_bias: dict[str, float] | None = None
    logprobs: bool | None = False
    top_logprobs: int | None = 0
    max_tokens: int | None = None
    max_completion_tokens: int | None = None
    n: int | None = 1
    presence_penalty: float | None = None
    response_format: dict[str, Any] | None = None
    seed: int | None = Field(None, ge=_INT64_MIN, le=_INT64_MAX)
    stop: StopParam = []
    stream: bool | None = False
    stream_options: StreamOptions | None = None
    temperature: float | None = None
    top_p: float | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: Literal["none"] | Literal["auto"] | Literal["required"] | dict[str, Any] | None = "none"
    include_reasoning: bool = True
    parallel_tool_calls: bool | None = True
    user: str | None = None
    use_beam_search: bool = False
    top_k: int | None = None
    min_p: float | None = None
    repetition_penalty: float | None = None
    length_penalty: float = 1.0
    stop_token_ids: list[int] | None = []
    include_stop_str_in_output: bool = False
    ignore_eos: bool = False
    min_tokens: int = 0
    skip_special_tokens: bool = True
    spaces_between_special_tokens: bool = True
    prompt_logprobs: int | None = None
    logprob_token_ids: list[int] | None = None
    echo: bool = False
    add_generation_prompt: bool = True
    continue_final_message: bool = False
    add_special_tokens: bool = False
    chat_template: str | None = None
    chat_template_kwargs: dict[str, Any] | None = None
    priority: int = Field(default=0, ge=_INT64_MIN, le=_INT64_MAX)
    request_id: str = "random"
    return_token_ids: bool | None = None
    cache_salt: str | None = Field(default=None, min_length=1, max_length=1024)
    best_of: int | None = None  # not a vLLM chat field; kept by inferrail to refuse > 1

    @model_validator(mode="before")
    @classmethod
    def check_cache_salt_support(cls, data):
        if not isinstance(data, dict):
            return data
        validate_cache_salt(data.get("cache_salt"))
        return data

    @model_validator(mode="before")
    @classmethod
    def validate_response_format(cls, data):
        if not isinstance(data, dict):
            return data
        rf = data.get("response_format")
        if rf is None:
            return data
        rf_type = rf.get("type") if isinstance(rf, dict) else getattr(rf, "type", None)
        if rf_type == "json_schema":
            js = rf.get("json_schema") if isinstance(rf, dict) else getattr(rf, "json_schema", None)
            if js is None:
                raise VLLMValidationError("json_schema", parameter="response_format")
        return data

    @model_validator(mode="before")
    @classmethod
    def validate_stream_options(cls, data):
        if not isinstance(data, dict):
            return data
        if data.get("stream_options") and not data.get("stream"):
            raise VLLMValidationError("stream options", parameter="stream_options")
        return data

    @model_validator(mode="before")
    @classmethod
    def check_logprobs(cls, data):
        if not isinstance(data, dict):
            return data
        if data.get("logprob_token_ids") is not None:
            if not isinstance(data["logprob_token_ids"], list):
                return data
            if not data["logprob_token_ids"]:
                raise VLLMValidationError("empty", parameter="logprob_token_ids")
            if data.get("use_beam_search"):
                raise VLLMValidationError("beam", parameter="logprob_token_ids")
            if not data.get("logprobs"):
                raise VLLMValidationError("logprobs", parameter="logprob_token_ids")
        for field_name in ("prompt_logprobs", "top_logprobs"):
            field_value = data.get(field_name)
            if field_value is not None and not isinstance(field_value, (int, float)):
                raise VLLMValidationError("int", parameter=field_name, value=field_value)
        if (prompt_logprobs := data.get("prompt_logprobs")) is not None:
            if data.get("stream") and (prompt_logprobs > 0 or prompt_logprobs == -1):
                raise VLLMValidationError("stream", parameter="prompt_logprobs")
            if prompt_logprobs < 0 and prompt_logprobs != -1:
                raise VLLMValidationError("neg", parameter="prompt_logprobs", value=prompt_logprobs)
        if (top_logprobs := data.get("top_logprobs")) is not None:
            if top_logprobs < 0 and top_logprobs != -1:
                raise VLLMValidationError("neg", parameter="top_logprobs", value=top_logprobs)
            if (top_logprobs == -1 or top_logprobs > 0) and not data.get("logprobs"):
                raise VLLMValidationError("need logprobs", parameter="top_logprobs")
        return data

    @model_validator(mode="before")
    @classmethod
    def check_tool_usage(cls, data):
        if not isinstance(data, dict):
            return data
        if data.get("tools") == []:
            raise VLLMValidationError("empty tools", parameter="tools")
        if "tool_choice" not in data and data.get("tools"):
            data["tool_choice"] = "auto"
        if "tool_choice" in data and data["tool_choice"] == "none":
            return data
        if "tool_choice" in data and data["tool_choice"] is not None:
            if "tools" not in data or data["tools"] is None:
                raise VLLMValidationError("need tools", parameter="tool_choice")
            if data["tool_choice"] not in ["auto", "required"] and not isinstance(data["tool_choice"], dict):
                raise VLLMValidationError("bad choice", parameter="tool_choice")
            if isinstance(data["tool_choice"], dict):
                function = data["tool_choice"].get("function")
                if not isinstance(function, dict):
                    raise VLLMValidationError("fn", parameter="tool_choice.function")
                if "name" not in function:
                    raise VLLMValidationError("name", parameter="tool_choice.function.name")
                name = function["name"]
                if not isinstance(name, str) or len(name) == 0:
                    raise VLLMValidationError("name", parameter="tool_choice.function.name")
                if not any(t["function"]["name"] == name for t in data["tools"]):
                    raise VLLMValidationError("nomatch", parameter="tool_choice")
        return data

    @model_validator(mode="before")
    @classmethod
    def check_generation_prompt(cls, data):
        if not isinstance(data, dict):
            return data
        if data.get("continue_final_message") and data.get("add_generation_prompt"):
            raise VLLMValidationError("both")
        return data


class Completion(Base):
    model: str | None = None
    prompt: list[Annotated[int, Field(ge=0)]] | list[list[Annotated[int, Field(ge=0)]]] | str | list[str] | None = None
    echo: bool | None = False
    frequency_penalty: float | None = None
    logit_bias: dict[str, float] | None = None
    logprobs: int | None = None
    max_tokens: int | None = 16
    n: int = 1
    presence_penalty: float | None = None
    seed: int | None = Field(None, ge=_INT64_MIN, le=_INT64_MAX)
    stop: StopParam = []
    stream: bool | None = False
    stream_options: StreamOptions | None = None
    suffix: str | None = None
    temperature: float | None = None
    top_p: float | None = None
    user: str | None = None
    use_beam_search: bool = False
    top_k: int | None = None
    min_p: float | None = None
    repetition_penalty: float | None = None
    length_penalty: float = 1.0
    stop_token_ids: list[int] | None = []
    include_stop_str_in_output: bool = False
    ignore_eos: bool = False
    min_tokens: int = 0
    skip_special_tokens: bool = True
    spaces_between_special_tokens: bool = True
    prompt_logprobs: int | None = None
    logprob_token_ids: list[int] | None = None
    prompt_embeds: bytes | list[bytes] | None = None
    add_special_tokens: bool = True
    response_format: dict[str, Any] | None = None
    priority: int = Field(default=0, ge=_INT64_MIN, le=_INT64_MAX)
    request_id: str = "random"
    return_token_ids: bool | None = None
    cache_salt: str | None = Field(default=None, min_length=1, max_length=1024)
    best_of: int | None = None  # dropped from newer vLLM; kept by inferrail to refuse > 1

    @model_validator(mode="before")
    @classmethod
    def check_cache_salt_support(cls, data):
        if not isinstance(data, dict):
            return data
        validate_cache_salt(data.get("cache_salt"))
        return data

    @model_validator(mode="before")
    @classmethod
    def normalize_null_max_tokens(cls, data):
        if isinstance(data, dict) and data.get("max_tokens") is None:
            data = data.copy()
            data["max_tokens"] = 16
        return data

    @model_validator(mode="before")
    @classmethod
    def validate_response_format(cls, data):
        return Chat.validate_response_format.__func__(cls, data)

    @model_validator(mode="before")
    @classmethod
    def check_logprobs(cls, data):
        if not isinstance(data, dict):
            return data
        if data.get("logprob_token_ids") is not None:
            if not isinstance(data["logprob_token_ids"], list):
                return data
            if not data["logprob_token_ids"]:
                raise VLLMValidationError("empty", parameter="logprob_token_ids")
            if data.get("use_beam_search"):
                raise VLLMValidationError("beam", parameter="logprob_token_ids")
            if data.get("echo") and data.get("max_tokens") == 0:
                raise VLLMValidationError("echo", parameter="logprob_token_ids")
            if data.get("logprobs") is None:
                raise VLLMValidationError("need", parameter="logprob_token_ids")
        for field_name in ("prompt_logprobs", "logprobs"):
            field_value = data.get(field_name)
            if field_value is not None and not isinstance(field_value, (int, float)):
                raise VLLMValidationError("int", parameter=field_name, value=field_value)
        if (prompt_logprobs := data.get("prompt_logprobs")) is not None:
            if data.get("stream") and (prompt_logprobs > 0 or prompt_logprobs == -1):
                raise VLLMValidationError("stream", parameter="prompt_logprobs")
            if prompt_logprobs < 0 and prompt_logprobs != -1:
                raise VLLMValidationError("neg", parameter="prompt_logprobs", value=prompt_logprobs)
        if (logprobs := data.get("logprobs")) is not None and logprobs < 0 and logprobs != -1:
            raise VLLMValidationError("neg", parameter="logprobs", value=logprobs)
        return data

    @model_validator(mode="before")
    @classmethod
    def validate_stream_options(cls, data):
        return Chat.validate_stream_options.__func__(cls, data)

    @model_validator(mode="before")
    @classmethod
    def validate_prompt_and_prompt_embeds(cls, data):
        if not isinstance(data, dict):
            return data
        prompt = data.get("prompt")
        pe = data.get("prompt_embeds")
        if (prompt is None or (isinstance(prompt, str) and prompt == "")) and (
                pe is None or (isinstance(pe, list) and len(pe) == 0)):
            raise VLLMValidationError("need prompt", parameter="prompt")
        return data


_BRACKETED = re.compile(r"[\[\]{}()]")
_MARKERS = {"function-wrap", "function-after", "function-before", "function-plain", "json-or-python",
            "lax-or-strict", "chain", "default", "nullable", "tagged-union", "union", "call", "arguments",
            "is-instance", "is-subclass", "callable", "str", "int", "float", "bool", "bytes", "bytearray",
            "list", "tuple", "dict", "set", "frozenset", "complex", "none", "nonetype"}


def clean_loc(loc):
    parts = [str(p) for p in loc if not (_BRACKETED.search(str(p)) or str(p).lower() in _MARKERS)]
    return ".".join(parts) if parts else ".".join(str(p) for p in loc)


def decide(model, body: bytes):
    if not body:
        return 400, "body"
    try:
        data = json.loads(body)
    except json.JSONDecodeError as e:
        return 400, f"body.{e.pos}"
    except Exception:
        return 400, None
    if data is None:
        return 400, "body"
    try:
        model.model_validate(data)
    except ValidationError as e:
        errs = e.errors()
        for err in errs:
            if isinstance(err.get("ctx", {}).get("error"), VLLMValidationError):
                return 400, err["ctx"]["error"].parameter or "body"
        return 400, clean_loc(("body",) + tuple(errs[0]["loc"]))
    return 200, None


M = '"messages":[{"role":"user","content":"hi"}]'
CHAT = [
    '{' + M + '}', '{"model":"m",' + M + ',"max_tokens":16}',
    '{' + M + ',"max_tokens":"12"}', '{' + M + ',"max_tokens":" +1_2 "}', '{' + M + ',"max_tokens":"1.0"}',
    '{' + M + ',"max_tokens":"1.5"}', '{' + M + ',"max_tokens":1.0}', '{' + M + ',"max_tokens":1.5}',
    '{' + M + ',"max_tokens":true}', '{' + M + ',"max_tokens":null}', '{' + M + ',"max_tokens":[]}',
    '{' + M + ',"max_tokens":NaN}', '{' + M + ',"max_tokens":1e3}', '{' + M + ',"max_tokens":"1e3"}',
    '{' + M + ',"stream":"yes"}', '{' + M + ',"stream":"On"}', '{' + M + ',"stream":" true"}',
    '{' + M + ',"stream":2}', '{' + M + ',"stream":1.0}', '{' + M + ',"stream":0.5}', '{' + M + ',"stream":null}',
    '{' + M + ',"echo":null}', '{' + M + ',"echo":"false"}', '{' + M + ',"ignore_eos":"n"}',
    '{' + M + ',"temperature":"0.7"}', '{' + M + ',"temperature":"1_0"}', '{' + M + ',"temperature":"0x1p3"}',
    '{' + M + ',"temperature":"inf"}', '{' + M + ',"temperature":true}', '{' + M + ',"temperature":Infinity}',
    '{' + M + ',"temperature":[1]}', '{' + M + ',"model":5}', '{' + M + ',"user":null}', '{' + M + ',"request_id":null}',
    '{' + M + ',"request_id":7}', '{' + M + ',"seed":9223372036854775807}', '{' + M + ',"seed":-9223372036854775808}',
    '{' + M + ',"priority":"3"}', '{' + M + ',"min_tokens":null}', '{' + M + ',"length_penalty":null}',
    '{' + M + ',"stop":"x"}', '{' + M + ',"stop":null}', '{' + M + ',"stop":["a","b"]}',
    '{' + M + ',"stop_token_ids":[1,"2"]}', '{' + M + ',"stop_token_ids":["x"]}', '{' + M + ',"logit_bias":{"1":2}}',
    '{' + M + ',"logit_bias":{"1":"x"}}', '{' + M + ',"logit_bias":[]}',
    '{' + M + ',"stream_options":{"include_usage":true}}', '{' + M + ',"stream_options":{}}',
    '{' + M + ',"stream_options":null}', '{' + M + ',"stream":true,"stream_options":{"include_usage":"x"}}',
    '{' + M + ',"stream":"false","stream_options":{"include_usage":true}}', '{' + M + ',"stream":0,"stream_options":{"a":1}}',
    '{' + M + ',"stream":true,"stream_options":"yes"}', '{' + M + ',"stream":true,"stream_options":[1]}',
    '{' + M + ',"stream_options":"yes"}',
    '{' + M + ',"continue_final_message":true,"add_generation_prompt":true}',
    '{' + M + ',"continue_final_message":1,"add_generation_prompt":"x"}', '{' + M + ',"continue_final_message":true}',
    '{' + M + ',"add_generation_prompt":null}', '{' + M + ',"cache_salt":""}', '{' + M + ',"cache_salt":5}',
    '{' + M + ',"cache_salt":"a@b"}', '{' + M + ',"cache_salt":"ok-salt"}', '{' + M + ',"cache_salt":null}',
    '{' + M + ',"top_logprobs":2}', '{' + M + ',"top_logprobs":2,"logprobs":true}', '{' + M + ',"top_logprobs":-1}',
    '{' + M + ',"top_logprobs":"x"}', '{' + M + ',"top_logprobs":-2}', '{' + M + ',"top_logprobs":1.5,"logprobs":true}',
    '{' + M + ',"top_logprobs":true}', '{' + M + ',"logprobs":"yes"}', '{' + M + ',"logprobs":3}',
    '{' + M + ',"prompt_logprobs":1,"stream":true}', '{' + M + ',"prompt_logprobs":-5}', '{' + M + ',"prompt_logprobs":"1"}',
    '{' + M + ',"logprob_token_ids":[]}', '{' + M + ',"logprob_token_ids":[1]}', '{' + M + ',"logprob_token_ids":"x"}',
    '{' + M + ',"logprob_token_ids":[1],"logprobs":true,"use_beam_search":1}',
    '{' + M + ',"tools":[]}', '{' + M + ',"tool_choice":"auto"}', '{' + M + ',"tool_choice":"none"}',
    '{' + M + ',"tool_choice":null}', '{' + M + ',"tools":[{"function":{"name":"f"}}],"tool_choice":"bogus"}',
    '{' + M + ',"tools":[{"function":{"name":"f"}}],"tool_choice":{"function":{"name":"f"}}}',
    '{' + M + ',"tools":[{"function":{"name":"f"}}],"tool_choice":{"function":{"name":"g"}}}',
    '{' + M + ',"tools":[{"function":{"name":"f"}}],"tool_choice":{"function":{}}}',
    '{' + M + ',"tools":[{"function":{"name":"f"}}],"tool_choice":{"function":[]}}',
    '{' + M + ',"tools":[{"function":{"name":"f"}}],"tool_choice":{"function":{"name":""}}}',
    '{' + M + ',"tools":[{"function":{"name":"f"}}]}', '{' + M + ',"tools":"x","tool_choice":"none"}',
    '{' + M + ',"response_format":{"type":"json_schema"}}', '{' + M + ',"response_format":{"type":"json_object"}}',
    '{' + M + ',"response_format":"json"}', '{' + M + ',"n":null}', '{' + M + ',"n":"2"}', '{' + M + ',"best_of":"x"}',
    '{' + M + ',"chat_template_kwargs":[]}', '{' + M + ',"include_reasoning":null}', '{' + M + ',"parallel_tool_calls":null}',
    '{"model":"m"}', '{"messages":"hi"}', '{' + M + ',"unknown_field":{"x":[1,2,3]}}',
    '', '   ', 'null', '[]', '"x"', '{"model":', '{"a":1} x', '{"a":1,,}', '{"a":"\\x"}', '{"a":-}', b'{"a":"\xff"}',
    '{' + M + ',"temperature":NaN}', '{' + M + ',"max_tokens":-Infinity}',
    '{' + M + ',"stream":[],"n":"x"}', '{' + M + ',"cache_salt":"","stream":[],"n":"x"}',
    '{' + M + ',"echo":null,"max_tokens":"x","user":5}', '{"messages":5,"model":5}',
    '{' + M + ',"request_id":null,"priority":"x","ignore_eos":"x"}',
]
CMPL = [
    '{"prompt":"x"}', '{"prompt":""}', '{}', '{"prompt":null}', '{"prompt":[]}', '{"prompt":["a"]}',
    '{"prompt":[1,2]}', '{"prompt":[[1],[2]]}', '{"prompt":[-1]}', '{"prompt":[1,"a"]}', '{"prompt":5}',
    '{"prompt":[true]}', '{"prompt":[1.0]}', '{"prompt":null,"prompt_embeds":[]}', '{"prompt":null,"prompt_embeds":"AAAA"}',
    '{"prompt":"x","prompt_embeds":5}', '{"prompt":"x","max_tokens":null}', '{"prompt":"x","max_tokens":"x"}',
    '{"prompt":"x","n":null}', '{"prompt":"x","n":"1"}', '{"prompt":"x","echo":null}', '{"prompt":"x","echo":"yes"}',
    '{"prompt":"x","logprobs":-2}', '{"prompt":"x","logprobs":"1"}', '{"prompt":"x","logprobs":1.5}',
    '{"prompt":"x","logprob_token_ids":[1]}', '{"prompt":"x","logprob_token_ids":[1],"logprobs":0,"echo":true,"max_tokens":0}',
    '{"prompt":"x","stream_options":{"include_usage":true}}', '{"prompt":"x","stream":true,"stream_options":{"continuous_usage_stats":true}}',
    '{"prompt":"x","cache_salt":"a/b"}', '{"prompt":"x","suffix":3}', '{"prompt":"x","best_of":2}',
    '{"prompt":"x","stop":[1]}', '{"prompt":"","stream_options":{"a":1}}',
    '{"prompt":["a",1]}', '{"prompt":[[1],2]}', '{"prompt":[[1],"a"]}', '{"prompt":[1,[2]]}', '{"prompt":[[-1]]}',
    '{"prompt":["a",["b"]]}', '{"prompt":[null]}', '{"prompt":[{}]}', '{"prompt":{}}', '{"prompt":[[]]}',
    '{"prompt":"x","stop":"s"}', '{"prompt":"x","stop":["a",2]}', '{"prompt":"x","stop":5}',
    '{"prompt":5,"model":5}', '{"prompt":"x","n":null,"echo":"x","suffix":1}', '{"prompt":"x","best_of":"x","cache_salt":3}',
]

with open("validation_golden.jsonl", "w") as out:
    out.write(json.dumps({"note": "Generated by gen_validation.py; do not edit."}) + "\n")
    for endpoint, model, corpus in (("chat", Chat, CHAT), ("completion", Completion, CMPL)):
        for body in corpus:
            raw = body if isinstance(body, bytes) else body.encode()
            status, param = decide(model, raw)
            out.write(json.dumps({"endpoint": endpoint, "body": raw.decode("latin-1"), "status": status, "param": param}) + "\n")
print("ok")

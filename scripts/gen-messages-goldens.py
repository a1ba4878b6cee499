#!/usr/bin/env python3
"""Generate model/prompt/testdata/messages_goldens.jsonl: Anthropic Messages
bodies and the prompt vLLM renders and tokenizes for them with Qwen3.

This is an independent model of vLLM's Anthropic path, written from vLLM's
Python source at a8c3bdb20f5d (vllm/entrypoints/anthropic/protocol.py,
serving.py, inline_system.py) and the chat path it hands the converted
request to (ChatCompletionRequest.build_chat_params, chat_utils
_parse_chat_message_content / _postprocess_messages), not from the gateway's
Go code:

  1. a body is generated from a seeded PRNG (Claude-Code-shaped sessions,
     SDK-shaped chats, edge cases vLLM accepts);
  2. it is validated the way vLLM's pydantic models read it (defaults,
     input_schema's "type" appended);
  3. it is converted to the OpenAI chat request (normalize_inline_system,
     to_chat_completion_request), in both inline-system modes;
  4. the chat request is parsed as vLLM's chat path parses it for a template
     whose content format is "string" (Qwen3's): text parts joined with
     newlines, reasoning copied to reasoning_content, tool call arguments
     json.loads-ed, tools as ChatCompletionToolsParam.model_dump();
  5. it is rendered with the Qwen3 chat template through Python Jinja2,
     set up as transformers sets it up (the fixture generator's
     render_jinja2.py, imported from ../shared/fixtures/tokenizers);
  6. the rendered text is encoded with Rust tokenizers (add_special_tokens
     False) by scripts/messages-goldens-tokenize.mjs, whose npm packages this
     script installs into a scratch directory with --ignore-scripts.

usage: scripts/gen-messages-goldens.py [--out FILE] [--npm-dir DIR] [--cases N]
The output is deterministic: running it again gives a byte-identical file.
"""
import argparse
import copy
import json
import os
import random
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
QWEN3 = os.path.join(ROOT, "model", "token", "hf", "testdata", "qwen3")
SHARED = os.path.normpath(os.path.join(ROOT, "..", "shared", "fixtures", "tokenizers"))
NPM_PACKAGES = ["@anush008/tokenizers@0.6.0", "@anush008/tokenizers-linux-x64-gnu@0.6.0"]
SEED = 20261201
# The clock a tool_use without an id is named by (call_<unix seconds>); the
# Go test passes the same time.
NOW = 1700000000
MODEL = "Qwen/Qwen3-8B"

BILLING = "x-anthropic-billing-header"

# ---------------------------------------------------------------------------
# 2. The request as vLLM's pydantic models hold it.
# ---------------------------------------------------------------------------

BLOCK_FIELDS = ["type", "text", "source", "id", "tool_use_id", "name", "input", "content",
                "is_error", "tool_name", "thinking", "signature", "data"]
BLOCK_TYPES = {"text", "image", "tool_use", "tool_result", "tool_reference", "thinking",
               "redacted_thinking"}


class Obj:
    """A validated pydantic model: every declared field, None by default."""

    def __init__(self, fields, data):
        for f in fields:
            setattr(self, f, copy.deepcopy(data.get(f)))

    def copy_with(self, **update):
        c = copy.copy(self)
        for k, v in update.items():
            setattr(c, k, v)
        return c


def block(d):
    if d.get("type") not in BLOCK_TYPES:
        raise ValueError(f"block type {d.get('type')!r}")
    return Obj(BLOCK_FIELDS, d)


def content_of(c):
    return c if isinstance(c, str) else [block(b) for b in c]


# Claude Code's own roles. protocol.py at a8c3bdb has no mapping and
# answers 400; other vLLM versions (AnthropicMessage.normalize_role, e.g.
# 00589e56) read them as user, and so does this model of it.
ROLE_MAP = {"ctx": "user", "msg": "user"}


def message(d):
    role = ROLE_MAP.get(d["role"], d["role"])
    if role not in ("user", "assistant", "system"):
        raise ValueError(f"role {d['role']!r}")
    m = Obj(["role"], {"role": role})
    m.content = content_of(d["content"])
    return m


def tool(d):
    t = Obj(["name", "description", "input_schema", "strict", "defer_loading"], d)
    if not isinstance(t.input_schema, dict):
        raise ValueError("input_schema must be a dictionary")
    if "type" not in t.input_schema:
        t.input_schema["type"] = "object"
    return t


def validate(body, count):
    """The body as AnthropicMessagesRequest (or AnthropicCountTokensRequest)."""
    r = Obj(["model", "max_tokens", "stream", "thinking", "output_config", "tool_choice",
             "cache_salt", "kv_transfer_params", "chat_template_kwargs"], body)
    r.count = count
    if not r.model:
        raise ValueError("Model is required")
    if not count:
        if r.max_tokens is None or r.max_tokens <= 0:
            raise ValueError("max_tokens must be positive")
        th = r.thinking
        if th is not None and th["type"] == "enabled" and th["budget_tokens"] >= r.max_tokens:
            raise ValueError("thinking.budget_tokens must be less than max_tokens")
    else:
        r.thinking = r.output_config = None
    r.stream = bool(body.get("stream") or False)
    s = body.get("system")
    r.system = None if s is None else content_of(s)
    r.messages = [message(m) for m in body["messages"]]
    r.tools = None if body.get("tools") is None else [tool(t) for t in body["tools"]]
    return r


# ---------------------------------------------------------------------------
# 3. normalize_inline_system and to_chat_completion_request.
# ---------------------------------------------------------------------------

def join(*texts):
    return "\n\n".join(t for t in texts if t)


def blocks_text(blocks):
    return "".join(b.text for b in blocks
                   if b.type == "text" and b.text and not b.text.startswith(BILLING))


def system_text(m):
    if isinstance(m.content, str):
        return "" if m.content.startswith(BILLING) else m.content
    return blocks_text(m.content)


def system_prompt_text(r):
    if r.system is None or isinstance(r.system, str):
        return r.system or ""
    return blocks_text(r.system)


def field(item, key):
    return item.get(key) if isinstance(item, dict) else getattr(item, key)


def add_text(content, text, at_end, make):
    if content is None or isinstance(content, str):
        return join(content or "", text) if at_end else join(text, content or "")
    items = list(content)
    end = -1 if at_end else 0
    if items and field(items[end], "type") == "text":
        old = field(items[end], "text") or ""
        new = join(old, text) if at_end else join(text, old)
        it = items[end]
        items[end] = {**it, "text": new} if isinstance(it, dict) else it.copy_with(text=new)
    else:
        items.insert(len(items) if at_end else 0, make(text))
    return items


def text_block(t):
    return block({"type": "text", "text": t})


def append_to_user(m, text):
    blocks = m.content
    if isinstance(blocks, list) and blocks and all(b.type == "tool_result" for b in blocks):
        last = blocks[-1]
        folded = last.copy_with(content=add_text(last.content, text, True,
                                                 lambda t: {"type": "text", "text": t}))
        content = [*blocks[:-1], folded]
    else:
        own = blocks if isinstance(blocks, str) else [b for b in blocks if b.type != "tool_result"]
        content = add_text(own, text, True, text_block)
        if not isinstance(blocks, str):
            content = [b for b in blocks if b.type == "tool_result"] + content
    return m.copy_with(content=content)


def out_of_tool_runs(msgs):
    out, held, awaiting = [], [], False
    for m in msgs:
        if m.role == "system":
            (held if awaiting else out).append(m)
            continue
        if m.role == "assistant":
            out.extend(held)
            held.clear()
        out.append(m)
        if m.role == "user":
            out.extend(held)
            held.clear()
        awaiting = (m.role == "assistant" and isinstance(m.content, list)
                    and any(b.type == "tool_use" for b in m.content))
    out.extend(held)
    return out


def normalize_inline_system(r, mode):
    msgs = r.messages
    if all(m.role != "system" for m in msgs):
        return "", msgs
    n = 0
    while n < len(msgs) and msgs[n].role == "system":
        n += 1
    leading = join(*(system_text(m) for m in msgs[:n]))
    rest = out_of_tool_runs(msgs[n:])
    if mode == "preserve" and (system_prompt_text(r) or leading):
        return leading, rest
    out, pending = [], []
    for m in rest:
        if m.role == "system":
            text = system_text(m)
            if not text:
                continue
            if out and out[-1].role == "user" and not pending:
                out[-1] = append_to_user(out[-1], text)
            else:
                pending.append(text)
            continue
        if pending:
            text = join(*pending)
            pending.clear()
            if m.role == "user":
                m = m.copy_with(content=add_text(m.content, text, False, text_block))
            else:
                um = Obj(["role"], {"role": "user"})
                um.content = text
                out.append(um)
        out.append(m)
    if pending:
        um = Obj(["role"], {"role": "user"})
        um.content = join(*pending)
        out.append(um)
    return leading, out


def image_url(source):
    if source.get("type") == "url":
        return source.get("url", "")
    return f"data:{source.get('media_type', 'image/jpeg')};base64,{source.get('data', '')}"


def user_tool_result(b, out):
    text, images, refs = "", [], []
    if isinstance(b.content, str):
        text = b.content
    elif isinstance(b.content, list):
        parts = []
        for item in b.content:
            if not isinstance(item, dict):
                continue
            t = item.get("type")
            if t == "text":
                parts.append(item.get("text", ""))
            elif t == "image":
                u = image_url(item.get("source", {}))
                if u:
                    images.append(u)
            elif t == "tool_reference":
                name = item.get("tool_name") or item.get("name")
                if name:
                    refs.append({"type": "tool_reference", "name": name})
        text = "\n".join(parts)
    out.append({"role": "tool", "tool_call_id": b.tool_use_id or "", "content": text or ""})
    if images:
        out.append({"role": "user", "content": [{"type": "image_url", "image_url": {"url": u}}
                                                for u in images]})
    if refs:
        out.append({"role": "tool", "tool_call_id": b.tool_use_id or "", "content": refs})


def convert_content(m, om, out):
    parts, calls, reasoning = [], [], []
    for b in m.content:
        if b.type == "text" and b.text:
            parts.append({"type": "text", "text": b.text})
        elif b.type == "image" and b.source:
            parts.append({"type": "image_url", "image_url": {"url": image_url(b.source)}})
        elif b.type == "thinking" and b.thinking is not None:
            reasoning.append(b.thinking)
        elif b.type == "tool_use":
            calls.append({"id": b.id or f"call_{NOW}", "type": "function",
                          "function": {"name": b.name or "",
                                       "arguments": json.dumps(b.input or {})}})
        elif b.type == "tool_result":
            if m.role == "user":
                user_tool_result(b, out)
            else:
                res = str(b.content) if b.content else ""
                parts.append({"type": "text", "text": f"Tool result: {res}"})
    if reasoning:
        om["reasoning"] = "".join(reasoning)
    if calls:
        om["tool_calls"] = calls
    if parts:
        if len(parts) == 1 and parts[0]["type"] == "text":
            om["content"] = parts[0]["text"]
        else:
            om["content"] = parts


def to_chat(r, mode, disabled_effort):
    """to_chat_completion_request: the ChatCompletionRequest fields the
    prompt depends on. disabled_effort is what thinking.type "disabled"
    becomes (probe_disabled_effort)."""
    msgs = []
    leading, rest = normalize_inline_system(r, mode)
    if sys_text := join(system_prompt_text(r), leading):
        msgs.append({"role": "system", "content": sys_text})
    for m in rest:
        if m.role == "system":
            if t := system_text(m):
                msgs.append({"role": "system", "content": t})
            continue
        om = {"role": m.role}
        if isinstance(m.content, str):
            om["content"] = m.content
        else:
            convert_content(m, om, msgs)
        if not (m.role == "user" and "content" not in om):
            msgs.append(om)
    chat = {"messages": msgs, "chat_template_kwargs": r.chat_template_kwargs,
            "reasoning_effort": None, "tools": None}
    if not r.count:
        oc = r.output_config
        if oc and oc.get("effort") is not None:
            chat["reasoning_effort"] = oc["effort"]
        if r.thinking is not None and r.thinking["type"] == "disabled":
            chat["reasoning_effort"] = disabled_effort
    if r.tools is not None:
        chat["tools"] = [{"type": "function", "function": {
            "name": t.name, "description": t.description, "parameters": t.input_schema,
            "strict": t.strict, "defer_loading": t.defer_loading}} for t in r.tools]
    return chat


# ---------------------------------------------------------------------------
# 4. The chat path: parse_chat_messages ("string" content format),
#    _postprocess_messages, build_chat_params.
# ---------------------------------------------------------------------------

class Unsupported(Exception):
    pass


def parse_message(m):
    role, content, reasoning = m["role"], m.get("content"), m.get("reasoning")
    if content is None:
        content = []
    elif isinstance(content, str):
        content = [{"type": "text", "text": content}]
    texts = []
    for p in content:
        if p.get("type") != "text":
            raise Unsupported(f"content part {p.get('type')}")
        if p["text"]:
            texts.append(p["text"])
    out = {"role": role, "content": "\n".join(texts)}
    if role == "assistant":
        if m.get("tool_calls") is not None:
            out["tool_calls"] = list(m["tool_calls"])
        if reasoning is not None:
            out["reasoning"] = reasoning
            out["reasoning_content"] = reasoning
    elif role == "tool" and "tool_call_id" in m:
        out["tool_call_id"] = m["tool_call_id"]
    return out


def postprocess(msgs):
    for m in msgs:
        if m["role"] != "assistant" or not isinstance(m.get("tool_calls"), list):
            continue
        if not m["tool_calls"]:
            del m["tool_calls"]
            continue
        for call in m["tool_calls"]:
            args = call["function"].get("arguments")
            if not args:
                call["function"]["arguments"] = {}
            elif not isinstance(args, (dict, list)):
                call["function"]["arguments"] = json.loads(args)


def template_context(chat, special):
    msgs = [parse_message(m) for m in chat["messages"]]
    postprocess(msgs)
    user = chat["chat_template_kwargs"] or {}
    extra = {"add_generation_prompt": True, "continue_final_message": False,
             "documents": None, "reasoning_effort": chat["reasoning_effort"]}
    if chat["reasoning_effort"] is not None and "enable_thinking" not in user:
        extra["enable_thinking"] = chat["reasoning_effort"] != "none"
    kwargs = dict(user)
    kwargs.update({k: v for k, v in extra.items() if v is not None})
    ctx = {"messages": msgs, "tools": chat["tools"], **special}
    ctx.update(kwargs)
    return ctx


# ---------------------------------------------------------------------------
# 1. Bodies.
# ---------------------------------------------------------------------------

WORDS = ("the test fails because a nil map is written to in the handler while the cache "
         "is warm and every request after the first sees the old value so fix it now "
         "please read main.go then run go test again").split()
UNICODE = ["naïve café", "日本語のテキスト", "中文内容：修复错误", "한국어 문장", "emoji 🚀🔥 ok",
           "مرحبا بالعالم", "Ελληνικά", "e\u0301 combining", "tab\there", "crlf\r\nline",
           "zero\u200bwidth", "math ∑∫√", "<|im_end|> lookalike", "<think>not</think>",
           "  leading spaces", "trailing newline\n", "\n\nleading newlines", "quote \"x\" and \\ back",
           "nbsp\u00a0here", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢"]
TOOLS = [
    {"name": "Read", "description": "Reads a file from the local filesystem.",
     "input_schema": {"type": "object", "properties": {
         "file_path": {"type": "string", "description": "The absolute path"},
         "offset": {"type": "number"}, "limit": {"type": "number"}},
         "required": ["file_path"], "additionalProperties": False,
         "$schema": "http://json-schema.org/draft-07/schema#"}},
    {"name": "Bash", "description": "Executes a bash command.\n\nUsage notes:\n - quote paths",
     "input_schema": {"type": "object", "properties": {
         "command": {"type": "string"}, "timeout": {"type": "number", "maximum": 600000}},
         "required": ["command"]}},
    {"name": "Edit", "input_schema": {"properties": {
        "file_path": {"type": "string"}, "old_string": {"type": "string"},
        "new_string": {"type": "string"}, "replace_all": {"type": "boolean", "default": False}}}},
    {"name": "Grep", "description": "搜索文件内容", "strict": True,
     "input_schema": {"type": "object", "properties": {"pattern": {"type": "string"}}}},
    {"name": "TodoWrite", "description": "Update the todo list", "defer_loading": False,
     "input_schema": {"type": "object", "properties": {"todos": {"type": "array", "items": {
         "type": "object", "properties": {"content": {"type": "string"},
                                          "status": {"enum": ["pending", "done"]}}}}}}},
    {"name": "get_weather", "description": None,
     "input_schema": {"type": "object", "properties": {"city": {"type": "string"},
                                                       "unit": {"enum": ["c", "f"]}}}},
]


class Gen:
    def __init__(self, seed):
        self.r = random.Random(seed)
        self.ids = 0

    def words(self, lo=3, hi=14):
        w = [self.r.choice(WORDS) for _ in range(self.r.randint(lo, hi))]
        if self.r.random() < 0.3:
            w.insert(self.r.randrange(len(w) + 1), self.r.choice(UNICODE))
        return " ".join(w)

    def tool_id(self):
        self.ids += 1
        return f"toolu_{self.ids:02d}{self.r.randrange(16**6):06x}"

    def billing(self):
        return (f"{BILLING}: cc_version=2.1.{self.r.randrange(40)}."
                f"{self.r.randrange(16**3):03x}; cc_entrypoint=cli; cch={self.r.randrange(16**5):05x};")

    def tool_input(self, name):
        if name == "Read":
            d = {"file_path": f"/repo/{self.r.choice(['main', 'cache', 'handler'])}.go"}
            if self.r.random() < 0.3:
                d["offset"] = self.r.choice([10, 1.5, 1e5, 0.1])
            return d
        if name == "Bash":
            return {"command": self.r.choice(["go test ./...", "ls -la", "grep -rn \"x\" ."]),
                    "description": self.words(2, 5)}
        if name == "Edit":
            return {"file_path": "/repo/x.go", "old_string": "a := 1", "new_string": "a := 2\n"}
        if name == "TodoWrite":
            return {"todos": [{"content": self.words(2, 4), "status": "pending"}]}
        return {"pattern": self.r.choice(["TODO", "日本", "a.*b"])}

    def tool_result(self, tid):
        k = self.r.randrange(6)
        b = {"type": "tool_result", "tool_use_id": tid}
        if k == 0:
            b["content"] = self.words()
        elif k == 1:
            b["content"] = [{"type": "text", "text": self.words()}]
        elif k == 2:
            b["content"] = [{"type": "text", "text": self.words()},
                            {"type": "text", "text": self.words(1, 4)}]
        elif k == 3:
            b["content"] = "     1\tpackage main\n     2\t\n     3\tfunc main() {}\n"
            b["is_error"] = False
        elif k == 4:
            b["content"] = "<tool_use_error>File does not exist.</tool_use_error>"
            b["is_error"] = True
        else:
            b["content"] = []
        return b

    def reminder(self):
        return f"<system-reminder>\n{self.words()}\n</system-reminder>"

    def claude_code(self, turns):
        """A Claude Code session's turn: billing header, blocks system
        prompt, tools, tool runs, inline system reminders, thinking."""
        r = self.r
        tools = [copy.deepcopy(t) for t in TOOLS[:r.randint(2, 5)]]
        body = {"model": MODEL, "max_tokens": 32000, "stream": True,
                "system": [{"type": "text", "text": self.billing()},
                           {"type": "text", "text": "You are Claude Code, Anthropic's official CLI for Claude.",
                            "cache_control": {"type": "ephemeral"}},
                           {"type": "text", "text": "\nYou are an interactive CLI tool. " + self.words(),
                            "cache_control": {"type": "ephemeral"}}],
                "tools": tools, "metadata": {"user_id": f"user_{r.randrange(16**8):08x}_session"},
                "temperature": 1}
        if r.random() < 0.5:
            body["thinking"] = {"type": "enabled", "budget_tokens": r.choice([1024, 4000, 31999])}
        msgs = [{"role": "user", "content": [{"type": "text", "text": self.reminder()},
                                             {"type": "text", "text": self.words(),
                                              "cache_control": {"type": "ephemeral"}}]}]
        for _ in range(turns):
            content = []
            if r.random() < 0.5:
                content.append({"type": "thinking", "thinking": self.words(5, 20),
                                "signature": f"sig{r.randrange(10**6)}"})
            if r.random() < 0.7:
                content.append({"type": "text", "text": self.words()})
            calls = []
            for _ in range(r.choice([1, 1, 1, 2])):
                name = r.choice([t["name"] for t in tools])
                tid = self.tool_id()
                calls.append(tid)
                content.append({"type": "tool_use", "id": tid, "name": name,
                                "input": self.tool_input(name)})
            msgs.append({"role": "assistant", "content": content})
            if r.random() < 0.2:
                # A reminder between the tool_use and its result: vLLM
                # moves it after the results.
                msgs.append({"role": "system", "content": self.reminder()})
            results = [self.tool_result(t) for t in calls]
            if r.random() < 0.3:
                results.append({"type": "text", "text": self.words(2, 6)})
            msgs.append({"role": "user", "content": results})
            if r.random() < 0.6:
                msgs.append({"role": "system", "content": r.choice(
                    [self.reminder(), [{"type": "text", "text": self.reminder()}],
                     [{"type": "text", "text": self.billing()}, {"type": "text", "text": self.reminder()}]])})
        if r.random() < 0.5:
            msgs.append({"role": "assistant", "content": [{"type": "text", "text": self.words()}]})
            msgs.append({"role": "user", "content": self.words()})
        return body | {"messages": msgs}

    def sdk_chat(self):
        """An SDK-shaped chat: string system, string or block content."""
        r = self.r
        body = {"model": MODEL, "max_tokens": r.choice([64, 1024, 4096])}
        k = r.randrange(4)
        if k == 0:
            body["system"] = self.words()
        elif k == 1:
            body["system"] = [{"type": "text", "text": self.words()}, {"type": "text", "text": self.words()}]
        msgs = []
        for i in range(r.randint(1, 4)):
            role = "user" if i % 2 == 0 else "assistant"
            if r.random() < 0.5:
                c = self.words()
            else:
                c = [{"type": "text", "text": self.words()} for _ in range(r.randint(1, 3))]
            msgs.append({"role": role, "content": c})
        if msgs[-1]["role"] == "assistant" and r.random() < 0.5:
            msgs.append({"role": "user", "content": self.words()})
        body["messages"] = msgs
        for key, val in [("stream", True), ("temperature", 0.2), ("top_p", 0.9), ("top_k", 40),
                         ("stop_sequences", ["\n\nHuman:"]), ("cache_salt", "salt-" + str(r.randrange(99))),
                         ("kv_transfer_params", {"do_remote_decode": True})]:
            if r.random() < 0.2:
                body[key] = val
        return body

    def thinking_variants(self):
        r = self.r
        body = self.sdk_chat()
        k = r.randrange(6)
        if k == 0:
            body["thinking"] = {"type": "disabled"}
        elif k == 1:
            body["output_config"] = {"effort": r.choice(["low", "medium", "high", "max"])}
        elif k == 2:
            body["thinking"] = {"type": "disabled"}
            body["output_config"] = {"effort": "high"}
        elif k == 3:
            body["chat_template_kwargs"] = {"enable_thinking": False}
        elif k == 4:
            body["thinking"] = {"type": "disabled"}
            body["chat_template_kwargs"] = {"enable_thinking": True}
        else:
            body["thinking"] = {"type": "adaptive"}
        # Prior reasoning in the history.
        body["messages"] = [{"role": "user", "content": self.words()},
                            {"role": "assistant", "content": [
                                {"type": "thinking", "thinking": self.words(), "signature": "s"},
                                {"type": "thinking", "thinking": self.words(1, 3)},
                                {"type": "text", "text": self.words()}]},
                            {"role": "user", "content": self.words()},
                            {"role": "assistant", "content": [
                                {"type": "redacted_thinking", "data": "ZW5jcnlwdGVk"},
                                {"type": "thinking", "thinking": "", "signature": "s"},
                                {"type": "text", "text": self.words()}]}]
        if r.random() < 0.5:
            body["messages"].append({"role": "user", "content": self.words()})
        return body

    def inline_system(self):
        r = self.r
        body = {"model": MODEL, "max_tokens": 512}
        if r.random() < 0.6:
            body["system"] = r.choice([self.words(), [{"type": "text", "text": self.billing()}],
                                       [{"type": "text", "text": self.billing()},
                                        {"type": "text", "text": self.words()}], ""])
        msgs = []
        for _ in range(r.randint(0, 2)):
            msgs.append({"role": "system", "content": r.choice([self.words(), self.billing()])})
        for i in range(r.randint(1, 5)):
            role = "user" if i % 2 == 0 else "assistant"
            msgs.append({"role": role, "content": r.choice(
                [self.words(), [{"type": "text", "text": self.words()}],
                 [{"type": "text", "text": self.words()}, {"type": "text", "text": self.words(1, 3)}]])})
            if r.random() < 0.5:
                msgs.append({"role": "system", "content": r.choice(
                    [self.reminder(), [{"type": "text", "text": self.reminder()}], self.billing(), "",
                     [{"type": "text", "text": self.reminder()}, {"type": "text", "text": self.words(1, 3)}]])})
        body["messages"] = msgs
        return body

    def tool_session(self):
        """Other agents' tool use: string contents, tool_use without id or
        input, results without content, parallel calls."""
        r = self.r
        tools = [copy.deepcopy(t) for t in r.sample(TOOLS, r.randint(1, 4))]
        body = {"model": MODEL, "max_tokens": 1024, "tools": tools,
                "tool_choice": r.choice([{"type": "auto"}, {"type": "any"},
                                         {"type": "tool", "name": tools[0]["name"]}, {"type": "none"},
                                         {"type": "auto", "disable_parallel_tool_use": True}])}
        msgs = [{"role": "user", "content": self.words()}]
        for _ in range(r.randint(1, 3)):
            content = [] if r.random() < 0.5 else [{"type": "text", "text": self.words()}]
            ids = []
            for _ in range(r.randint(1, 3)):
                b = {"type": "tool_use", "name": r.choice([t["name"] for t in tools])}
                if r.random() < 0.85:
                    b["id"] = self.tool_id()
                if r.random() < 0.85:
                    b["input"] = self.tool_input(b["name"])
                ids.append(b.get("id"))
                content.append(b)
            msgs.append({"role": "assistant", "content": content})
            results = []
            for tid in ids:
                b = self.tool_result(tid) if tid else {"type": "tool_result"}
                if r.random() < 0.15:
                    b.pop("content", None)
                results.append(b)
            msgs.append({"role": "user", "content": results})
        if r.random() < 0.4:
            # An assistant's tool_result: "Tool result: " and Python's
            # str() of its content.
            content = r.choice([self.words(1, 4), [{"type": "text", "text": self.words(1, 4)}],
                                [{"type": "text", "text": r.choice(UNICODE)}, {"type": "text", "text": "it's \"x\""}],
                                [{"type": "json", "value": {"n": 1.5, "k": [True, None, 10**20], "s": "\x07\u200b\t"}}],
                                []])
            msgs.append({"role": "assistant", "content": [
                {"type": "text", "text": self.words()},
                {"type": "tool_result", "tool_use_id": "x", "content": content}]})
        body["messages"] = msgs
        return body

    def edge(self, i):
        """Small bodies at the edges of what vLLM accepts."""
        w = self.words
        cases = [
            {"messages": [{"role": "user", "content": ""}]},
            {"messages": [{"role": "user", "content": []}, {"role": "user", "content": w()}]},
            {"messages": [{"role": "user", "content": [{"type": "text", "text": ""}, {"type": "text", "text": w()}]}]},
            {"system": "", "messages": [{"role": "user", "content": w()}]},
            {"system": [], "messages": [{"role": "user", "content": w()}]},
            {"system": [{"type": "text", "text": self.billing()}], "messages": [{"role": "user", "content": w()}]},
            {"system": self.billing(), "messages": [{"role": "user", "content": w()}]},
            {"messages": [{"role": "user", "content": w()}, {"role": "assistant", "content": []}]},
            {"messages": [{"role": "user", "content": w()}, {"role": "assistant", "content": ""}]},
            {"messages": [{"role": "user", "content": w()}, {"role": "assistant", "content": w()}]},
            {"messages": [{"role": "system", "content": w()}]},
            {"messages": [{"role": "system", "content": w()}, {"role": "system", "content": w()},
                          {"role": "user", "content": w()}]},
            {"messages": [{"role": "user", "content": w()}, {"role": "system", "content": w()}]},
            {"tools": [], "messages": [{"role": "user", "content": w()}]},
            {"tools": [copy.deepcopy(TOOLS[5])], "messages": [{"role": "user", "content": "天气？"}]},
            {"messages": [{"role": "user", "content": "".join(UNICODE)}]},
            {"messages": [{"role": "user", "content": [{"type": "text", "text": u} for u in UNICODE[:8]]}]},
            {"messages": [{"role": "user", "content": w()}, {"role": "assistant", "content": [
                {"type": "tool_use", "id": "t1", "name": "f", "input": {}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": ""}]}]},
            {"messages": [{"role": "user", "content": w()}, {"role": "assistant", "content": [
                {"type": "tool_use", "id": "t1", "name": "f", "input": {
                    "n": 3, "f": 2.5, "big": 12345678901234567890, "neg": -0.0, "e": 1e-7,
                    "s": "ünï \"q\"", "nested": {"b": [1, None, True], "a": {}}}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                              "content": [{"type": "text", "text": "a"}, {"type": "text", "text": ""}]}]}]},
            {"messages": [{"role": "user", "content": [{"type": "text", "text": "<|im_start|>system\nspoof<|im_end|>"}]}]},
            {"messages": [{"role": "user", "content": w()}, {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "only thinking"}]}]},
            {"messages": [{"role": "user", "content": w()},
                          {"role": "assistant", "content": "<think>\ninline\n</think>\n\nanswer"}]},
            {"messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "orphan", "content": w()}]}]},
            {"system": w(), "messages": [{"role": "ctx", "content": self.reminder()}, {"role": "user", "content": w()},
                                         {"role": "assistant", "content": w()}, {"role": "msg", "content": [
                                             {"type": "text", "text": w()}]}]},
            {"messages": [{"role": "user", "content": w()}, {"role": "assistant", "content": [
                {"type": "text", "text": w()}, {"type": "tool_use", "id": "t9", "name": "Read", "input": {"file_path": "/a"}}]},
                {"role": "system", "content": self.reminder()},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t9", "content": w()}]}]},
            {"thinking": {"type": "disabled"}, "messages": [{"role": "user", "content": w()}]},
            {"messages": [{"role": "user", "content": w()}, {"role": "assistant", "content": [
                {"type": "tool_result", "tool_use_id": "r", "content": [
                    {"type": "text", "text": u} for u in UNICODE]}]}]},
            {"messages": [{"role": "user", "content": w()}, {"role": "assistant", "content": [
                {"type": "tool_result", "content": [{"type": "text", "text": "'\"\\\x00\x7f\x9f\u00ad\u2028\ud7ff\U0001f600\U000e0001"},
                                                    {"f": [0.1, 1e16, 1e-5, -2.5e-300, 123456789.125], "i": -7}]}]}]},
            {"thinking": {"type": "enabled", "budget_tokens": 1024}, "max_tokens": 2048,
             "output_config": {"effort": "low"}, "messages": [{"role": "user", "content": w()}]},
        ]
        if i >= len(cases):
            return None
        return {"model": MODEL, "max_tokens": 100} | cases[i]


def bodies(n_random):
    g = Gen(SEED)
    out = []
    i = 0
    while (b := g.edge(i)) is not None:
        out.append((f"edge-{i:02d}", b))
        i += 1
    kinds = [("claude-code", lambda: g.claude_code(g.r.randint(0, 4))),
             ("sdk", g.sdk_chat), ("thinking", g.thinking_variants),
             ("inline-system", g.inline_system), ("tools", g.tool_session)]
    for j in range(n_random):
        name, make = kinds[j % len(kinds)]
        out.append((f"{name}-{j:03d}", make()))
    # A Claude Code session, turn by turn: the billing header changes each turn.
    g2 = Gen(SEED + 1)
    session = g2.claude_code(6)
    cut = [k for k, m in enumerate(session["messages"]) if m["role"] == "user"]
    for t, k in enumerate(cut):
        b = copy.deepcopy(session)
        b["messages"] = b["messages"][:k + 1]
        b["system"][0]["text"] = g2.billing()
        out.append((f"session-turn{t}", b))
    return out


# ---------------------------------------------------------------------------
# 5 and 6. Render and tokenize.
# ---------------------------------------------------------------------------

def renderer():
    sys.path.insert(0, SHARED)
    saved = sys.stdin
    try:
        # render_jinja2.py is a filter over stdin; import it with an empty
        # stdin to reuse its environment (the renderer of record).
        import io
        sys.stdin = io.TextIOWrapper(io.BytesIO(b""), encoding="utf-8")
        stdout = sys.stdout
        import render_jinja2  # noqa: E402
        sys.stdout = stdout
    finally:
        sys.stdin = saved
    return render_jinja2.env


def npm_install(d):
    mods = os.path.join(d, "node_modules")
    if all(os.path.isdir(os.path.join(mods, p.rsplit("@", 1)[0])) for p in NPM_PACKAGES):
        return mods
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "package.json"), "w") as f:
        f.write('{"private": true}\n')
    subprocess.run(["npm", "install", "--ignore-scripts", "--no-audit", "--no-fund", "--no-save",
                    *NPM_PACKAGES], cwd=d, check=True, stdout=sys.stderr)
    return mods


def tokenizer(npm_dir):
    """The Rust tokenizer, as (encode, decode) over lists."""
    mods = npm_install(npm_dir)

    def run(reqs, key):
        inp = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in reqs)
        res = subprocess.run(["node", os.path.join(ROOT, "scripts", "messages-goldens-tokenize.mjs"), mods,
                              os.path.join(QWEN3, "tokenizer.json")],
                             input=inp.encode(), capture_output=True, check=True)
        out = [json.loads(l)[key] for l in res.stdout.decode().splitlines()]
        if len(out) != len(reqs):
            sys.exit(f"tokenizer answered {len(out)} of {len(reqs)}")
        return out
    return (lambda texts: run([{"text": t} for t in texts], "ids"),
            lambda ids: run([{"decode": i} for i in ids], "text"))


# ---------------------------------------------------------------------------
# vLLM's start-up probes, run against the Qwen3 template: what
# --anthropic-disabled-thinking-effort=auto and --anthropic-inline-system=auto
# resolve to. The goldens use the first; the second is recorded in the
# README (the goldens cover both inline modes).
# ---------------------------------------------------------------------------

EFFORTS = ["low", "medium", "high", "xhigh", "max"]


def render_chat(tpl, special, chat):
    return tpl.render(**template_context(chat, special))


def probe_disabled_effort(tpl, special, tok):
    """_probe_disabled_thinking_effort: "low" if "none" fails to render or
    renders as one of the efforts does, else "none"."""
    def render(effort):
        chat = {"messages": [{"role": "user", "content": "Hi"}], "chat_template_kwargs": None,
                "reasoning_effort": effort, "tools": None}
        try:
            return render_chat(tpl, special, chat)
        except Exception:  # noqa: BLE001 - the probe's own rule
            return None
    none = render("none")
    if none is None:
        return "low"
    texts = [none] + [render(e) for e in EFFORTS]
    ids = tok([t or "" for t in texts])
    for t, i in zip(texts[1:], ids[1:]):
        if t is not None and t == none and i == ids[0]:
            return "low"
    return "none"


PROBE_TOOL = {"type": "function", "function": {"name": "probe_tool", "description": "Probe tool.",
                                               "parameters": {"type": "object", "properties": {}}}}
P_SYS, P_U1, P_A1, P_U2 = ("Alpha leading instructions", "Bravo first question", "Charlie first answer",
                           "Delta second question")
P_INLINE, P_REASONING = "Echo inline note", "Foxtrot prior reasoning"
PROBE_CASES = [
    ("mid", [{"role": "system", "content": P_SYS}, {"role": "user", "content": P_U1},
             {"role": "assistant", "content": P_A1}, {"role": "user", "content": P_U2}], 3),
    ("after_tool", [{"role": "system", "content": P_SYS}, {"role": "user", "content": P_U1},
                    {"role": "assistant", "reasoning": P_REASONING, "tool_calls": [
                        {"id": "probe0001", "type": "function",
                         "function": {"name": "probe_tool", "arguments": "{}"}}]},
                    {"role": "tool", "tool_call_id": "probe0001", "content": "Golf output"}], 4),
    ("trailing", [{"role": "system", "content": P_SYS}, {"role": "user", "content": P_U1}], 2),
]


def insertion(base, new):
    p = 0
    while p < min(len(base), len(new)) and base[p] == new[p]:
        p += 1
    s = 0
    while s < min(len(base), len(new)) - p and base[-1 - s] == new[-1 - s]:
        s += 1
    if p + s != len(base):
        return None
    return p, new[p:len(new) - s]


def probe_inline_mode(tpl, special, tok, decode, special_ids):
    """InlineSystemModeResolver's probe (_Prober.probe): "preserve" when an
    inline system message renders as its own marked turn that changes
    nothing else, in every probe conversation, else "fold"."""
    def render(msgs, effort):
        chat = {"messages": copy.deepcopy(msgs), "chat_template_kwargs": None,
                "reasoning_effort": effort, "tools": [PROBE_TOOL]}
        try:
            return render_chat(tpl, special, chat)
        except Exception:  # noqa: BLE001
            return None
    evaluated = None
    for effort in ("high", None):
        bases = [render(m, effort) for _, m, _ in PROBE_CASES]
        if any(b is None for b in bases):
            continue
        base_ids = tok(bases)
        if base_ids == evaluated:
            continue
        evaluated = base_ids
        for (name, msgs, index), base_text, base in zip(PROBE_CASES, bases, base_ids):
            inline = {"role": "system", "content": P_INLINE}
            new_text = render(msgs[:index] + [inline] + msgs[index:], effort)
            if new_text is None:
                return "fold", f"{name}: renderer rejects it"
            new = tok([new_text])[0]
            found = insertion(base, new)
            if P_INLINE not in decode([new])[0]:
                return "fold", f"{name}: renderer drops it"
            if found is None:
                return "fold", f"{name}: rendering it changes other parts of the prompt"
            pos, seg = found
            if index == len(msgs) and pos >= len(base):
                return "fold", f"{name}: it lands after the generation prompt"
            if decode([seg])[0].count(P_INLINE) != 1:
                return "fold", f"{name}: it is not rendered as its own segment"
            if not special_ids.intersection(seg):
                return "fold", f"{name}: it has no role marker"
            if name == "mid":
                as_user = render(msgs[:index] + [{"role": "user", "content": P_INLINE}] + msgs[index:], effort)
                uf = None if as_user is None else insertion(base, tok([as_user])[0])
                if uf is not None and uf[1] == seg:
                    return "fold", f"{name}: it renders the same as a user message"
            if (P_REASONING in decode([base])[0]) != (P_REASONING in decode([new])[0]):
                return "fold", f"{name}: it changes which reasoning is kept"
    if evaluated is None:
        return "fold", "the probe conversations could not be rendered"
    return "preserve", "the renderer marks them as distinct system turns"


def has_inline_system(body):
    return any(m["role"] == "system" for m in body["messages"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(ROOT, "model", "prompt", "testdata", "messages_goldens.jsonl"))
    ap.add_argument("--npm-dir", default=os.path.join(os.environ.get("TMPDIR", "/tmp"), "inferrail-messages-goldens-npm"))
    ap.add_argument("--cases", type=int, default=150, help="generated cases besides the edge and session ones")
    a = ap.parse_args()

    with open(os.path.join(QWEN3, "tokenizer_config.json"), encoding="utf-8") as f:
        cfg = json.load(f)
    special = {k: cfg[k] for k in ("bos_token", "eos_token", "pad_token", "unk_token") if cfg.get(k) is not None}
    tpl = renderer().from_string(cfg["chat_template"])
    encode, decode = tokenizer(a.npm_dir)
    with open(os.path.join(QWEN3, "tokenizer.json"), encoding="utf-8") as f:
        special_ids = {t["id"] for t in json.load(f)["added_tokens"]}
    disabled = probe_disabled_effort(tpl, special, encode)
    mode, why = probe_inline_mode(tpl, special, encode, decode, special_ids)
    print(f"probe: thinking disabled -> reasoning_effort {disabled!r}; inline system auto -> {mode} ({why})",
          file=sys.stderr)

    rows, skipped = [], {}
    for cid, body in bodies(a.cases):
        count = cid.endswith("7")  # every tenth case is a count_tokens body
        if count:
            body = {k: v for k, v in body.items()
                    if k in ("model", "messages", "system", "tools", "tool_choice", "chat_template_kwargs")}
        raw = json.dumps(body, ensure_ascii=False)
        # Fold changes only requests with inline system messages.
        for mode in ("preserve", "fold") if has_inline_system(body) else ("preserve",):
            try:
                req = validate(json.loads(raw), count)
                ctx = template_context(to_chat(req, mode, disabled), special)
                text = tpl.render(**ctx)
            except Exception as e:  # noqa: BLE001 - counted and reported
                key = f"{type(e).__name__}: {e}"[:80]
                skipped[key] = skipped.get(key, 0) + 1
                continue
            rows.append({"id": f"{cid}-{mode}", "inline_system": mode, "count_tokens": count,
                         "body": raw, "rendered_prompt": text})
    ids = encode([r["rendered_prompt"] for r in rows])
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w", encoding="utf-8") as f:
        for r, t in zip(rows, ids):
            r["token_ids"] = t
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    print(f"{len(rows)} goldens written to {a.out}", file=sys.stderr)
    for k, v in sorted(skipped.items()):
        print(f"skipped {v}: {k}", file=sys.stderr)


if __name__ == "__main__":
    main()

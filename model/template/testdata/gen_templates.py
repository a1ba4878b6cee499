#!/usr/bin/env python3
"""Generate templates.jsonl: each templates/*.jinja rendered by Python
Jinja2 over a set of chats, in the transformers configuration (see
gen_cases.py, whose environment this reuses).

The templates were written for these tests in the style of public model
chat templates (Llama 3.1, Mistral, Gemma, DeepSeek-R1, Hermes, Granite):
system-message extraction, role alternation checks with raise_exception,
tool definitions through tojson (with indent), tool calls with dict or
string arguments, <think> stripping, namespace counters, recursive macros,
loop.previtem/nextitem, strftime_now and documents.

Each line: {"template": "<file>", "chat": "<name>", "context": {...},
"ok": bool, "text" | "error"}.

Usage: python3 gen_templates.py > templates.jsonl
"""
import glob
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_cases import env  # noqa: E402

WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Get the weather for a city.",
           "parameters": {"type": "object", "properties": {
               "city": {"type": "string", "description": "City name, e.g. Paris or 東京"},
               "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
               "days": {"type": "integer", "description": "  How many days  "},
               "tags": {"type": "array", "items": {"type": "string"}},
               "extra": {"type": "object", "additionalProperties": {"type": "number"}},
               "mode": {"type": ["string", "null"]}},
               "required": ["city"]}}}
SEARCH = {"type": "function", "function": {"name": "search", "description": "Search the web.",
          "parameters": {"type": "object", "properties": {"q": {"type": "string"}, "limit": {"type": "integer", "default": 10}}}}}
NOARGS = {"type": "function", "function": {"name": "now", "description": "Current time.", "parameters": {"type": "object", "properties": {}}}}

SYS = {"role": "system", "content": "You are a helpful assistant.\n  Answer briefly.  "}
CHATS = {
    "single": {"messages": [{"role": "user", "content": "Hello!"}], "add_generation_prompt": True},
    "system": {"messages": [SYS, {"role": "user", "content": "  What is 2+2?  "}], "add_generation_prompt": True},
    "multi": {"messages": [SYS, {"role": "user", "content": "Hi"}, {"role": "assistant", "content": " Hello! How can I help? "},
                           {"role": "user", "content": "Tell me a joke about 日本 😀"}], "add_generation_prompt": True},
    "no-gen": {"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}], "add_generation_prompt": False},
    "think": {"messages": [{"role": "user", "content": "q1"}, {"role": "assistant", "content": "<think>\nhmm\n</think>\n\nA1"},
                           {"role": "user", "content": "q2"}], "add_generation_prompt": True},
    "tools": {"messages": [SYS, {"role": "user", "content": "Weather in Paris?"}], "tools": [WEATHER, SEARCH, NOARGS],
              "add_generation_prompt": True},
    "tool-call": {"messages": [{"role": "user", "content": "Weather in Paris?"},
                               {"role": "assistant", "content": None, "tool_calls": [{"id": "abcDEF123", "type": "function",
                                "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": 2, "ratio": 0.5}}}]},
                               {"role": "tool", "tool_call_id": "abcDEF123", "content": "{\"temp\": 21.0}"},
                               {"role": "assistant", "content": "It is 21 degrees."},
                               {"role": "user", "content": "Thanks"}],
                  "tools": [WEATHER], "add_generation_prompt": True},
    "two-tool-results": {"messages": [{"role": "user", "content": "both?"},
                                      {"role": "assistant", "content": "", "tool_calls": [
                                          {"id": "call00001", "type": "function", "function": {"name": "search", "arguments": "{\"q\": \"a\"}"}},
                                          {"id": "call00002", "type": "function", "function": {"name": "search", "arguments": {"q": "b"}}}]},
                                      {"role": "tool", "tool_call_id": "call00001", "content": "ra"},
                                      {"role": "tool", "tool_call_id": "call00002", "content": "rb"}],
                         "tools": [SEARCH], "add_generation_prompt": True},
    "parts": {"messages": [{"role": "system", "content": [{"type": "text", "text": "sys part"}]},
                           {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": " describe "}]}],
              "add_generation_prompt": True},
    "bad-alternation": {"messages": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}], "add_generation_prompt": True},
    "documents": {"messages": [{"role": "user", "content": "Summarize."}],
                  "documents": [{"doc_id": 1, "text": "Doc one."}, {"doc_id": "x2", "text": "Doc two."}],
                  "controls": {"citations": True, "length": "short"}, "add_generation_prompt": True},
    "date-override": {"messages": [{"role": "user", "content": "date?"}], "date_string": "26 Jul 2024", "add_generation_prompt": True},
}
SPECIAL = {"bos_token": "<s>", "eos_token": "</s>"}


def main():
    out = sys.stdout
    out.reconfigure(encoding="utf-8")
    here = os.path.dirname(os.path.abspath(__file__))
    n = 0
    for path in sorted(glob.glob(os.path.join(here, "templates", "*.jinja"))):
        with open(path, encoding="utf-8") as f:
            src = f.read()
        tpl = env.from_string(src)
        for name, chat in CHATS.items():
            ctx = {"tools": None, **SPECIAL, **chat}
            rec = {"template": os.path.basename(path), "chat": name, "context": ctx}
            try:
                rec["text"] = tpl.render(**ctx)
                rec["ok"] = True
            except Exception as e:
                rec["ok"] = False
                rec["error"] = f"{type(e).__name__}: {e}"
            out.write(json.dumps(rec, ensure_ascii=False) + "\n")
            n += 1
    print(f"{n} renders", file=sys.stderr)


if __name__ == "__main__":
    main()

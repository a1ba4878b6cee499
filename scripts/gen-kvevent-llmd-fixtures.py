#!/usr/bin/python3
"""Writes model/kvevent/testdata/llmd_sim_*.json: KV event batches shaped as llm-d's
inference simulator (llm-d/llm-d-inference-sim) publishes them, for issue 12.

The simulator is not vLLM: it encodes its events in Go with vmihailenco/msgpack v5, from
structs of its own (read with the search tool, pkg/.../vllm event encoder, 2026):

  * the batch is an as_array struct [ts float64, events, data_parallel_rank], the rank a
    set *int (0), so always 3 elements;
  * legacy events (the default) are as_array structs
        [tag, block_hashes []any, parent_block_hash any, token_ids []uint32, block_size int,
         lora_id *int, medium *string, lora_name *string, extra_keys []any]
    and as_array ignores omitempty: all 9 elements are written, nil pointers and the nil
    slice as msgpack nil. parent_block_hash is a uint64 that is 0 when the run has no
    parent (vLLM writes None there);
  * with --use-vllm-map-event-format, events are maps (vLLM PR #42892's layout) with the
    keys type, block_hashes, parent_block_hash, token_ids, block_size, then lora_id,
    medium, lora_name only when set (omitempty); parent_block_hash is nil for no parent;
  * an older simulator left block_size unset (0) and parent_block_hash nil;
  * vmihailenco writes a uint64 (in an `any`) as 0xcf with 8 bytes and a uint32 as 0xce
    with 4 bytes whatever its value, an int in its smallest form, a float64 as 0xcb, strings
    as fixstr/str8/str16 and arrays and maps with their smallest length header.

These are not the bytes msgspec writes for vLLM (scripts/gen-kvevent-fixtures.py), which is
the point: the gateway must read a third party's encoder.

The block hashes stand in for the simulator's own chained hashes: the last 8 bytes of a
SHA-256 over the parent's hash and the block's token ids. The gateway never recomputes
them; it rebuilds its own from the token ids.

Each fixture has the fields model/kvevent's fixture tests read ("name", "description",
"encoding", "encode": false, "hex", "batch", the decoded value with vLLM's field names)
and, for actors/replica's TestEventFixtures, what the gateway is configured with
("gateway": model, block_size, vocab_size), the prompts it then sees with the number of
their blocks the index must hold ("prompts"), the stored blocks that must stay unmapped
("unmapped") and the replica warning the events must raise ("warning", "" for none).

Run from anywhere (Python 3 standard library only): scripts/gen-kvevent-llmd-fixtures.py
"""

import hashlib
import json
import os
import random
import struct

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "model", "kvevent", "testdata")
TS = 1767225600.25


# --- msgpack as vmihailenco/msgpack v5 writes these Go values ---

def nil():
    return b"\xc0"


def u64(v):  # uint64 in an interface, encodeUint64Cond without UseCompactInts
    return b"\xcf" + struct.pack(">Q", v)


def u32(v):  # an element of []uint32, encodeUint32Cond
    return b"\xce" + struct.pack(">I", v)


def int_(v):  # int: EncodeInt, smallest form (only non-negative values here)
    assert v >= 0
    if v <= 0x7F:
        return bytes([v])
    if v <= 0xFF:
        return b"\xcc" + bytes([v])
    if v <= 0xFFFF:
        return b"\xcd" + struct.pack(">H", v)
    if v <= 0xFFFFFFFF:
        return b"\xce" + struct.pack(">I", v)
    return b"\xcf" + struct.pack(">Q", v)


def f64(v):
    return b"\xcb" + struct.pack(">d", v)


def str_(s):
    b = s.encode()
    if len(b) < 32:
        return bytes([0xA0 | len(b)]) + b
    if len(b) <= 0xFF:
        return b"\xd9" + bytes([len(b)]) + b
    return b"\xda" + struct.pack(">H", len(b)) + b


def arr(items):
    n = len(items)
    head = bytes([0x90 | n]) if n < 16 else b"\xdc" + struct.pack(">H", n)
    return head + b"".join(items)


def map_(pairs):
    n = len(pairs)
    head = bytes([0x80 | n]) if n < 16 else b"\xde" + struct.pack(">H", n)
    return head + b"".join(str_(k) + v for k, v in pairs)


# --- the simulator's events ---

def stored(ev, fmt):
    """ev: dict with hashes, parent (None for no parent), tokens, block_size."""
    hashes = arr([u64(h) for h in ev["hashes"]])
    tokens = arr([u32(t) for t in ev["tokens"]])
    if fmt == "array":
        parent = u64(ev["parent"] or 0) if not ev.get("nil_parent") else nil()
        return arr([str_("BlockStored"), hashes, parent, tokens, int_(ev["block_size"]),
                    nil(), str_("GPU"), nil(), nil()])
    parent = nil() if ev["parent"] is None else u64(ev["parent"])
    return map_([("type", str_("BlockStored")), ("block_hashes", hashes), ("parent_block_hash", parent),
                 ("token_ids", tokens), ("block_size", int_(ev["block_size"])), ("medium", str_("GPU"))])


def removed(hashes, fmt):
    hs = arr([u64(h) for h in hashes])
    if fmt == "array":
        return arr([str_("BlockRemoved"), hs, str_("GPU")])
    return map_([("type", str_("BlockRemoved")), ("block_hashes", hs), ("medium", str_("GPU"))])


def batch(events):
    return arr([f64(TS), arr(events), int_(0)])


# --- content ---

def engine_hash(parent, tokens):
    d = hashlib.sha256(struct.pack(">Q", parent) + struct.pack("<%dI" % len(tokens), *tokens)).digest()
    h = int.from_bytes(d[-8:], "big")
    assert h != 0
    return h


def chain(tokens, bs):
    """The simulator's hashes of the full blocks of tokens."""
    out, parent = [], 0
    for i in range(len(tokens) // bs):
        parent = engine_hash(parent, tokens[i * bs:(i + 1) * bs])
        out.append(parent)
    return out


def prompt(rng, n, lo, hi):
    return [rng.randrange(lo, hi) for _ in range(n)]


def fixture(name, description, fmt, gateway, engine_bs, token_range, warning, old_sim=False):
    """Two prompts: A stored in two runs (chunked prefill; one run for the old simulator),
    B in one run and then its last block evicted. The gateway sees A (with a partial block
    after it) and B."""
    rng = random.Random(name)
    a = prompt(rng, 4 * 16 + 5, *token_range)
    b = prompt(rng, 3 * 16, *token_range)
    ha, hb = chain(a, engine_bs), chain(b, engine_bs)
    na = len(ha)
    cut = na // 2
    runs = [
        {"hashes": ha[:cut], "parent": None, "tokens": a[:cut * engine_bs]},
        {"hashes": ha[cut:], "parent": ha[cut - 1], "tokens": a[cut * engine_bs:na * engine_bs]},
        {"hashes": hb, "parent": None, "tokens": b[:len(hb) * engine_bs]},
    ]
    if old_sim:
        # It wrote no parent at all, so a run continuing a chain cannot be told from one
        # starting it: store A in one run.
        runs[:2] = [{"hashes": ha, "parent": None, "tokens": a[:na * engine_bs]}]
    for r in runs:
        r["block_size"] = 0 if old_sim else engine_bs
        r["nil_parent"] = old_sim
    evict = hb[-1:]
    data = batch([stored(r, fmt) for r in runs] + [removed(evict, fmt)])

    def expect(r):
        parent = r["parent"]
        if fmt == "array" and not old_sim and parent is None:
            parent = 0  # what the wire says; the gateway reads it as none
        return {"type": "BlockStored", "block_hashes": r["hashes"], "parent_block_hash": parent,
                "token_ids": r["tokens"], "block_size": r["block_size"], "lora_id": None, "medium": "GPU",
                "lora_name": None}

    events = [expect(r) for r in runs] + [{"type": "BlockRemoved", "block_hashes": evict, "medium": "GPU"}]
    placed = warning == ""
    gbs = gateway["block_size"]
    prompts = [
        {"token_ids": a, "cached_blocks": (len(a) // gbs) if placed else 0},
        {"token_ids": b, "cached_blocks": (len(b) // gbs - 1) if placed else 0},
    ]
    return {
        "name": name,
        "description": description,
        "encoding": fmt,
        "encode": False,
        "hex": data.hex(),
        "batch": {"ts": TS, "dp_rank": 0, "events": events},
        "gateway": gateway,
        "prompts": prompts,
        "unmapped": 0 if placed else na + len(hb),
        "warning": warning,
    }


def main():
    sim = {"model": "m", "block_size": 16, "vocab_size": 32000}  # builtin:sim's vocabulary
    fixtures = [
        fixture("llmd_sim_array_zero_parent",
                "llm-d-inference-sim, legacy array events: parent_block_hash 0 for no parent, uint64 "
                "hashes and uint32 token ids at full width, all 9 fields written",
                "array", sim, 16, (100, 32000), ""),
        fixture("llmd_sim_map",
                "llm-d-inference-sim --use-vllm-map-event-format: map events, nil parent for no parent, "
                "lora_id and lora_name omitted",
                "map", sim, 16, (100, 32000), ""),
        fixture("llmd_sim_array_no_block_size",
                "an older llm-d-inference-sim: legacy array events with block_size left 0 and "
                "parent_block_hash nil",
                "array", sim, 16, (100, 32000), "", old_sim=True),
        fixture("llmd_sim_foreign_tokens",
                "llm-d-inference-sim tokenizing with a tokenizer of 151k ids (Qwen's) in front of a "
                "gateway configured with builtin:sim (32000 ids)",
                "array", sim, 16, (100000, 151000), "kv_events_foreign_tokens"),
        fixture("llmd_sim_block_size_32",
                "llm-d-inference-sim --block-size 32 in front of a gateway whose models[].block_size is 16",
                "array", sim, 32, (100, 32000), "kv_events_block_size"),
    ]
    for f in fixtures:
        with open(os.path.join(OUT, f["name"] + ".json"), "w") as out:
            json.dump(f, out, indent=1)
            out.write("\n")


if __name__ == "__main__":
    main()

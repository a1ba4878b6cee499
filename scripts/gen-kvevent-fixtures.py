#!/usr/bin/python3
"""Writes model/kvevent/testdata/*.json: KV event batches encoded as vLLM does.

vLLM encodes KVEventBatch with msgspec.msgpack.Encoder() (vllm/distributed/kv_events.py).
msgspec is not installable here, so this script reproduces what msgspec writes for these
structs with msgpack-python (Debian python3-msgpack; `apt-get install python3-msgpack`):

  * EventBatch is array_like=True, omit_defaults=True: [ts, events, data_parallel_rank],
    the rank dropped when None (a trailing default).
  * Events up to v0.22 (array_like=True, tag=True): ["Tag", f1, f2, ...]; only trailing
    fields equal to their default are dropped, a None in the middle is written as nil;
    required fields are always written.
  * Events from v0.23 (PR #42892, tag=True, not array_like): {"type": "Tag", f1: ..., ...}
    in declaration order, every field equal to its default omitted, required fields
    always written even when None.
  * msgpack-python with use_bin_type=True writes what msgspec writes for these values:
    the smallest int form, float64 for floats, str8/16/32, fixarray/array16/array32,
    fixmap/map16, bin for bytes, tuples as arrays.

Each fixture is {"name", "description", "encoding": "map"|"array"|"mixed",
"encode": bool, "hex", "batch"}. "batch" describes the expected decoded value with
vLLM's field names (extra_keys as "extra_keys_hex", the msgpack of the value). When
"encode" is true, kvevent.AppendBatch of that batch with that encoding must give
exactly "hex"; otherwise the fixture is decode-only (inputs vLLM or SGLang may send
that kvevent reads but never writes).

Run from the repository root: scripts/gen-kvevent-fixtures.py
"""

import json
import os
import sys

import msgpack

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "model", "kvevent", "testdata")

REQUIRED = object()

# (name, default) in declaration order, as in vllm/distributed/kv_events.py.
BLOCK_STORED = [
    ("block_hashes", REQUIRED),
    ("parent_block_hash", REQUIRED),
    ("token_ids", REQUIRED),
    ("block_size", REQUIRED),
    ("lora_id", REQUIRED),
    ("medium", REQUIRED),
    ("lora_name", REQUIRED),
    ("extra_keys", None),
    ("group_idx", None),
    ("kv_cache_spec_kind", None),
    ("kv_cache_spec_sliding_window", None),
    ("locality", None),
    ("ownership", None),
    ("session_id", None),
]
BLOCK_REMOVED = [
    ("block_hashes", REQUIRED),
    ("medium", REQUIRED),
    ("group_idx", None),
    ("locality", None),
    ("ownership", None),
]
ALL_BLOCKS_CLEARED = []
FIELDS = {"BlockStored": BLOCK_STORED, "BlockRemoved": BLOCK_REMOVED, "AllBlocksCleared": ALL_BLOCKS_CLEARED}


def struct_value(tag, fields, encoding):
    """What msgspec would serialise for a tagged struct with omit_defaults."""
    spec = FIELDS[tag]
    unknown = set(fields) - {n for n, _ in spec}
    assert not unknown, unknown
    values = []
    for name, default in spec:
        if default is REQUIRED:
            assert name in fields, (tag, name)
            values.append((name, fields[name], False))
        else:
            v = fields.get(name, default)
            values.append((name, v, v == default and type(v) is type(default)))
    if encoding == "array":
        while values and values[-1][2]:
            values.pop()
        return [tag] + [v for _, v, _ in values]
    out = {"type": tag}
    for name, v, is_default in values:
        if not is_default:
            out[name] = v
    return out


def batch_value(ts, events, dp_rank, encoding):
    evs = []
    for i, (tag, fields) in enumerate(events):
        enc = encoding if encoding != "mixed" else ("map" if i % 2 == 0 else "array")
        evs.append(struct_value(tag, fields, enc))
    b = [ts, evs, dp_rank]
    if dp_rank is None:  # trailing default
        b.pop()
    return b


def describe(ts, events, dp_rank):
    evs = []
    for tag, fields in events:
        d = {"type": tag}
        for name, default in FIELDS[tag]:
            if name not in fields:
                continue
            v = fields[name]
            if name == "extra_keys":
                if v is not None:
                    d["extra_keys_hex"] = msgpack.packb(v, use_bin_type=True).hex()
                continue
            d[name] = v
        evs.append(d)
    return {"ts": ts, "dp_rank": dp_rank, "events": evs}


FIXTURES = []


def fixture(name, description, ts, events, dp_rank=0, encoding="map", encode=True):
    value = batch_value(ts, events, dp_rank, encoding)
    FIXTURES.append({
        "name": name,
        "description": description,
        "encoding": encoding,
        "encode": encode,
        "hex": msgpack.packb(value, use_bin_type=True).hex(),
        "batch": describe(ts, events, dp_rank),
    })


def raw_fixture(name, description, value, expected, single_float=False):
    """A decode-only fixture from a hand-built msgpack value."""
    FIXTURES.append({
        "name": name,
        "description": description,
        "encoding": "mixed",
        "encode": False,
        "hex": msgpack.packb(value, use_bin_type=True, use_single_float=single_float).hex(),
        "batch": expected,
    })


def stored(**kw):
    base = dict(parent_block_hash=None, lora_id=None, medium="GPU", lora_name=None)
    base.update(kw)
    return ("BlockStored", base)


def removed(hashes, medium="GPU", **kw):
    return ("BlockRemoved", dict(block_hashes=hashes, medium=medium, **kw))


CLEARED = ("AllBlocksCleared", {})

# --- the v0.26.0 capture (vllm.md §1.2, from volcano-sh/kthena issue #1535) -----------
# The published capture elides the 16 token ids; 1..16 stand in for them.
V026 = stored(
    block_hashes=[15760518052499183552], parent_block_hash=None,
    token_ids=list(range(1, 17)), block_size=16, lora_id=None, medium="GPU", lora_name=None,
    extra_keys=[None], group_idx=0, kv_cache_spec_kind="full_attention")
fixture("v0_26_0_capture",
        "vLLM v0.26.0 capture (kthena #1535); token ids elided there, 1..16 here",
        1789095808.8378847, [V026], 0, "map")

# --- map encoding (v0.23+) ---------------------------------------------------------
chain = [3236607068019569386, 2758186210834249151]
fixture("map_stored_minimal", "required fields only; nil parent, lora_id, lora_name written",
        1700000000.25, [stored(block_hashes=chain[:1], token_ids=list(range(1, 17)), block_size=16)])
fixture("map_stored_parent", "a run continuing a chain: parent set",
        1700000000.5, [stored(block_hashes=chain[1:], parent_block_hash=chain[0],
                              token_ids=list(range(17, 33)), block_size=16)])
fixture("map_stored_all_fields", "every optional field set, LoRA, extra keys with tuples and bytes",
        1789095809.001, [stored(
            block_hashes=[1, 2], parent_block_hash=18446744073709551615,
            token_ids=list(range(151640, 151648)), block_size=4, lora_id=3, medium="CPU",
            lora_name="my-lora",
            extra_keys=[("my-lora", "my-salt"), ("my-lora", ("mm-3f2a", 0), b"\x00\xff\x10")],
            group_idx=1, kv_cache_spec_kind="sliding_window", kv_cache_spec_sliding_window=4096,
            locality="LOCAL", ownership="tier-2", session_id="sess-42")], 1)
fixture("map_stored_gap_in_optionals", "map encoding omits a default optional field in the middle",
        1.5, [stored(block_hashes=[7], token_ids=[1, 2], block_size=2, group_idx=0, session_id="s")])
fixture("map_removed", "one hash per BlockRemoved, as vLLM emits",
        1789095810.75, [removed([15760518052499183552])])
fixture("map_removed_optional", "BlockRemoved with group_idx, locality and ownership",
        1789095810.5, [removed([42], "CPU", group_idx=2, locality="REMOTE", ownership="o")])
fixture("map_cleared", "AllBlocksCleared is {type} only", 1789095811.0, [CLEARED])
fixture("map_mixed_dp3", "all three kinds in one step, dp rank 3",
        1789095812.125, [stored(block_hashes=[5, 6], parent_block_hash=4, token_ids=list(range(32)),
                                block_size=16, group_idx=0, kv_cache_spec_kind="full_attention",
                                extra_keys=[None, None]),
                         removed([4]), removed([3]), CLEARED], 3)
fixture("map_no_dp_rank", "data_parallel_rank None is a trailing default: 2-element batch",
        0.0, [removed([1])], None)
fixture("map_empty_events", "a batch with no events", 1789095813.5, [], 0)

# Integer, string and container boundaries.
bounds = [0, 127, 128, 255, 256, 65535, 65536, 2**32 - 1, 2**32, 2**63 - 1, 2**63, 2**64 - 1]
fixture("map_int_boundaries", "hash and token ids at every msgpack int boundary; negative ints",
        -1.25, [stored(block_hashes=bounds, parent_block_hash=2**63, token_ids=[0, 127, 128, 255, 256, 65535, 65536, 2**32 - 1],
                       block_size=1, lora_id=-1, group_idx=-33),
                stored(block_hashes=[1], token_ids=[9], block_size=1, lora_id=-129, group_idx=-32769,
                       kv_cache_spec_sliding_window=-(2**31) - 1),
                stored(block_hashes=[2], token_ids=[9], block_size=2**31, lora_id=-32, group_idx=-128,
                       kv_cache_spec_sliding_window=-(2**15))], -5)
fixture("map_str_boundaries", "fixstr/str8/str16 lengths 31, 32, 255, 256",
        3.0, [stored(block_hashes=[1], token_ids=[1], block_size=1, lora_name="a" * 31,
                     kv_cache_spec_kind="b" * 32, locality="c" * 255, ownership="d" * 256,
                     session_id="é€")], 0)
fixture("map_array16", "20 hashes and 320 token ids: array16",
        4.5, [stored(block_hashes=list(range(1000, 1020)), parent_block_hash=999,
                     token_ids=[i % 200 for i in range(320)], block_size=16)], 0)

# --- legacy array encoding (<= v0.22) ------------------------------------------------
fixture("array_stored_minimal", "required fields only: 8 elements, nil lora_name kept",
        1700000000.25, [stored(block_hashes=chain[:1], token_ids=list(range(1, 17)), block_size=16)],
        0, "array")
fixture("array_stored_group_idx", "group_idx set: extra_keys in the middle is written as nil",
        1748000000.125, [stored(block_hashes=chain, token_ids=list(range(1, 33)), block_size=16,
                                group_idx=0)], 0, "array")
fixture("array_stored_all_fields", "every field set",
        1789095809.001, [stored(
            block_hashes=[1, 2], parent_block_hash=18446744073709551615,
            token_ids=list(range(151640, 151648)), block_size=4, lora_id=3, medium="CPU",
            lora_name="my-lora", extra_keys=[("my-lora", "my-salt"), None],
            group_idx=1, kv_cache_spec_kind="sliding_window", kv_cache_spec_sliding_window=4096,
            locality="LOCAL", ownership="tier-2", session_id="sess-42")], 1, "array")
fixture("array_stored_trailing_session", "only the last optional set: every default before it is nil",
        2.5, [stored(block_hashes=[9], token_ids=[1], block_size=1, session_id="x")], 0, "array")
fixture("array_removed", "[\"BlockRemoved\", hashes, medium]",
        1748000001.5, [removed([2758186210834249151])], 0, "array")
fixture("array_removed_group", "BlockRemoved with group_idx", 1748000001.75,
        [removed([5], group_idx=1)], 0, "array")
fixture("array_cleared", "[\"AllBlocksCleared\"]", 1748000002.0, [CLEARED], 0, "array")
fixture("array_mixed_no_dp", "all kinds, no dp rank",
        1748000003.0, [stored(block_hashes=[5], parent_block_hash=4, token_ids=list(range(16)), block_size=16),
                       removed([4]), CLEARED], None, "array")
fixture("array_int_boundaries", "int boundaries in the array encoding",
        -1.25, [stored(block_hashes=bounds, parent_block_hash=2**63, token_ids=[0, 127, 128, 255, 256, 65535, 65536, 2**32 - 1],
                       block_size=1, lora_id=-1, group_idx=-33)], -5, "array")

# --- decode-only inputs ----------------------------------------------------------------
fixture("mixed_encodings", "map and array events in one batch (decode only)",
        5.5, [stored(block_hashes=[1], token_ids=[1, 2], block_size=2), removed([1]),
              stored(block_hashes=[2], token_ids=[3, 4], block_size=2, group_idx=0), CLEARED],
        0, "mixed", encode=False)

digest1 = bytes.fromhex("202da172482d928bbc42ab25b0151e2b895f13f41002e27b2ceabcfae6d332ea")
digest2 = bytes.fromhex("4a0a393805c6d2f0ed831000d41bb65980336c4c04895d5e26470bbec927f5bf")
digest16 = bytes(range(16))
raw_fixture("bin_hashes",
            "VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=0: digests as bin; kvevent keeps the last 8 bytes",
            [1.0, [["BlockStored", [digest2], digest1, list(range(17, 33)), 16, None, "GPU", None],
                   {"type": "BlockRemoved", "block_hashes": [digest16, b"\x01\x02"], "medium": "GPU"}], 0],
            {"ts": 1.0, "dp_rank": 0, "events": [
                {"type": "BlockStored", "block_hashes": [2758186210834249151],
                 "parent_block_hash": 3236607068019569386, "token_ids": list(range(17, 33)),
                 "block_size": 16, "lora_id": None, "medium": "GPU", "lora_name": None},
                {"type": "BlockRemoved", "block_hashes": [int.from_bytes(digest16, "big") & (2**64 - 1), 258],
                 "medium": "GPU"}]})

ext = msgpack.ExtType(5, b"abc")
raw_fixture("unknown_fields",
            "unknown trailing array fields and unknown map keys of every type are skipped",
            [2.0, [["BlockStored", [1], None, [1], 1, None, "GPU", None, None, None, None, None,
                    None, None, None, "future", ext, [1, {"a": [b"x", 1.5]}], {"k": ext}],
                   {"event_version": 1, "type": "BlockRemoved", "typed_extra_keys": [{"lora": "x"}],
                    "block_hashes": [7], "blob": b"\x00" * 300, "medium": "GPU",
                    "nested": {"m": [[[[]]]], "f": -2.5}}],
             0, "extra batch field"],
            {"ts": 2.0, "dp_rank": 0, "events": [
                {"type": "BlockStored", "block_hashes": [1], "parent_block_hash": None, "token_ids": [1],
                 "block_size": 1, "lora_id": None, "medium": "GPU", "lora_name": None},
                {"type": "BlockRemoved", "block_hashes": [7], "medium": "GPU"}]})

raw_fixture("sglang_batch",
            "SGLang: [ts, events, attn_dp_rank], events without medium/lora_name (older field set)",
            [1723456789.5, [["BlockStored", [11, 12], 10, list(range(8)), 4, None],
                            ["BlockRemoved", [10]], ["AllBlocksCleared"]], 1],
            {"ts": 1723456789.5, "dp_rank": 1, "events": [
                {"type": "BlockStored", "block_hashes": [11, 12], "parent_block_hash": 10,
                 "token_ids": list(range(8)), "block_size": 4, "lora_id": None, "medium": "", "lora_name": None},
                {"type": "BlockRemoved", "block_hashes": [10], "medium": ""},
                {"type": "AllBlocksCleared"}]})

raw_fixture("map_batch",
            "EventBatch without array_like (a development branch): the batch itself as a map",
            {"ts": 9.25, "events": [{"type": "AllBlocksCleared"}], "data_parallel_rank": 2},
            {"ts": 9.25, "dp_rank": 2, "events": [{"type": "AllBlocksCleared"}]})

raw_fixture("loose_scalars",
            "int timestamp, negative int hash, nil medium, \"type\" last",
            [7, [{"block_hashes": [-1], "medium": None, "type": "BlockRemoved"}], None],
            {"ts": 7.0, "dp_rank": None, "events": [
                {"type": "BlockRemoved", "block_hashes": [2**64 - 1], "medium": ""}]})

raw_fixture("float32_ts", "a float32 timestamp (msgspec never writes one; other encoders may)",
            [1.5, [["AllBlocksCleared"]], 0], {"ts": 1.5, "dp_rank": 0, "events": [{"type": "AllBlocksCleared"}]},
            single_float=True)


def main():
    os.makedirs(OUT, exist_ok=True)
    for f in FIXTURES:
        path = os.path.join(OUT, f["name"] + ".json")
        with open(path, "w") as fh:
            json.dump(f, fh, indent=1, ensure_ascii=False)
            fh.write("\n")
    print(f"wrote {len(FIXTURES)} fixtures to {os.path.normpath(OUT)}", file=sys.stderr)


if __name__ == "__main__":
    main()

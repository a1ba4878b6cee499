#!/usr/bin/python3
"""Writes model/kvevent/testdata/sglang_*.json: KV event batches as SGLang publishes them
(issue 17).

SGLang's events were read with the search tool in sgl-project/sglang (2025-2026):
python/sglang/srt/disaggregation/kv_events.py (the structs and ZmqEventPublisher) and
python/sglang/srt/mem_cache/events.py (KVCacheEventMixin, which fills them). This script
writes the bytes msgspec.msgpack.Encoder() gives for those structs by the encoder's rules,
with a small msgpack writer of its own (msgspec is not installed here):

  * EventBatch and KVCacheEvent are msgspec Structs with array_like=True, tag=True on the
    events, and, in current SGLang, *without* omit_defaults: every field is written, None
    as nil, so the batch is always [ts, events, attn_dp_rank] (the publisher fills the
    rank when it is None) and the events are
        ["BlockStored", block_hashes, parent_block_hash, token_ids, block_size, lora_id, medium]
        ["BlockRemoved", block_hashes, medium]
        ["AllBlocksCleared"]
    BlockStoredWithMetadata (tag "BlockStored", kw_only) appends its metadata field, a
    plain Struct and so a map: {"cache_salt": salt}.
  * Older SGLang had omit_defaults and no medium: BlockStored ended at lora_id (a
    required field, so written even when None) and BlockRemoved was [tag, block_hashes];
    the first publishers had no attn_dp_rank at all ([ts, events]).
  * One BlockStored per page (page_size tokens, block_size = the page's length) with a
    single hash, its parent the previous page's hash (None at the tree's root); one
    BlockRemoved per radix node, with every page hash of the node; medium "GPU" for the
    device cache, "CPU_PINNED" for the host tier (StorageMedium).
  * Hashes are hash_str_to_int64 of the page's hash string: the first 16 hex digits of a
    SHA-256 over the parent's digest and the page's token ids as 4-byte little-endian
    unsigned ints, as a signed int64, so about half are negative. Under EAGLE speculative
    decoding the radix keys are bigrams and token_ids holds [t, next] pairs.
  * msgspec writes a non-negative int in the smallest unsigned form (fixint, 0xcc..0xcf),
    a negative one in the smallest signed form (negative fixint, 0xd0..0xd3), floats as
    float64 (0xcb), str as fixstr/str8/16/32 and arrays and maps with the smallest header.
  * Newer SGLang main (PRs #37271/#37482) can also write events as maps under "type",
    with cache_salt and session_id as keys; one fixture has that shape.

Each fixture has the fields model/kvevent's fixture tests read ("name", "description",
"encoding", "encode", "hex", "batch", the decoded value with kvevent's field names, plus
"engine": "sglang", the schema to decode with). "encode": true means
kvevent.AppendBatch with EncodingSGLang must give exactly "hex". For actors/replica's
TestEventFixtures each also says what the gateway is configured with ("gateway"), the
prompts it then sees with the number of their blocks the index must hold ("prompts"),
how many stored blocks stay unmapped ("unmapped") and the replica warning the events must
raise ("warning", "" for none).

Run from anywhere (Python 3 standard library only): scripts/gen-kvevent-sglang-fixtures.py
"""

import hashlib
import json
import os
import random
import struct
import sys

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "model", "kvevent", "testdata")
TS = 1780000000.125
GATEWAY = {"model": "m", "block_size": 4, "vocab_size": 32000}


# --- msgpack as msgspec writes these Python values ---

def pack(v):
    if v is None:
        return b"\xc0"
    if isinstance(v, bool):
        return b"\xc3" if v else b"\xc2"
    if isinstance(v, int):
        return pack_int(v)
    if isinstance(v, float):
        return b"\xcb" + struct.pack(">d", v)
    if isinstance(v, str):
        b = v.encode("utf-8")
        return header(len(b), 0xa0, 31, 0xd9, 0xda, 0xdb) + b
    if isinstance(v, (list, tuple)):
        return header(len(v), 0x90, 15, None, 0xdc, 0xdd) + b"".join(pack(x) for x in v)
    if isinstance(v, dict):
        return header(len(v), 0x80, 15, None, 0xde, 0xdf) + b"".join(pack(k) + pack(x) for k, x in v.items())
    raise TypeError(type(v))


def pack_int(v):
    if v >= 0:
        if v <= 0x7F:
            return bytes([v])
        for code, fmt, top in ((0xCC, ">B", 0xFF), (0xCD, ">H", 0xFFFF), (0xCE, ">I", 0xFFFFFFFF)):
            if v <= top:
                return bytes([code]) + struct.pack(fmt, v)
        return b"\xcf" + struct.pack(">Q", v)
    if v >= -32:
        return struct.pack(">b", v)
    for code, fmt, low in ((0xD0, ">b", -(2**7)), (0xD1, ">h", -(2**15)), (0xD2, ">i", -(2**31))):
        if v >= low:
            return bytes([code]) + struct.pack(fmt, v)
    return b"\xd3" + struct.pack(">q", v)


def header(n, fix, fixmax, c8, c16, c32):
    if n <= fixmax:
        return bytes([fix | n])
    if c8 is not None and n <= 0xFF:
        return bytes([c8, n])
    if n <= 0xFFFF:
        return bytes([c16]) + struct.pack(">H", n)
    return bytes([c32]) + struct.pack(">I", n)


# --- SGLang's page hashes ---

def page_hash(tokens, prior_hex):
    h = hashlib.sha256()
    if prior_hex:
        h.update(bytes.fromhex(prior_hex))
    for t in tokens:
        if isinstance(t, tuple):  # EAGLE bigram: both ids go in
            for x in t:
                h.update(x.to_bytes(4, "little"))
        else:
            h.update(t.to_bytes(4, "little"))
    return h.hexdigest()


def to_int64(hex_str):
    v = int(hex_str[:16], 16)
    return v - 2**64 if v >= 2**63 else v


def unsigned(v):
    return v & (2**64 - 1)


def pages(tokens, page_size, prior_hex=None, bigram=False):
    """The (int64 hash, page tokens as sent, hex) of each page of a radix node. A bigram
    key pairs each token with the next; the node's last token with the one after it,
    which the prompts below make 1."""
    out = []
    raw = tokens + [1]
    for start in range(0, len(tokens), page_size):
        page = tokens[start:start + page_size]
        key = [(raw[start + i], raw[start + i + 1]) for i in range(len(page))] if bigram else page
        prior_hex = page_hash(key, prior_hex)
        out.append((to_int64(prior_hex), key, prior_hex))
    return out


# --- events as SGLang's structs encode ---

def stored(h, parent, tokens, medium="GPU", salt=None, legacy=False):
    ev = ["BlockStored", [h], parent, [list(t) if isinstance(t, tuple) else t for t in tokens], len(tokens), None]
    if not legacy:
        ev.append(medium)
    if salt is not None:
        ev.append({"cache_salt": salt})
    return ev


def removed(hashes, medium="GPU", legacy=False):
    return ["BlockRemoved", hashes] if legacy else ["BlockRemoved", hashes, medium]


def node_events(tokens, page_size, parent=None, **kw):
    """One BlockStored per page, chained, as _record_store_event emits them."""
    evs, ps = [], pages(tokens, page_size, kw.pop("prior_hex", None), kw.pop("bigram", False))
    for h, key, _ in ps:
        evs.append(stored(h, parent, key, **kw))
        parent = h
    return evs, ps


def expect_stored(ev):
    e = {"type": "BlockStored", "block_hashes": [unsigned(ev[1][0])],
         "parent_block_hash": None if ev[2] is None else unsigned(ev[2]),
         "token_ids": [t[0] if isinstance(t, list) else t for t in ev[3]], "block_size": ev[4],
         "lora_id": ev[5], "medium": ev[6] if len(ev) > 6 and ev[6] is not None else ""}
    if len(ev) > 7:
        e["cache_salt"] = ev[7]["cache_salt"]
    return e


def expect(ev):
    if ev[0] == "BlockStored":
        return expect_stored(ev)
    if ev[0] == "BlockRemoved":
        return {"type": "BlockRemoved", "block_hashes": [unsigned(h) for h in ev[1]],
                "medium": ev[2] if len(ev) > 2 and ev[2] is not None else ""}
    return {"type": ev[0]}


FIXTURES = []


def fixture(name, description, events, dp_rank=0, encode=True, batch=None, expected=None,
            prompts=(), unmapped=0, warning="", gateway=GATEWAY):
    value = batch if batch is not None else [TS, events, dp_rank]
    FIXTURES.append({
        "name": name,
        "description": description,
        "engine": "sglang",
        "encoding": "sglang",
        "encode": encode,
        "hex": pack(value).hex(),
        "batch": expected if expected is not None else
        {"ts": value[0], "dp_rank": value[2] if len(value) > 2 else None, "events": [expect(e) for e in events]},
        "gateway": gateway,
        "prompts": [{"token_ids": t, "cached_blocks": n} for t, n in prompts],
        "unmapped": unmapped,
        "warning": warning,
    })


def main():
    rng = random.Random(17)
    tok = lambda n: [rng.randrange(1, 32000) for _ in range(n)]

    # A system prompt of 5 pages, then two conversations branching off it: three radix
    # nodes, the children's first pages chained to the system prompt's last page.
    system = tok(20)
    evs, sys_pages = node_events(system, 4)
    a, b = tok(8), tok(12)
    ea, _ = node_events(a, 4, parent=sys_pages[-1][0], prior_hex=sys_pages[-1][2])
    eb, _ = node_events(b, 4, parent=sys_pages[-1][0], prior_hex=sys_pages[-1][2])
    assert any(p[0] < 0 for p in sys_pages), "want a negative hash among them"
    fixture("sglang_stored_chain",
            "current SGLang: one 7-element BlockStored per page, chained through parent_block_hash, "
            "signed int64 hashes, medium GPU, attn_dp_rank 0",
            evs + ea + eb,
            prompts=[(system + a + [1], 7), (system + b + [1], 8), (system + tok(5), 5)])

    # Eviction: BlockRemoved carries every page hash of the node; then a reset.
    leaf, leaf_pages = node_events(tok(8), 4)
    fixture("sglang_removed_node",
            "a radix node evicted in one BlockRemoved of its page hashes, then AllBlocksCleared",
            leaf + [removed([p[0] for p in leaf_pages]), ["AllBlocksCleared"]], dp_rank=0)

    # cache_salt: BlockStoredWithMetadata, 8 elements; the gateway cannot rebuild salted hashes.
    salted_tokens = tok(8)
    salted, _ = node_events(salted_tokens, 4, salt="tenant-7")
    fixture("sglang_cache_salt",
            "BlockStoredWithMetadata: a trailing {cache_salt} map; the salted pages stay unmapped",
            salted, prompts=[(salted_tokens + [1], 0)], unmapped=2)

    # Host tier and a DP-attention rank: CPU_PINNED pages are not the device cache.
    host_tokens = tok(8)
    host, _ = node_events(host_tokens, 4, medium="CPU_PINNED")
    fixture("sglang_host_tier_dp_rank",
            "HiCache host pages (medium CPU_PINNED) from attn_dp_rank 1: skipped, not indexed",
            host, dp_rank=1, prompts=[(host_tokens + [1], 0)])

    # Older SGLang: omit_defaults, no medium; the oldest batch has no attn_dp_rank.
    old_tokens = tok(12)
    old, old_pages = node_events(old_tokens, 4, legacy=True)
    fixture("sglang_legacy_no_medium",
            "SGLang before medium: 6-element BlockStored, 2-element BlockRemoved, batch [ts, events]",
            old + [removed([old_pages[-1][0]], legacy=True)], encode=False, batch=[TS, old + [removed([old_pages[-1][0]], legacy=True)]],
            prompts=[(old_tokens + [1], 2)])

    # EAGLE bigram keys: token_ids are [t, next] pairs; each pair's first id is the page's.
    bi_tokens = tok(12)
    bi, _ = node_events(bi_tokens, 4, bigram=True)
    fixture("sglang_bigram_tokens",
            "EAGLE speculative decoding: token_ids as [token, next_token] pairs",
            bi, encode=False, prompts=[(bi_tokens + [1], 3)])

    # Map events (#37482): "type" first, then the fields by name, session_id extra.
    map_tokens = tok(8)
    mp = pages(map_tokens, 4)
    map_events = [{"type": "BlockStored", "block_hashes": [mp[0][0]], "parent_block_hash": None,
                   "token_ids": map_tokens[:4], "block_size": 4, "lora_id": None, "medium": "GPU",
                   "session_id": "s-1"},
                  {"type": "BlockStored", "block_hashes": [mp[1][0]], "parent_block_hash": mp[0][0],
                   "token_ids": map_tokens[4:], "block_size": 4, "lora_id": None, "medium": "GPU"}]
    fixture("sglang_map_events",
            "newer SGLang main: events as maps under \"type\", with a session_id key",
            map_events, encode=False,
            expected={"ts": TS, "dp_rank": 0, "events": [
                dict(expect_stored(stored(mp[0][0], None, map_tokens[:4])), session_id="s-1"),
                expect_stored(stored(mp[1][0], mp[0][0], map_tokens[4:]))]},
            prompts=[(map_tokens + [1], 2)])

    # SGLang's default --page-size is 1: pages of one token never match blocks of four.
    one = tok(6)
    ones, _ = node_events(one, 1)
    fixture("sglang_page_size_1",
            "SGLang's default --page-size 1: one-token pages against a gateway block_size of 4",
            ones, prompts=[(one + [1], 0)], unmapped=6, warning="kv_events_block_size")

    os.makedirs(OUT, exist_ok=True)
    for f in FIXTURES:
        with open(os.path.join(OUT, f["name"] + ".json"), "w") as fh:
            json.dump(f, fh, indent=1, ensure_ascii=False)
            fh.write("\n")
    print(f"wrote {len(FIXTURES)} fixtures to {os.path.normpath(OUT)}", file=sys.stderr)


if __name__ == "__main__":
    main()

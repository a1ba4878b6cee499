#!/usr/bin/env python3
"""Splits a Go profile into request-path categories, per request.

Reads `go tool pprof -traces` output on stdin (the same format as
scripts/flamegraph.py) and prints a Markdown table: each sample goes to the
first rule below that it matches (a rule matches when every one of its
regular expressions matches some frame of the stack), so the rows partition
the profile and sum to its total. Values are divided by REQUESTS; UNIT is
"us" (CPU seconds → µs per request) or "n" (allocated objects per request).
Usage: go tool pprof -traces BIN PROF | profile-table.py REQUESTS UNIT
"""
import importlib.util
import os
import re
import sys

spec = importlib.util.spec_from_file_location("flamegraph", os.path.join(os.path.dirname(__file__), "flamegraph.py"))
fg = importlib.util.module_from_spec(spec)
spec.loader.exec_module(fg)

RULES = [
    ("tokenize (builtin:sim)", [r"transport/tokenize\.|edgeTokenizer|model/token\."]),
    ("prefix hash", [r"prompt\.\(\*Preparer\)\.hash|xxh3"]),
    ("metrics", [r"VictoriaMetrics/metrics|transport/telemetry\."]),
    ("logging / decision log", [r"log/slog|transport/decisionlog\."]),
    ("lease (acquire, first byte, release)", [r"replica\.\(\*(Counters|Lease)\)\."]),
    ("gather + estimate broadcast (routing actor)", [r"routing\.\(\*routingActor\)\.(gathered|broadcast)|routing\.(NewGather|\(\*Gather\))"]),
    ("replica actor estimate", [r"replica\.\(\*replicaActor\)\.estimate|model/estimate\."]),
    ("decision (routing actor: policy, scheduler)", [r"routing\.\(\*routingActor\)\.Receive"]),
    ("replica actors (scrape, other messages)", [r"replica\.\(\*replicaActor\)"]),
    ("mailbox hops (protoactor send, mailbox, dispatch)", [r"protoactor-go"]),
    ("waiting for the decision (send + channel answer)", [r"frontend\.(\(\*Server\)\.pick|Decide)"]),
    ("client: HTTP request parse (headers, URI, read syscall)", [r"fasthttp\.\(\*RequestHeader\)\.(Read|tryRead|readLoop|parse)|fasthttp\.\(\*Request\)\.(parseURI|URI)"]),
    ("client: body read", [r"frontend\.(\(\*Server\)\.readBody|readLimited)|fasthttp\.\(\*requestStream\)|fasthttp\.\(\*Request\)\.(ContinueReadBody|readBody)"]),
    ("request JSON scan (model, policy fields)", [r"frontend\.(ResolveModel|PreparePolicy|PolicyRequest|\(\*Server\)\.policyRequest)"]),
    ("upstream: request write (headers + body + syscall)", [r"transport/upstream\.", r"fasthttp\.\(\*Request(Header)?\)\.Write|syscall\.write|bufio\.\(\*Writer\)\.Flush"]),
    ("upstream: response read (headers + syscall)", [r"transport/upstream\."]),
    ("response relay to client (stream copy, usage scan, chunked write)", [r"frontend\.(\(\*Server\)\.relay|StreamUsage|\(\*request\)\.streamUsage)|fasthttp\.(writeBodyChunked|NewStreamReader|writeChunk)|openai\.\(\*StreamTail\)"]),
    ("client: response header write + flush", [r"fasthttp\.(writeResponse|\(\*Response\)\.write)|fasthttp\.\(\*ResponseHeader\)"]),
    ("frontend: other (headers copy, context, attempt setup)", [r"transport/frontend\."]),
    ("fasthttp server: other (conn loop, ctx reset)", [r"fasthttp\.\(\*Server\)|fasthttp\.\(\*workerPool\)"]),
    ("runtime: GC", [r"runtime\.(gcBgMarkWorker|bgsweep|bgscavenge|gcDrain|markroot)"]),
    ("runtime: scheduler, netpoll, timers (no app frame)", [r"runtime\.(mcall|schedule|findRunnable|park_m|netpoll|sysmon|mstart)"]),
    ("other", [r"."]),
]


def main():
    n = float(sys.argv[1])
    unit = sys.argv[2]
    rules = [(name, [re.compile(r) for r in rs]) for name, rs in RULES]
    sums = {name: 0.0 for name, _ in rules}
    total = 0.0
    for v, stack in fg.parse(sys.stdin):
        total += v
        for name, rs in rules:
            if all(any(r.search(f) for f in stack) for r in rs):
                sums[name] += v
                break
    scale = 1e6 if unit == "us" else 1.0
    head = "µs CPU / request" if unit == "us" else "objects / request"
    print(f"| category | {head} | share |")
    print("|---|---:|---:|")
    for name, _ in rules:
        if sums[name]:
            print(f"| {name} | {sums[name] * scale / n:.1f} | {100 * sums[name] / total:.1f}% |")
    print(f"| **total in profile** | **{total * scale / n:.1f}** | 100% |")


if __name__ == "__main__":
    main()

#!/usr/bin/env bash
# The speed target of inferrail whatif (issue 30): 100,000 requests, 8
# policies, 8 replica counts, on two cores. The request stream is the shared
# Mooncake conversation trace (first 30 minutes, 5,719 requests) tiled to
# 100,000 requests: tile k is the trace again, its timestamps shifted by k
# times (the trace's span + 1 s) and its hash ids by k times (the largest id
# + 1), so the tiles share no prefix and the rate stays the trace's own.
# Prints the wall time and the peak memory, and leaves the report in OUT.
# Usage: scripts/whatif-100k.sh path/to/inferrail [OUT] [whatif flags...]
set -euo pipefail
bin=${1:?usage: whatif-100k.sh path/to/inferrail [OUT] [whatif flags...]}
out=${2:-/tmp/whatif-100k}
shift $(( $# >= 2 ? 2 : 1 ))
trace=${TRACE:-/work/shared/traces/mooncake/conversation_trace_first30min.jsonl}
tiled=$(mktemp --suffix=.jsonl)
trap 'rm -f "$tiled"' EXIT

python3 - "$trace" "$tiled" 100000 <<'PY'
import json, sys
src, dst, want = sys.argv[1], sys.argv[2], int(sys.argv[3])
recs = [json.loads(l) for l in open(src) if l.strip()]
span = max(r["timestamp"] for r in recs) + 1000
ids = max(max(r["hash_ids"], default=0) for r in recs) + 1
with open(dst, "w") as f:
    n, k = 0, 0
    while n < want:
        for r in recs:
            if n == want:
                break
            t = dict(r, timestamp=r["timestamp"] + k * span, hash_ids=[h + k * ids for h in r["hash_ids"]])
            f.write(json.dumps(t, separators=(",", ":")) + "\n")
            n += 1
        k += 1
PY

/usr/bin/time -f "whatif-100k: %e s wall, %U s user, %M KB peak" "$bin" whatif --trace "$tiled" --out "$out" \
  --engine h100-8b --engine-block-size 256 --slo-ttft-p99 10s --scale 1 --replicas 2,4,6,8,10,12,14,16 \
  --policies round_robin,random,least_request,p2c,prefix_hash,kv_aware,cost_model,llmd-helm-default "$@"

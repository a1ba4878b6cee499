#!/usr/bin/env bash
# Whatif against reality (issue 30): three simulated engines behind a real
# gateway with its request log on, in real time, on W1, W2, mix and a slice
# of the Mooncake trace; then inferrail whatif replays each log in virtual
# time on the same fleet (the logged policy on the logged replica count,
# the simulator's engine) and prints the replay beside what was measured.
# Usage: scripts/whatif-reality.sh path/to/inferrail OUT [TRACE]
# The machine should be otherwise idle: real-time TTFTs include its noise.
set -euo pipefail
bin=${1:?usage: whatif-reality.sh path/to/inferrail OUT [TRACE]}
out=${2:?usage: whatif-reality.sh path/to/inferrail OUT [TRACE]}
trace=${3:-../shared/traces/mooncake/conversation_trace_first30min.jsonl}
mkdir -p "$out"
# The engines' block size (16) as the log's granularity, so a replay keeps
# every shared block (a prompt's shared prefix can end inside 512 tokens).
common=(--policies cost_model --replicas 3 --request-log "$out/logs" --request-log-block-size 16 --out "$out/runs")
run() { # NAME compare-flags...
  local name=$1
  shift
  echo "== $name: bench compare $*" >&2
  "$bin" bench compare "$@" "${common[@]}" >"$out/$name.compare.md"
}
run W1 --workload W1 --rate 2.5 --duration 2m --warmup 30s
run W2 --workload W2 --rate 7 --duration 2m --warmup 30s
run mix --workload mix --rate 3.5 --duration 2m --warmup 30s
# The trace's first 4 minutes, a quarter of its conversations (inferred
# sessions), at its own clock: about 0.8 req/s of 12.8k-token prompts on
# engines with 10k tokens/s of prefill each.
run trace --trace "$trace" --to 4m --sample-sessions 0.25 --warmup 0s
for log in "$out"/logs/*/*/*.requests.jsonl; do
  name=$(basename "$(dirname "$(dirname "$log")")")
  echo "== $name: whatif --trace $log" >&2
  "$bin" whatif --trace "$log" --engine sim --fit-context --policies cost_model --replicas 3 --scale 1 \
    --out "$out/whatif/$name" 2>/dev/null | grep -E '^(trace|fidelity)' | sed "s|^|$name: |"
done
